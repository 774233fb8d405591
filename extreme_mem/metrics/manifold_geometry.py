"""Manifold geometry (MFTMA) of class manifolds per probe layer, at evaluation time.

Stephenson et al. (ICLR 2021), section 3.2: P classes × M examples per class are drawn once
(fixed seed) from a data subset — `unpermuted`, `permuted` (grouped by their random training
label), `restored` (the permuted examples grouped by their true label), `train` or `test` —
run through the model to its probe layers, and analysed with
`geometry.mftma.manifold_analysis`. Tags: `eval/mftma/<quantity>/<subset>/<layer>` for capacity,
radius, dimension and center_correlation. Layers wider than `max_features` are randomly
projected (Gaussian, fixed seed) to `max_features` dimensions, as Cohen et al. (2019) do.
"""

from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.data import transforms
from extreme_mem.geometry import mftma
from extreme_mem.metrics import base
from extreme_mem.models import base as models_base

SUBSETS = ('unpermuted', 'permuted', 'restored', 'train', 'test')
QUANTITIES = ('capacity', 'radius', 'dimension', 'center_correlation')


def subset_split(data, subset: str):
    """The split whose labels define the manifolds of `subset`."""
    if subset not in SUBSETS:
        raise ValueError(f'Unknown MFTMA subset {subset!r}; valid: {list(SUBSETS)}.')
    if subset == 'train':
        return data.train
    if subset == 'test':
        return data.test
    return transforms.provenance_subsets(data.train)[subset]


def sample_manifold_positions(labels: np.ndarray, num_classes: int, examples_per_class: int,
                              seed: int) -> list:
    """Positions of `examples_per_class` examples for each of `num_classes` classes.

    Classes are the first `num_classes` (sorted) labels having at least 2 examples; a class with
    fewer than `examples_per_class` examples contributes all it has.

    Raises:
      ValueError: fewer than 2 usable classes.
    """
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    usable = classes[counts >= 2][:num_classes]
    if len(usable) < 2:
        raise ValueError(f'MFTMA needs >= 2 classes with >= 2 examples; label counts: {dict(zip(classes, counts))}.')
    out = []
    for c in usable:
        pos = np.flatnonzero(labels == c)
        out.append(np.sort(rng.choice(pos, size=min(examples_per_class, len(pos)), replace=False)))
    return out


@registry.METRICS.register('mftma')
@gin.configurable(module='metrics')
class ManifoldGeometryMetric(base.MetricPlugin):
    """MFTMA capacity, radius, dimension and center correlation per subset and probe layer."""

    needs = frozenset()  # evaluation only

    def __init__(
        self,
        num_classes: int = 100,  # P (the paper: 100)
        examples_per_class: int = 50,  # M (the paper: 50)
        subsets: Sequence[str] = ('test',),
        layers: Optional[Sequence[str]] = None,  # probe names; None: every probe layer
        kappa: float = 0.0,
        n_t: int = 200,
        max_features: Optional[int] = 5000,
        at_steps: Optional[Sequence[int]] = None,  # None: every evaluation
        seed: int = 0,
    ):
        super().__init__(every_n_steps=None)
        for s in subsets:
            if s not in SUBSETS:
                raise ValueError(f'Unknown MFTMA subset {s!r}; valid: {list(SUBSETS)}.')
        self._p, self._m = num_classes, examples_per_class
        self._subsets, self._layers = list(subsets), layers
        self._kappa, self._n_t, self._max_features = kappa, n_t, max_features
        self._at_steps = None if at_steps is None else set(at_steps)
        self._seed = seed
        self._projections: dict = {}
        self.arrays: dict = {}  # (subset, layer) -> ManifoldGeometry of the last evaluation

    def _features(self, layer: str, reps: np.ndarray) -> np.ndarray:
        flat = reps.reshape(len(reps), -1).astype(np.float64)
        if self._max_features is None or flat.shape[1] <= self._max_features:
            return flat
        if layer not in self._projections:
            rng = np.random.default_rng([self._seed, flat.shape[1]])
            self._projections[layer] = rng.normal(size=(flat.shape[1], self._max_features)) / np.sqrt(
                self._max_features)
        return flat @ self._projections[layer]

    def evaluate(self, context: base.EvalContext) -> dict:
        if self._at_steps is not None and context.step not in self._at_steps:
            return {}
        probed = models_base.with_probes(context.model)
        results = {}
        for subset in self._subsets:
            split = subset_split(context.data, subset)
            groups = sample_manifold_positions(np.asarray(split.labels), self._p, self._m, self._seed)
            positions = np.concatenate(groups)
            _, reps = probed(split.images[positions], training=False)
            bounds = np.cumsum([0] + [len(g) for g in groups])
            for layer, value in reps.items():
                if self._layers is not None and layer not in self._layers:
                    continue
                feats = self._features(layer, np.asarray(value))
                manifolds = [feats[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
                geo = mftma.manifold_analysis(manifolds, kappa=self._kappa, n_t=self._n_t, seed=self._seed)
                self.arrays[(subset, layer)] = geo
                for q in QUANTITIES:
                    results[f'eval/mftma/{q}/{subset}/{layer}'] = float(getattr(geo, q))
        return results
