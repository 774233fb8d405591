"""Gradient confusion (Sankararaman et al., ICML 2020) and its metric plugin.

    η = min_{i≠j} <g_i, g_j>

The most negative inner product between two per-example gradients of the batch (negative values mean
conflicting examples). Computed from the per-example Gram matrix (the plugin needs `Need.GRAM`).
"""

from typing import Optional

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base
from extreme_mem.metrics import common


def confusion(gram) -> Optional[float]:
    """min_{i≠j} <g_i, g_j>; None for n < 2.

    Args:
      gram: [n, n] <g_i, g_j>.
    """
    gram = np.asarray(gram, dtype=np.float64)
    n = gram.shape[0]
    if n < 2:
        return None
    return float(np.min(gram[~np.eye(n, dtype=bool)]))


@registry.METRICS.register('gradient_confusion')
@gin.configurable(module='metrics')
class GradientConfusion(common.LayerGradStatsPlugin):
    """Gradient confusion per layer: `<split>/grad_confusion/<layer>`."""

    needs = frozenset({base.Need.GRAD_STATS, base.Need.GRAM})

    def layer_values(self, s, labels):
        del labels
        return {'grad_confusion': confusion(s.gram)}
