"""Cosine gradient stiffness (Fort et al., 2019), overall and within class, and its metric plugin.

    S = mean_{i≠j} cos(g_i, g_j),   S_in-class = mean_c mean_{i≠j, y_i=y_j=c} cos(g_i, g_j).

Computed from the per-example Gram matrix (the plugin needs `Need.GRAM`). Pairs involving a zero
gradient count as cosine 0. Classes with fewer than 2 examples are skipped.
"""

from typing import Optional

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base
from extreme_mem.metrics import common


def cosine_matrix(gram) -> np.ndarray:
    """[n, n] cosines from a Gram matrix; 0 where a norm is 0."""
    gram = np.asarray(gram, dtype=np.float64)
    norms = np.sqrt(np.maximum(np.diag(gram), 0.0))
    outer = np.outer(norms, norms)
    return np.divide(gram, outer, out=np.zeros_like(gram), where=outer > 0)


def stiffness(gram) -> Optional[float]:
    """Mean cosine over ordered pairs i ≠ j; None for n < 2.

    Args:
      gram: [n, n] <g_i, g_j>.
    """
    cos = cosine_matrix(gram)
    return None if cos.shape[0] < 2 else _mean_off_diagonal(cos)


def class_stiffness(gram, labels) -> Optional[float]:
    """Mean over classes (with ≥ 2 examples) of the mean within-class cosine over pairs i ≠ j.

    Args:
      gram: [n, n] <g_i, g_j>.
      labels: [n] int.

    Returns:
      The in-class stiffness, or None when no class has 2 examples.
    """
    cos = cosine_matrix(gram)
    labels = np.asarray(labels).reshape(-1)
    values = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) >= 2:
            values.append(_mean_off_diagonal(cos[np.ix_(idx, idx)]))
    return float(np.mean(values)) if values else None


def _mean_off_diagonal(cos: np.ndarray) -> float:
    """Mean off-diagonal entry of a square matrix with n ≥ 2."""
    n = cos.shape[0]
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


@registry.METRICS.register('gradient_stiffness')
@gin.configurable(module='metrics')
class GradientStiffness(common.LayerGradStatsPlugin):
    """Cosine gradient stiffness per layer.

    Tags: `<split>/grad_stiffness/<layer>` (all pairs) and `<split>/grad_stiffness_in_class/<layer>`.
    """

    needs = frozenset({base.Need.GRAD_STATS, base.Need.GRAM})

    def layer_values(self, s, labels):
        return {'grad_stiffness': stiffness(s.gram), 'grad_stiffness_in_class': class_stiffness(s.gram, labels)}
