"""Pixel preprocessing: value scaling, standardisation and flattening, in pure numpy.

Owns the `preprocess` option of every array-backed source (`data/array_source.py`). All
statistics come from the TRAIN split and are applied unchanged to the test split. Outputs are
float32. Methods:

- `none`: values as loaded, cast to float32.
- `unit`: `x / max_value`, i.e. [0, max_value] -> [0, 1].
- `symmetric`: `2 x / max_value - 1`, i.e. [0, max_value] -> [-1, 1].
- `standardize`: per channel `(x - mean_c) / std_c` with the train split's mean and (population)
  standard deviation; a constant channel (std 0) is only centred.
- `mnist`: `(x / max_value - 0.1307) / 0.3081`, the full-MNIST-train constants (Zhang et al.
  2020, "Identity Crisis", appendix A).
"""

from typing import Tuple

import numpy as np

from extreme_mem.data import base

METHODS = ('none', 'unit', 'symmetric', 'standardize', 'mnist')
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


def check_method(method: str) -> None:
    """Raises `base.DataError` naming the valid methods if `method` is not one of `METHODS`."""
    if method not in METHODS:
        raise base.DataError(f'Unknown preprocess {method!r}; valid: {list(METHODS)}.')


def _stat_axes(x: np.ndarray) -> tuple:
    """Axes to reduce for per-channel statistics: all but the last for [n, H, W, C] images."""
    return tuple(range(x.ndim - 1)) if x.ndim >= 4 else tuple(range(x.ndim))


def channel_stats(x: np.ndarray, chunk: int = 4096) -> Tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and population standard deviation, accumulated in float64.

    Two passes over chunks of `chunk` examples, so a float32 CIFAR-sized array needs no
    full-size float64 temporary.

    Args:
      x: [n, H, W, C] images (statistics per channel), or any other rank (one statistic).
      chunk: examples per chunk.

    Returns:
      `(mean, std)`, float64 of shape [C] for 4-D input, else 0-d arrays.
    """
    if len(x) == 0:
        raise base.DataError('Cannot compute statistics of an empty split.')
    axes = _stat_axes(x)
    count = np.prod([x.shape[a] for a in axes], dtype=np.float64)
    total = sum(np.sum(x[i : i + chunk], axis=axes, dtype=np.float64) for i in range(0, len(x), chunk))
    mean = np.asarray(total / count)
    sq = sum(
        np.sum(np.square(x[i : i + chunk].astype(np.float64) - mean), axis=axes) for i in range(0, len(x), chunk)
    )
    return mean, np.sqrt(np.asarray(sq / count))


def preprocess(
    train: np.ndarray, test: np.ndarray, method: str, max_value: float = 255.0
) -> Tuple[np.ndarray, np.ndarray]:
    """Applies `method` to both splits with statistics from `train`.

    Args:
      train: [n_train, ...] raw training images (any real dtype).
      test: [n_test, ...] raw test images, same trailing shape.
      method: one of `METHODS`.
      max_value: the largest raw value (255 for uint8 images, 16 for scikit-learn digits);
        used by `unit`, `symmetric` and `mnist`.

    Returns:
      `(train, test)` as float32 arrays of unchanged shapes.

    Raises:
      base.DataError: unknown `method` (lists the valid ones) or non-positive `max_value`.
    """
    check_method(method)
    if method in ('unit', 'symmetric', 'mnist') and not max_value > 0:
        raise base.DataError(f'preprocess {method!r} needs max_value > 0, got {max_value}.')
    train = np.asarray(train, dtype=np.float32)
    test = np.asarray(test, dtype=np.float32)
    if method == 'none':
        return train, test
    if method == 'standardize':
        mean, std = channel_stats(train)
        std = np.where(std > 0, std, 1.0)
        mean, std = mean.astype(np.float32), std.astype(np.float32)
        return (train - mean) / std, (test - mean) / std
    scale = np.float32(max_value)
    if method == 'unit':
        return train / scale, test / scale
    if method == 'symmetric':
        return 2.0 * train / scale - 1.0, 2.0 * test / scale - 1.0
    # 'mnist'
    mean, std = np.float32(MNIST_MEAN), np.float32(MNIST_STD)
    return (train / scale - mean) / std, (test / scale - mean) / std


def flatten(x: np.ndarray) -> np.ndarray:
    """[n, *shape] -> [n, prod(shape)] (a view when possible)."""
    return np.reshape(x, (len(x), -1))
