"""Helpers shared by the metric plugins: running means per tag and per-layer gradient statistics.

`TagMeans` accumulates `{tag: value}` between `reset()`s in numpy (the tag set of a plugin depends
on the model's layers, so Keras `Mean` objects cannot all be created in `__init__`).
`layer_stats` turns a step's per-variable `pergrad.stats.GradStats` into per-layer numpy
statistics (kernel + bias folded), plus the logit-gradient statistics under `LOGITS_GRAD`.
`LayerGradStatsPlugin` is the skeleton of every plugin that reduces each layer's statistics to
scalars: subclasses only say how (`layer_values`).
"""

from typing import Optional, Sequence

import numpy as np

from extreme_mem.metrics import base
from extreme_mem.pergrad import stats

# Pseudo-layer name of the statistics of ∂ loss_i / ∂ logits_i.
LOGITS_GRAD = 'logits_grad'


class TagMeans:
    """Running mean of scalar values per tag."""

    def __init__(self):
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def add(self, tag: str, value: float) -> None:
        """Adds one observation of `tag` (NaN/inf are rejected by callers, not here)."""
        self._sums[tag] = self._sums.get(tag, 0.0) + float(value)
        self._counts[tag] = self._counts.get(tag, 0) + 1

    def reset(self) -> None:
        self._sums.clear()
        self._counts.clear()

    def result(self) -> dict[str, float]:
        """`{tag: mean since the last reset}`; empty when nothing was added."""
        return {tag: self._sums[tag] / self._counts[tag] for tag in self._sums}


def to_numpy(s: stats.GradStats) -> stats.GradStats:
    """A `GradStats` of float64 numpy arrays."""
    return stats.GradStats(*(None if f is None else np.asarray(f, dtype=np.float64) for f in s))


def layer_stats(
    outputs, layers: Optional[Sequence[str]] = None, include_logits_grad: bool = True
) -> dict[str, stats.GradStats]:
    """Per-layer numpy gradient statistics of one step.

    Args:
      outputs: `StepOutputs` with `grad_stats` (and `logit_stats` if `include_logits_grad`).
      layers: keep only these layer names (None: all).
      include_logits_grad: add the logit-gradient statistics under `LOGITS_GRAD`.

    Returns:
      layer name -> numpy `GradStats`.

    Raises:
      ValueError: the step carries no gradient statistics.
    """
    if outputs.grad_stats is None:
        raise ValueError('StepOutputs.grad_stats is None: the trainer did not compute per-example gradient stats.')
    per_layer = stats.by_layer({p: to_numpy(s) for p, s in outputs.grad_stats.items()})
    if layers is not None:
        per_layer = {k: v for k, v in per_layer.items() if k in set(layers)}
    if include_logits_grad and outputs.logit_stats is not None:
        per_layer[LOGITS_GRAD] = to_numpy(outputs.logit_stats)
    return per_layer


def check_labels(labels: np.ndarray, class_counts: np.ndarray) -> None:
    """Raises if the labels do not match the per-class counts the statistics were computed with.

    Classes outside the engine's `classes` subset have count 0 and are not checked.

    Raises:
      ValueError: the labels do not describe the same batch (e.g. a different replica order).
    """
    counts = np.bincount(labels, minlength=len(class_counts))[: len(class_counts)]
    used = class_counts > 0
    if len(labels) and not np.array_equal(counts[used], class_counts[used]):
        raise ValueError(
            f'StepOutputs.labels do not match GradStats.class_counts ({counts[used]} vs {class_counts[used]}); '
            'labels must be the global batch in the order the gradient statistics use.'
        )


class LayerGradStatsPlugin(base.MetricPlugin):
    """Base of plugins reducing each layer's `GradStats` to scalars, averaged between resets.

    Tags: `<split>/<quantity>/<layer>` for every `{quantity: value}` that `layer_values` returns
    (None values are skipped); `<layer>` = `logits_grad` for the logit gradients.

    Args:
      every_n_steps: optimizer steps between updates (diagnostic steps are costly).
      layers: only these layers (None: all trainable layers).
      include_logits_grad: also the statistics of ∂ loss_i / ∂ logits_i.
      split: tag prefix.
    """

    needs = frozenset({base.Need.GRAD_STATS})

    def __init__(
        self,
        every_n_steps: Optional[int] = 500,
        layers: Optional[Sequence[str]] = None,
        include_logits_grad: bool = True,
        split: str = 'train',
    ):
        super().__init__(every_n_steps=every_n_steps)
        self._layers = None if layers is None else tuple(layers)
        self._include_logits_grad = include_logits_grad
        self._split = split
        self._means = TagMeans()

    def reset(self) -> None:
        self._means.reset()

    def result(self) -> dict[str, float]:
        return self._means.result()

    def layer_items(self, outputs) -> tuple[np.ndarray, dict[str, stats.GradStats]]:
        """`(labels [n], {layer: numpy GradStats})` of one step.

        Raises:
          ValueError: the plugin needs Gram matrices and the step has none.
        """
        labels = np.asarray(outputs.labels).astype(np.int64).reshape(-1)
        per_layer = layer_stats(outputs, self._layers, self._include_logits_grad)
        if self.wants_gram:
            for layer, s in per_layer.items():
                if s.gram is None:
                    raise ValueError(
                        f'No Gram matrix for {layer!r}: declare `Need.GRAM` in the plugin needs.')
        return labels, per_layer

    def layer_values(self, s: stats.GradStats, labels: np.ndarray) -> dict[str, Optional[float]]:
        """`{quantity: value or None}` of one layer's statistics."""
        raise NotImplementedError

    def update(self, outputs) -> None:
        labels, per_layer = self.layer_items(outputs)
        for layer, s in per_layer.items():
            for quantity, value in self.layer_values(s, labels).items():
                if value is not None:
                    self._means.add(f'{self._split}/{quantity}/{layer}', value)
