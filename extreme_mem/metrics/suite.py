"""`MetricSuite`: the active metric plugins, seen by the trainer as one observer-side object.

It tells which needs a step has (the union over the plugins that run at that step, so the Gram
matrix is computed only on steps where a plugin that needs it runs), feeds them the step
outputs, and merges their results, raising if two plugins emit the same tag.
"""

from typing import Sequence

from extreme_mem.metrics import base


class MetricSuite:
    """A list of plugins behind one `needs` / `update` / `result` / `evaluate` / `reset` interface."""

    def __init__(self, plugins: Sequence[base.MetricPlugin]):
        self.plugins = list(plugins)

    def needs(self, step: int) -> frozenset:
        """Union of the needs of plugins that want `step`, plus `Need.OUTPUTS`; empty if none does."""
        wanted = [p for p in self.plugins if p.wants_step(step)]
        if not wanted:
            return frozenset()
        return frozenset().union(*(p.needs for p in wanted)) | {base.Need.OUTPUTS}

    def update(self, step: int, outputs) -> None:
        for p in self.plugins:
            if p.wants_step(step):
                p.update(outputs)

    def result(self, step: int) -> dict:
        """Merged results of the plugins that ran at `step`."""
        return _merge((p, p.result()) for p in self.plugins if p.wants_step(step))

    def evaluate(self, context: base.EvalContext) -> dict:
        """Merged evaluation-time results of every plugin."""
        return _merge((p, p.evaluate(context)) for p in self.plugins)

    def reset(self) -> None:
        for p in self.plugins:
            p.reset()


def _merge(results) -> dict:
    """`{tag: value}` of `(plugin, values)` pairs; raises naming both plugins on a repeated tag."""
    merged, owner = {}, {}
    for plugin, values in results:
        for tag, value in values.items():
            if tag in merged:
                raise ValueError(f'Metric tag {tag!r} emitted by two plugins ({type(owner[tag]).__name__} and '
                                 f'{type(plugin).__name__}).')
            merged[tag], owner[tag] = value, plugin
    return merged
