"""Representation alignment Ω^r (Mehta et al., ICLR 2021, section 3.2) and its metric plugin.

Ω^r_c is the gradient-alignment formula (`gradient_alignment.alignment_from_sums`) applied to the
probe-layer representations r_i of the examples of class c; Ω^r_in-class is the mean over classes.
Representations come for free with the forward pass and reflect the cumulative effect of training.
"""

from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base
from extreme_mem.metrics import common
from extreme_mem.metrics import gradient_alignment


def class_alignment(representations, labels, num_classes: Optional[int] = None) -> dict[int, tuple[float, bool]]:
    """Ω^r_c per class of per-example representation vectors.

    Args:
      representations: [n, ...] activations; flattened per example.
      labels: [n] int classes.
      num_classes: C (default: max label + 1).

    Returns:
      class id -> (Ω^r_c, vanished) for classes with at least 2 examples.
    """
    r = np.asarray(representations, dtype=np.float64)
    r = r.reshape(r.shape[0], -1)
    labels = np.asarray(labels).astype(np.int64).reshape(-1)
    num_classes = max(num_classes or 0, int(labels.max()) + 1 if labels.size else 0)
    sums = np.zeros((num_classes, r.shape[1]))
    np.add.at(sums, labels, r)
    return gradient_alignment.class_alignment(np.square(r).sum(axis=1), np.square(sums).sum(axis=1), labels)


@registry.METRICS.register('representation_alignment')
@gin.configurable(module='metrics')
class RepresentationAlignment(base.MetricPlugin):
    """In-class alignment of probe-layer representations (Mehta et al. 2021, Fig. 2d, 4b).

    Tags (means over the updates since the last reset):
      `<split>/rep_alignment/<probe>`: Ω^r_in-class.
      `<split>/rep_alignment/<probe>/class_<c>`: Ω^r_c (if `per_class`).
    """

    needs = frozenset({base.Need.REPRESENTATIONS})

    def __init__(
        self,
        every_n_steps: Optional[int] = 500,
        per_class: bool = False,
        probes: Optional[Sequence[str]] = None,
        split: str = 'train',
    ):
        """Args:
        every_n_steps: optimizer steps between updates.
        per_class: also emit Ω^r_c per class.
        probes: only these probe layers (None: all).
        split: tag prefix.
        """
        super().__init__(every_n_steps=every_n_steps)
        self._per_class = per_class
        self._probes = None if probes is None else tuple(probes)
        self._split = split
        self._means = common.TagMeans()

    def reset(self) -> None:
        self._means.reset()

    def update(self, outputs) -> None:
        if outputs.representations is None:
            raise ValueError('StepOutputs.representations is None: the trainer did not record probe layers.')
        labels = np.asarray(outputs.labels).astype(np.int64).reshape(-1)
        num_classes = None if outputs.logits is None else int(np.shape(outputs.logits)[-1])
        for probe, r in outputs.representations.items():
            if self._probes is not None and probe not in self._probes:
                continue
            per_class = class_alignment(r, labels, num_classes)
            omega = gradient_alignment.in_class_alignment(per_class)
            if omega is None:
                continue
            tag = f'{self._split}/rep_alignment/{probe}'
            self._means.add(tag, omega)
            if self._per_class:
                for c, (omega_c, _) in per_class.items():
                    self._means.add(f'{tag}/class_{c}', omega_c)

    def result(self) -> dict[str, float]:
        return self._means.result()
