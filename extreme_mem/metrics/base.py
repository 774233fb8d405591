"""`MetricPlugin`: the contract every metric plugin follows.

A plugin declares what it `needs` from a step (a set of `Need` names: the trainer computes only
those, only on the steps the plugin runs), how often it runs (`every_n_steps`, or only at
evaluation through `evaluate`), and follows the Keras metric life cycle: state created in
`__init__`, then `update(outputs)`, `result() -> {tag: float}`, `reset()`. Tags are
`<split>/<quantity>[/<layer>]`.
"""

import abc
import dataclasses
from typing import Any, Optional


from extreme_mem.train import outputs as outputs_lib

# What a plugin may ask the trainer for on the steps it runs (one set of names, owned by the trainer).
Need = outputs_lib.Need
NEEDS = Need.ALL


class MetricPlugin(abc.ABC):
    """Base class of metric plugins.

    Attributes:
      needs: subset of `Need.ALL`; empty means only the step's logits, labels and losses
        (`Need.OUTPUTS`, which every observed step has).
      wants_gram: derived from `needs` (`Need.GRAM in needs`); do not set it.
      every_n_steps: run on steps where `step % every_n_steps == 0`; None: evaluation only.
    """

    needs: frozenset = frozenset()
    wants_gram: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.needs = outputs_lib.check_needs(frozenset(cls.needs), f'{cls.__name__}.needs')
        cls.wants_gram = Need.GRAM in cls.needs

    def __init__(self, every_n_steps: Optional[int] = None):
        if every_n_steps is not None and (isinstance(every_n_steps, bool) or not isinstance(every_n_steps, int)
                                          or every_n_steps <= 0):
            raise ValueError(f'every_n_steps must be a positive integer or None, got {every_n_steps!r}.')
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
