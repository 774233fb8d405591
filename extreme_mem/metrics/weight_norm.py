"""Weight norms, gradient norms and their ratio ‖∇W‖/‖W‖ per layer (Mehta et al. 2021, Fig. 2b).

At large init scale the gradients are small relative to the weights, so the weights barely move
from initialisation (lazy training, Chizat & Bach 2018). Kernel and bias of a layer are treated as
one vector. Needs `weights`: `StepOutputs.grads` (mean-loss gradients) and `StepOutputs.weights`
(values before the update), both dicts keyed by variable path.
"""

from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base
from extreme_mem.metrics import common
from extreme_mem.pergrad import stats


def layer_norms(grads: dict, weights: dict) -> dict[str, tuple[float, float]]:
    """Per-layer (‖W‖, ‖∇W‖) with kernel and bias concatenated.

    Args:
      grads: variable path -> gradient array (None entries count as zero).
      weights: variable path -> value array.

    Returns:
      layer name -> (weight norm, gradient norm), in the order of `weights`.
    """
    sq: dict[str, list] = {}
    for path, w in weights.items():
        g = grads.get(path)
        entry = sq.setdefault(stats.layer_of(path), [0.0, 0.0])
        entry[0] += float(np.sum(np.square(np.asarray(w, dtype=np.float64))))
        if g is not None:
            entry[1] += float(np.sum(np.square(np.asarray(g, dtype=np.float64))))
    return {layer: (float(np.sqrt(w)), float(np.sqrt(g))) for layer, (w, g) in sq.items()}


@registry.METRICS.register('weight_norm')
@gin.configurable(module='metrics')
class WeightNorm(base.MetricPlugin):
    """Weight norm, gradient norm and relative gradient norm per layer.

    Tags: `<split>/weight_norm/<layer>`, `<split>/grad_norm/<layer>`,
    `<split>/relative_grad_norm/<layer>` (skipped while ‖W‖ = 0).
    """

    needs = frozenset({base.Need.WEIGHTS})

    def __init__(
        self, every_n_steps: Optional[int] = 500, layers: Optional[Sequence[str]] = None, split: str = 'train'
    ):
        """Args:
        every_n_steps: optimizer steps between updates.
        layers: only these layers (None: all).
        split: tag prefix.
        """
        super().__init__(every_n_steps=every_n_steps)
        self._layers = None if layers is None else tuple(layers)
        self._split = split
        self._means = common.TagMeans()

    def reset(self) -> None:
        self._means.reset()

    def update(self, outputs) -> None:
        if outputs.weights is None or outputs.grads is None:
            raise ValueError('StepOutputs.weights/grads are None: the trainer did not record them.')
        for layer, (w, g) in layer_norms(outputs.grads, outputs.weights).items():
            if self._layers is not None and layer not in self._layers:
                continue
            self._means.add(f'{self._split}/weight_norm/{layer}', w)
            self._means.add(f'{self._split}/grad_norm/{layer}', g)
            if w > 0:
                self._means.add(f'{self._split}/relative_grad_norm/{layer}', g / w)

    def result(self) -> dict[str, float]:
        return self._means.result()
