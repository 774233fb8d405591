"""`gaussian_covariance`: centred Gaussian inputs with random labels (Maennel et al. 2020, sec. 2.3, E.1).

Inputs are i.i.d. N(0, diag(variances)), by default diag(0.1, 0.2, ..., 3.0) (Fig. 4 left,
Fig. 20); labels are uniform over `num_classes` independently of the inputs. Every draw is a
function of `data_seed` (fixed by default, so every run of a sweep sees the same data and
only the network initialisation varies, as in "train 50 times, collect statistics").

Gin bindings (module `data`): `data.GaussianCovariance.num_train = 2000`, `.num_test`,
`.variances`, `.num_classes`, `.data_seed`, plus every `ArraySource` option (default
`preprocess = 'none'`: the inputs are used as drawn).
"""

from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.data import array_source
from extreme_mem.geometry import covariance


@registry.DATASETS.register('gaussian_covariance')
@gin.configurable(module='data')
class GaussianCovariance(array_source.ArraySource):
    """N(0, diag(variances)) inputs [n, d] with uniformly random labels.

    Args:
      num_train: training examples (appendix E.1: 10,000 for the 2,048-wide layer, 2,000 for 256).
      num_test: test examples (same distribution).
      variances: the diagonal of Σ_x; None: (0.1, 0.2, ..., 3.0).
      num_classes: random label classes (10 in appendix E.1).
      data_seed: seed of inputs and labels.
      **kwargs: `ArraySource` options.
    """

    name = 'gaussian_covariance'

    def __init__(self, num_train: int = 2000, num_test: int = 500, variances: Optional[Sequence[float]] = None,
                 num_classes: int = 10, data_seed: int = 0, preprocess: str = 'none', **kwargs):
        super().__init__(preprocess=preprocess, **kwargs)
        if num_train < 1 or num_test < 1 or num_classes < 2:
            raise ValueError(f'Need num_train, num_test >= 1 and num_classes >= 2; got {num_train}, {num_test}, '
                             f'{num_classes}.')
        self._num_train, self._num_test, self._num_classes = int(num_train), int(num_test), int(num_classes)
        self._variances = covariance.synthetic_variances() if variances is None else np.asarray(variances, float)
        self._data_seed = data_seed

    def _load_raw(self) -> array_source.RawData:
        rng = np.random.default_rng(self._data_seed)
        n = self._num_train + self._num_test
        x = covariance.gaussian_inputs(n, self._variances, rng)
        y = rng.integers(0, self._num_classes, size=n).astype(np.int32)
        return array_source.RawData(x[:self._num_train], y[:self._num_train], x[self._num_train:],
                                    y[self._num_train:], self._num_classes, max_value=1.0)
