"""Gradient alignment Ω (Mehta et al., ICLR 2021, section 3.2, eqs. 2-6) and its metric plugin.

Ω of n vectors v_i, normalised by the mean norm so magnitude information is kept (eq. 2-4):

    Ω = n Σ_{i≠j} <v_i, v_j> / ((n - 1) (Σ_i ||v_i||)²),   Σ_{i≠j} <v_i, v_j> = ||Σ v_i||² - Σ ||v_i||².

Per class (eq. 5) the sums run over the examples of class c; Ω_in-class (eq. 6) is the mean over
classes. As in the public code, a class whose gradients all vanish divides by 1 instead of the
zero mean norm, so its Ω is 0; the plugin also counts such classes. Classes with fewer than two
examples in the batch have no pairs and are skipped. The O(n) form needs only `GradStats`.
"""

from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import common


def alignment_from_sums(n: int, sum_norms: float, sum_sq_norms: float, sq_norm_of_sum: float) -> tuple[float, bool]:
    """Ω of one group of n ≥ 2 vectors from its sufficient statistics (eq. 3 with eq. 4).

    Args:
      n: number of vectors.
      sum_norms: Σ ||v_i||.
      sum_sq_norms: Σ ||v_i||².
      sq_norm_of_sum: ||Σ v_i||².

    Returns:
      (Ω, vanished): `vanished` is True when every vector is zero (then Ω = 0).

    Raises:
      ValueError: n < 2.
    """
    if n < 2:
        raise ValueError(f'Alignment needs at least 2 vectors, got {n}.')
    vanished = sum_norms == 0.0
    denominator = 1.0 if vanished else (n - 1) * sum_norms**2
    return float(n * (sq_norm_of_sum - sum_sq_norms) / denominator), bool(vanished)


def alignment(vectors) -> float:
    """Ω of a set of vectors (eq. 3).

    Args:
      vectors: [n, ...] array-like, n ≥ 2; flattened per vector.

    Returns:
      Ω as a python float.
    """
    v = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    norms = np.linalg.norm(v, axis=1)
    return alignment_from_sums(len(v), norms.sum(), np.square(norms).sum(), np.square(v.sum(axis=0)).sum())[0]


def class_alignment(
    sq_norms, class_sum_sq_norms, labels, class_counts=None
) -> dict[int, tuple[float, bool]]:
    """Ω_c per class (eq. 5) from per-example squared norms and per-class squared sum norms.

    Args:
      sq_norms: [n] ||g_i||².
      class_sum_sq_norms: [C] ||Σ_{i: y_i=c} g_i||².
      labels: [n] int class of each example, aligned with `sq_norms`.
      class_counts: [C] optional; classes with count 0 here (outside the engine's class subset)
        are skipped.

    Returns:
      class id -> (Ω_c, vanished) for every class with at least 2 examples.
    """
    sq_norms = np.maximum(np.asarray(sq_norms, dtype=np.float64), 0.0)
    class_sum_sq_norms = np.asarray(class_sum_sq_norms, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64).reshape(-1)
    num_classes = len(class_sum_sq_norms)
    norms = np.sqrt(sq_norms)
    counts = np.bincount(labels, minlength=num_classes)
    sum_norms = np.bincount(labels, weights=norms, minlength=num_classes)
    sum_sq = np.bincount(labels, weights=sq_norms, minlength=num_classes)
    result = {}
    for c in range(num_classes):
        if counts[c] < 2 or (class_counts is not None and class_counts[c] == 0):
            continue
        result[c] = alignment_from_sums(int(counts[c]), sum_norms[c], sum_sq[c], class_sum_sq_norms[c])
    return result


def in_class_alignment(per_class: dict[int, tuple[float, bool]]) -> Optional[float]:
    """Ω_in-class (eq. 6): mean of Ω_c over the classes present; None if there are none."""
    if not per_class:
        return None
    return float(np.mean([omega for omega, _ in per_class.values()]))


@registry.METRICS.register('gradient_alignment')
@gin.configurable(module='metrics')
class GradientAlignment(common.LayerGradStatsPlugin):
    """In-class alignment of per-example gradients (Mehta et al. 2021, eqs. 5-6, Fig. 1-2c).

    Tags (means over the updates since the last reset):
      `<split>/grad_alignment/<layer>`: Ω_in-class of the layer's gradients (kernel and bias
        concatenated); `<layer>` = `logits_grad` for the gradients w.r.t. the logits.
      `<split>/grad_alignment`: mean over parameterised layers (not `logits_grad`).
      `<split>/grad_alignment/<layer>/class_<c>`: Ω_c (if `per_class`).
      `<split>/grad_alignment_zero_classes/<layer>`: classes whose gradients all vanished.
    """

    def __init__(
        self,
        every_n_steps: Optional[int] = 500,
        per_class: bool = True,
        layers: Optional[Sequence[str]] = None,
        include_logits_grad: bool = True,
        split: str = 'train',
    ):
        """Args: as `common.LayerGradStatsPlugin`; `per_class` also emits Ω_c per class."""
        super().__init__(every_n_steps, layers, include_logits_grad, split)
        self._per_class = per_class

    def update(self, outputs) -> None:
        labels, per_layer = self.layer_items(outputs)
        layer_means = []
        for layer, s in per_layer.items():
            common.check_labels(labels, s.class_counts)
            per_class = class_alignment(s.sq_norms, s.class_sum_sq_norms, labels, s.class_counts)
            omega = in_class_alignment(per_class)
            if omega is None:
                continue
            prefix = f'{self._split}/grad_alignment/{layer}'
            self._means.add(prefix, omega)
            self._means.add(f'{self._split}/grad_alignment_zero_classes/{layer}', sum(z for _, z in per_class.values()))
            if self._per_class:
                for c, (omega_c, _) in per_class.items():
                    self._means.add(f'{prefix}/class_{c}', omega_c)
            if layer != common.LOGITS_GRAD:
                layer_means.append(omega)
        if layer_means:
            self._means.add(f'{self._split}/grad_alignment', float(np.mean(layer_means)))
