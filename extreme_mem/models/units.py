"""Conv/Dense units with the probe naming of models/base.py, shared by the CIFAR-sized convnets.

A unit is `<name>` (Conv2D or Dense, no activation), optionally `<name>_bn` (BatchNormalization)
and, when followed by a nonlinearity, the probe `<name>_rep` (ReLU). Stephenson et al. (ICLR
2021) appendix A.10 evaluate the manifold geometry "using the representations following a
nonlinearity", and layer rewinding (`analysis/rewinding.py`) treats `<name>` with `<name>_bn` as
one layer.
"""

from typing import Optional

import keras

from extreme_mem.models import initializers


def scaled(channels: int, multiplier: float) -> int:
    """`round(channels * multiplier)`, at least 1 (width multipliers of the double-descent sweep)."""
    if not multiplier > 0:
        raise ValueError(f'width_multiplier must be > 0, got {multiplier!r}.')
    return max(1, int(round(channels * multiplier)))


def check_image_shape(model: str, input_shape) -> tuple:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3:
        raise ValueError(f'{model} needs (H, W, C) image inputs, got input_shape={shape}.')
    return shape


class Initializers:
    """Kernel initializers `name` x `scale`, seeded `seed + k` for the k-th parameterised layer."""

    def __init__(self, name: str, scale: float, seed: Optional[int]):
        initializers.make_initializer(name, scale)  # validates
        self._name, self._scale, self._seed, self._k = name, scale, seed, 0

    def __call__(self):
        seed = None if self._seed is None else self._seed + self._k
        self._k += 1
        return initializers.make_initializer(self._name, self._scale, seed)


def conv(h, filters: int, kernel: int, name: str, init: Initializers, strides: int = 1, batch_norm: bool = True,
         relu: bool = True):
    """Conv2D (`same` padding; bias only without batch norm) [+ `<name>_bn`] [+ ReLU probe `<name>_rep`]."""
    h = keras.layers.Conv2D(filters, kernel, strides=strides, padding='same', use_bias=not batch_norm,
                            kernel_initializer=init(), name=name)(h)
    if batch_norm:
        h = keras.layers.BatchNormalization(name=name + '_bn')(h)
    if relu:
        h = keras.layers.ReLU(name=name + '_rep')(h)
    return h


def dense(h, units: int, name: str, init: Initializers, relu: bool = True):
    """Dense (with bias) [+ ReLU probe `<name>_rep`]."""
    h = keras.layers.Dense(units, kernel_initializer=init(), name=name)(h)
    if relu:
        h = keras.layers.ReLU(name=name + '_rep')(h)
    return h
