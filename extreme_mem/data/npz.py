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
from extreme_mem.data import base
from extreme_mem.data import validation

KEYS = ('x_train', 'y_train', 'x_test', 'y_test')
VALID_FILE = (
    'A valid file is a NumPy .npz archive of plain numeric arrays x_train, y_train, x_test, y_test '
    '(no object arrays), e.g. written by np.savez(path, x_train=..., y_train=..., x_test=..., y_test=...)'
)


def _labels(y: np.ndarray, key: str, path: str) -> np.ndarray:
    """[n] or [n, 1] integer-valued labels -> [n] int32, checked before the cast (no wrap-around)."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise base.DataError(f'{path}: {key} must have shape [n] or [n, 1], got {y.shape}.')
    return validation.class_ids(y, f'{path}: {key}')


def _unreadable(path: str, error: Exception) -> base.DataError:
    """The `DataError` for a file NumPy cannot read as an `.npz` archive of plain arrays."""
    text = str(error)
    if os.path.getsize(path) == 0:
        what = 'is empty (0 bytes)'
    elif 'pickle' in text.lower() or 'object arrays' in text.lower():
        what = 'holds pickled data (or is not a NumPy file at all), which is never loaded because unpickling can run code'
    else:
        what = f'is not a readable .npz archive (corrupt or truncated?): {type(error).__name__}: {text}'
    return base.DataError(f'npz dataset file {path} {what}. {VALID_FILE}.')


def _read_arrays(path: str) -> dict:
    """The four arrays of `path`, fully read; any read failure becomes a `DataError` naming it."""
    try:
        with open(path, 'rb') as fh:
            f = np.load(fh, allow_pickle=False)
            if not isinstance(f, np.lib.npyio.NpzFile):
                raise base.DataError(f'npz dataset file {path} holds a single .npy array, not an .npz archive. '
                                     f'{VALID_FILE}.')
            with f:
                missing = [k for k in KEYS if k not in f.files]
                if missing:
                    raise base.DataError(
                        f'{path}: missing key(s) {missing}; found {sorted(f.files)}; need {list(KEYS)}. {VALID_FILE}.'
                    )
                return {k: np.asarray(f[k]) for k in KEYS}
    except base.DataError:
        raise
    except Exception as e:  # pylint: disable=broad-except  (zipfile, zlib, EOF, pickle refusals, ...)
        raise _unreadable(path, e) from e


def read_npz(path: str) -> dict:
    """Reads and validates the four arrays of a `keras.datasets`-layout `.npz` file.

    Args:
      path: file path (`~` is expanded).

    Returns:
      `{'x_train', 'y_train', 'x_test', 'y_test'}` with labels as [n] int32.

    Raises:
      base.DataError: no file at `path`; an empty, truncated, corrupt or non-npz file, or one
        holding pickled (object) arrays (never loaded); missing keys (named, with the keys
        found); non-numeric images; mismatched image/label lengths; different train/test image
        shapes; bad image rank; or labels that are not integer class ids fitting int32 (the
        first bad index and value are named). Every message names `path`.
    """
    path = os.path.expanduser(str(path))
    if not os.path.isfile(path):
        raise base.DataError(
            f'npz dataset file not found: {path!r}. Set data.Npz.path to a file with {list(KEYS)}. {VALID_FILE}.'
        )
    arrays = _read_arrays(path)
    for split in ('train', 'test'):
        x, y = arrays[f'x_{split}'], arrays[f'y_{split}']
        validation.check_numeric(x, f'{path}: x_{split}')
        if x.ndim not in (2, 3, 4):
            raise base.DataError(f'{path}: x_{split} must be [n, H, W], [n, H, W, C] or [n, d]; got shape {x.shape}.')
        if len(x) != len(y):
            raise base.DataError(f'{path}: x_{split} has {len(x)} examples but y_{split} has {len(y)}.')
        arrays[f'y_{split}'] = _labels(y, f'y_{split}', path)
    if arrays['x_train'].shape[1:] != arrays['x_test'].shape[1:]:
        raise base.DataError(
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
      num_classes: number of classes (>= 2); None infers 1 + the largest TRAINING label, so a
        test label beyond every training label is an error rather than a silently larger model
        (declare `num_classes` to evaluate on classes absent from training: then it is a
        logged warning).
      **kwargs: `ArraySource` options.

    Raises:
      base.DataError: see `read_npz` and `data/validation.py`; every message names the path.
    """

    name = 'npz'

    def __init__(
        self, path: str = gin.REQUIRED, max_value: Optional[float] = None, num_classes: Optional[int] = None, **kwargs
    ):
        super().__init__(**kwargs)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                        or num_classes < 2):
            raise base.DataError(f'data.Npz.num_classes must be an int >= 2 or None (infer), got {num_classes!r}.')
        self._path = path
        self._max_value = max_value
        self._num_classes = num_classes

    def describe(self) -> str:
        return f'dataset {self.name!r} ({self._path})'

    def _load_raw(self) -> array_source.RawData:
        a = read_npz(self._path)
        path = os.path.expanduser(str(self._path))
        for split in ('train', 'test'):
            validation.check_not_empty(len(a[f'y_{split}']), self.describe(), split, f'(x_{split} and y_{split} in the file)')
        if self._num_classes is None:
            num_classes = int(a['y_train'].max(initial=-1)) + 1
            hint = ('num_classes inferred as 1 + the largest training label; set data.Npz.num_classes to '
                    'declare classes absent from training')
        else:
            num_classes, hint = self._num_classes, 'data.Npz.num_classes'
        for key in ('y_train', 'y_test'):
            validation.class_ids(a[key], f'{path}: {key}', num_classes, hint)
        max_value = self._max_value
        if max_value is None:
            integer = np.issubdtype(a['x_train'].dtype, np.integer)
            max_value = 255.0 if integer else 1.0
            if not integer and np.isfinite(a['x_train']).all() and a['x_train'].max() > 1.0:
                logging.warning('%s: float images exceed 1.0 (max %g) but max_value defaults to 1.0; '
                                'set data.Npz.max_value.', self._path, a['x_train'].max())
        return array_source.RawData(a['x_train'], a['y_train'], a['x_test'], a['y_test'], num_classes, float(max_value))
