"""Gradient diversity (Yin et al., AISTATS 2018) and its metric plugin.

    D = Σ_i ||g_i||² / ||Σ_i g_i||²

Large when per-example gradients are orthogonal or opposed, 1/n when they are identical. Needs only
`GradStats` (no Gram). Mehta et al. (2021, section 3.2) found it does not track generalization.
"""

from typing import Optional

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import common


def diversity(sq_norms, total_sum_sq_norm: float) -> Optional[float]:
    """Σ ||g_i||² / ||Σ g_i||²; None when the summed gradient vanishes.

    Args:
      sq_norms: [n] per-example squared gradient norms.
      total_sum_sq_norm: ||Σ g_i||².
    """
    total = float(total_sum_sq_norm)
    if total <= 0.0:
        return None
    return float(np.sum(np.asarray(sq_norms, dtype=np.float64)) / total)


@registry.METRICS.register('gradient_diversity')
@gin.configurable(module='metrics')
class GradientDiversity(common.LayerGradStatsPlugin):
    """Gradient diversity per layer: `<split>/grad_diversity/<layer>`.

    Steps where the summed gradient vanishes are skipped.
    """

    def layer_values(self, s, labels):
        del labels
        return {'grad_diversity': diversity(s.sq_norms, s.total_sum_sq_norm)}
