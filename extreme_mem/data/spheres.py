"""`spheres`: the synthetic sphere manifolds of Stephenson et al. (ICLR 2021), appendix A.5.

Classes come in diametrically opposed pairs: class 2k has centre `+c e_k` and class 2k+1 has
centre `-c e_k` (c = `center_norm`), with the pair axes e_0, e_1, ... orthonormal. Every class is
the sphere of radius r (`radius`) about its centre in ONE shared `subspace_dim`-dimensional latent
space that holds all centre axes; points are uniform on the sphere surface. Only the pair's own
axis carries linearly decodable class information (each class is mean zero along every other
direction); with r < c the two spheres of a pair are linearly separable, with r > c they overlap
(the paper: "linearly separable if the sphere radius is less than r = 1").

The latent points are mapped to `ambient_dim` features by one fixed Gaussian matrix
(entries N(0, 1/subspace_dim)) and standardised per feature with the training split's mean and
standard deviation. Defaults reproduce the measured setting that is "well into the linearly
inseparable regime": 10 classes (5 pairs), c = 1, r = 5, latent dimension 30, 1,024 features,
500 train / 100 test examples per class. (Giving each sphere its own random subspace instead
makes the data almost linearly separable at this size.)

The geometry (embedding matrix and points) depends only on `data_seed`, never on the run seed,
so every seed of a sweep sees the same data; label transforms (`label_noise`,
`noise_kind='permute'` for appendix A.3) use the run seed as for every `ArraySource`.

Gin bindings (module `data`):
  data.Spheres.num_classes = 10          # even: num_classes / 2 opposed pairs
  data.Spheres.subspace_dim = 30         # d, latent dimension (>= num_classes / 2)
  data.Spheres.ambient_dim = 1024        # D, features after the random embedding
  data.Spheres.radius = 5.0              # r
  data.Spheres.center_norm = 1.0         # |centre|
  data.Spheres.train_per_class = 500
  data.Spheres.test_per_class = 100
  data.Spheres.data_seed = 0
plus every `ArraySource` option, e.g. `data.Spheres.label_noise = 0.5`,
`data.Spheres.noise_kind = 'permute'`.
"""

from typing import Tuple

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.data import array_source

_TAG_EMBED, _TAG_TRAIN, _TAG_TEST = 1, 2, 3  # data_seed streams


def pair_centers(num_classes: int, subspace_dim: int, center_norm: float) -> np.ndarray:
    """Class centres in the latent space: class 2k at `+c e_k`, class 2k+1 at `-c e_k`.

    Returns:
      [num_classes, subspace_dim] float64.

    Raises:
      ValueError: odd or < 2 `num_classes`, or fewer latent dimensions than pairs.
    """
    if num_classes < 2 or num_classes % 2:
        raise ValueError(f'num_classes must be even and >= 2 (opposed pairs), got {num_classes}.')
    pairs = num_classes // 2
    if subspace_dim < pairs:
        raise ValueError(f'subspace_dim must be >= num_classes / 2 = {pairs} (one axis per pair), got {subspace_dim}.')
    if not center_norm > 0:
        raise ValueError(f'center_norm must be > 0, got {center_norm}.')
    centers = np.zeros((num_classes, subspace_dim))
    for k in range(pairs):
        centers[2 * k, k] = center_norm
        centers[2 * k + 1, k] = -center_norm
    return centers


def sphere_points(centers: np.ndarray, radius: float, per_class: int, rng: np.random.Generator
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """`per_class` points uniform on the sphere of `radius` about each centre.

    Args:
      centers: [P, d] centres.
      radius: sphere radius r (> 0).
      per_class: points per class.
      rng: numpy Generator.

    Returns:
      (points [P * per_class, d] float64, labels [P * per_class] int32), grouped by class.
    """
    if not radius > 0:
        raise ValueError(f'radius must be > 0, got {radius}.')
    if per_class < 1:
        raise ValueError(f'per_class must be >= 1, got {per_class}.')
    p, d = centers.shape
    u = rng.standard_normal((p, per_class, d))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    points = centers[:, None, :] + radius * u
    labels = np.repeat(np.arange(p, dtype=np.int32), per_class)
    return points.reshape(p * per_class, d), labels


def embedding_matrix(subspace_dim: int, ambient_dim: int, rng: np.random.Generator) -> np.ndarray:
    """[subspace_dim, ambient_dim] Gaussian map with entries N(0, 1 / subspace_dim)."""
    if ambient_dim < subspace_dim:
        raise ValueError(f'ambient_dim ({ambient_dim}) must be >= subspace_dim ({subspace_dim}).')
    return rng.standard_normal((subspace_dim, ambient_dim)) / np.sqrt(subspace_dim)


def standardize_features(train: np.ndarray, test: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per-feature `(x - mean) / std` with the training split's statistics (std 0 -> 1)."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, (test - mean) / std


@registry.DATASETS.register('spheres')
@gin.configurable(module='data')
class Spheres(array_source.ArraySource):
    """Opposed-pair sphere manifolds in a shared latent subspace (see the module docstring).

    Args:
      num_classes: P, even.
      subspace_dim: d, latent dimension holding the centre axes and the spheres.
      ambient_dim: D, feature dimension after the fixed random embedding.
      radius: sphere radius r.
      center_norm: norm of every centre.
      train_per_class: training examples per class.
      test_per_class: test examples per class.
      data_seed: seed of the geometry (embedding and points), independent of the run seed.
      **kwargs: `ArraySource` options (label_noise, noise_kind, ...). `preprocess` defaults to
        'none' because the features are already standardised per feature.

    Inputs are [D] float32 feature vectors.
    """

    name = 'spheres'

    def __init__(self, num_classes: int = 10, subspace_dim: int = 30, ambient_dim: int = 1024,
                 radius: float = 5.0, center_norm: float = 1.0, train_per_class: int = 500,
                 test_per_class: int = 100, data_seed: int = 0, preprocess: str = 'none', **kwargs):
        super().__init__(preprocess=preprocess, **kwargs)
        pair_centers(num_classes, subspace_dim, center_norm)  # validates early
        if ambient_dim < subspace_dim:
            raise ValueError(f'ambient_dim ({ambient_dim}) must be >= subspace_dim ({subspace_dim}).')
        if train_per_class < 1 or test_per_class < 1:
            raise ValueError(f'train_per_class and test_per_class must be >= 1, got {train_per_class}, '
                             f'{test_per_class}.')
        if not radius > 0:
            raise ValueError(f'radius must be > 0, got {radius}.')
        self._num_classes = int(num_classes)
        self._subspace_dim, self._ambient_dim = int(subspace_dim), int(ambient_dim)
        self._radius, self._center_norm = float(radius), float(center_norm)
        self._train_per_class, self._test_per_class = int(train_per_class), int(test_per_class)
        self._data_seed = int(data_seed)

    def latent(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The latent train and test points before embedding: (z_train, y_train, z_test, y_test)."""
        centers = pair_centers(self._num_classes, self._subspace_dim, self._center_norm)
        z_train, y_train = sphere_points(centers, self._radius, self._train_per_class,
                                         np.random.default_rng([self._data_seed, _TAG_TRAIN]))
        z_test, y_test = sphere_points(centers, self._radius, self._test_per_class,
                                       np.random.default_rng([self._data_seed, _TAG_TEST]))
        return z_train, y_train, z_test, y_test

    def _load_raw(self) -> array_source.RawData:
        z_train, y_train, z_test, y_test = self.latent()
        a = embedding_matrix(self._subspace_dim, self._ambient_dim,
                             np.random.default_rng([self._data_seed, _TAG_EMBED]))
        x_train, x_test = standardize_features(z_train @ a, z_test @ a)
        return array_source.RawData(x_train.astype(np.float32), y_train, x_test.astype(np.float32), y_test,
                                    self._num_classes, 1.0)
