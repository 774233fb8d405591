"""`MetricSuite`: the active metric plugins, seen by the trainer as one observer-side object.

It tells which needs a step has (union over plugins that want the step), feeds them the step
outputs, and merges their results, raising if two plugins emit the same tag.
"""

from typing import Sequence

from extreme_mem.metrics import base


class MetricSuite:
    """A list of plugins behind one `needs` / `update` / `result` / `reset` interface."""

    def __init__(self, plugins: Sequence[base.MetricPlugin]):
        self.plugins = list(plugins)

    def needs(self, step: int) -> frozenset:
        """Union of the needs of plugins that want `step`; at least `{'outputs'}` if any does."""
        wanted = [p for p in self.plugins if p.wants_step(step)]
        if not wanted:
            return frozenset()
        return frozenset().union(*(p.needs for p in wanted)) | {'outputs'}

    def wants_gram(self) -> bool:
        return any(getattr(p, 'wants_gram', False) for p in self.plugins)

    def update(self, step: int, outputs) -> None:
        for p in self.plugins:
            if p.wants_step(step):
                p.update(outputs)

    def result(self, step: int) -> dict:
        """Merged results of the plugins that ran at `step`."""
        merged: dict = {}
        for p in self.plugins:
            if not p.wants_step(step):
                continue
            for tag, value in p.result().items():
                if tag in merged:
                    raise ValueError(f'Metric tag {tag!r} emitted by two plugins ({type(p).__name__} and another).')
                merged[tag] = value
        return merged

    def evaluate(self, context: base.EvalContext) -> dict:
        """Merged evaluation-time results of every plugin."""
        merged: dict = {}
        for p in self.plugins:
            for tag, value in p.evaluate(context).items():
                if tag in merged:
                    raise ValueError(f'Metric tag {tag!r} emitted by two plugins ({type(p).__name__} and another).')
                merged[tag] = value
        return merged

    def reset(self) -> None:
        for p in self.plugins:
            p.reset()
