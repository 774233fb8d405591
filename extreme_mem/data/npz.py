"""`npz`: a user's arrays in one `.npz` file, in the `keras.datasets` layout.

The file holds `x_train`, `y_train`, `x_test`, `y_test`. Images are [n, H, W] or [n, H, W, C]
(uint8 or float; [n, d] feature vectors also work without resizing); labels are integer class
ids of shape [n] or [n, 1]. Save one with
`np.savez('/data/my.npz', x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)`.

Use it from the command line with one binding besides the dataset name:
  --gin_param="Experiment.dataset='npz'" --gin_param="data.Npz.path='/data/my.npz'"

Gin bindings (module `data`):
  data.Npz.path = '/data/my.npz'       # required
  data.Npz.max_value = None            # None: 255 for integer images, 1.0 for float images
  data.Npz.num_classes = None          # None: 1 + the largest label in either split
plus every `ArraySource` option, e.g. `data.Npz.preprocess = 'standardize'` (default 'unit':
values / max_value), `data.Npz.label_noise = 0.2`.
"""

import os
from typing import Optional

import gin
import numpy as np
from absl import logging

from extreme_mem import registry
from extreme_mem.data import array_source

KEYS = ('x_train', 'y_train', 'x_test', 'y_test')


def _labels(y: np.ndarray, key: str, path: str) -> np.ndarray:
    """[n] or [n, 1] integer-valued labels -> [n] int32."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f'{path}: {key} must have shape [n] or [n, 1], got {y.shape}.')
    if not (np.issubdtype(y.dtype, np.integer) or (np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)))):
        raise ValueError(f'{path}: {key} must hold integer class ids, got dtype {y.dtype}.')
    if len(y) and y.min() < 0:
        raise ValueError(f'{path}: {key} has negative labels (min {y.min()}).')
    return y.astype(np.int32)


def read_npz(path: str) -> dict:
    """Reads and validates the four arrays of a `keras.datasets`-layout `.npz` file.

    Args:
      path: file path (`~` is expanded).

    Returns:
      `{'x_train', 'y_train', 'x_test', 'y_test'}` with labels as [n] int32.

    Raises:
      FileNotFoundError: no file at `path`.
      ValueError: missing keys (named, with the keys found), mismatched image/label lengths,
        different train/test image shapes, bad image rank, or non-integer labels.
    """
    path = os.path.expanduser(str(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(f'npz dataset file not found: {path!r}. Set data.Npz.path to a file with {list(KEYS)}.')
    with np.load(path, allow_pickle=False) as f:
        missing = [k for k in KEYS if k not in f.files]
        if missing:
            raise ValueError(f'{path}: missing key(s) {missing}; found {sorted(f.files)}; need {list(KEYS)}.')
        arrays = {k: np.asarray(f[k]) for k in KEYS}
    for split in ('train', 'test'):
        x, y = arrays[f'x_{split}'], arrays[f'y_{split}']
        if x.ndim not in (2, 3, 4):
            raise ValueError(f'{path}: x_{split} must be [n, H, W], [n, H, W, C] or [n, d]; got shape {x.shape}.')
        if len(x) != len(y):
            raise ValueError(f'{path}: x_{split} has {len(x)} examples but y_{split} has {len(y)}.')
        arrays[f'y_{split}'] = _labels(y, f'y_{split}', path)
    if arrays['x_train'].shape[1:] != arrays['x_test'].shape[1:]:
        raise ValueError(
            f'{path}: x_train examples have shape {arrays["x_train"].shape[1:]} '
            f'but x_test examples have shape {arrays["x_test"].shape[1:]}.'
        )
    return arrays


@registry.DATASETS.register('npz')
@gin.configurable(module='data')
class Npz(array_source.ArraySource):
    """User arrays from a `.npz` file (see the module docstring for the layout and bindings).

    Args:
      path: the `.npz` file.
      max_value: the largest possible raw value; None means 255 for integer images and 1.0 for
        float images (assumed already in [0, 1]).
      num_classes: number of classes; None infers 1 + the largest label.
      **kwargs: `ArraySource` options.
    """

    name = 'npz'

    def __init__(
        self, path: str = gin.REQUIRED, max_value: Optional[float] = None, num_classes: Optional[int] = None, **kwargs
    ):
        super().__init__(**kwargs)
        self._path = path
        self._max_value = max_value
        self._num_classes = num_classes

    def _load_raw(self) -> array_source.RawData:
        a = read_npz(self._path)
        max_label = int(max(a['y_train'].max(initial=0), a['y_test'].max(initial=0)))
        num_classes = max_label + 1 if self._num_classes is None else int(self._num_classes)
        if max_label >= num_classes:
            raise ValueError(f'{self._path}: label {max_label} >= num_classes {num_classes}.')
        max_value = self._max_value
        if max_value is None:
            integer = np.issubdtype(a['x_train'].dtype, np.integer)
            max_value = 255.0 if integer else 1.0
            if not integer and a['x_train'].size and a['x_train'].max() > 1.0:
                logging.warning('%s: float images exceed 1.0 (max %g) but max_value defaults to 1.0; '
                                'set data.Npz.max_value.', self._path, a['x_train'].max())
        return array_source.RawData(a['x_train'], a['y_train'], a['x_test'], a['y_test'], num_classes, float(max_value))
