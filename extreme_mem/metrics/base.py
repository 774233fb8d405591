"""`MetricPlugin`: the contract every metric plugin follows.

A plugin declares what it `needs` from a step, how often it runs (`every_n_steps`, or only at
evaluation), and follows the Keras metric life cycle: state created in `__init__`, then
`update(outputs)`, `result() -> {tag: float}`, `reset()`. Tags are `<split>/<quantity>[/<layer>]`.
"""

import abc
import dataclasses
from typing import Any, Optional

# What a plugin may ask the trainer for on the steps it runs.
NEEDS = frozenset(
    {
        'representations',  # probe-layer activations of the batch
        'grad_stats',  # per-example gradient statistics (pergrad/)
        'weights',  # variable values and mean gradients
        'full_dataset',  # a pass over whole splits at evaluation time
    }
)


class MetricPlugin(abc.ABC):
    """Base class of metric plugins.

    Attributes:
      needs: subset of `NEEDS`; an empty set means only the cheap step outputs.
      every_n_steps: run on steps where `step % every_n_steps == 0`; None: evaluation only.
    """

    needs: frozenset = frozenset()

    def __init__(self, every_n_steps: Optional[int] = None):
        if every_n_steps is not None and every_n_steps <= 0:
            raise ValueError(f'every_n_steps must be a positive integer or None, got {every_n_steps!r}.')
        unknown = set(self.needs) - NEEDS
        if unknown:
            raise ValueError(f'{type(self).__name__}.needs has unknown entries {sorted(unknown)}; valid: {sorted(NEEDS)}.')
        self.every_n_steps = every_n_steps

    def wants_step(self, step: int) -> bool:
        """True when this plugin must see the outputs of optimizer step `step`."""
        return self.every_n_steps is not None and step % self.every_n_steps == 0

    def reset(self) -> None:
        """Clears accumulated state. [Optional]"""

    def update(self, outputs) -> None:
        """Accumulates one step's `StepOutputs`. [Optional: evaluation-only plugins skip it]"""

    def result(self) -> dict[str, float]:
        """Returns `{tag: value}` for what was accumulated since the last reset."""
        return {}

    def evaluate(self, context: 'EvalContext') -> dict[str, float]:
        """[Optional] Runs at every evaluation (full passes over the splits); returns `{tag: value}`."""
        del context
        return {}


@dataclasses.dataclass
class EvalContext:
    """What an evaluation-time plugin may read.

    Attributes:
      step: optimizer steps taken.
      model: the model being trained.
      data: `data.base.Data` (splits with label provenance).
      evals: split name -> `train.trainer.EvalResult` (per-example losses and predictions).
    """

    step: int
    model: Any
    data: Any
    evals: dict
