"""Scaled weight initializers, by name. Init scale is the main knob of Mehta et al. (2021).

`make_initializer(name, scale, seed)` returns a Keras initializer whose samples are the base
distribution multiplied by `scale` (for `normal`/`truncated_normal` the scale *is* the stddev σ,
as in the paper's W1 ~ N(0, σ²)).
"""

from typing import Optional

import keras

INITIALIZERS = ('normal', 'truncated_normal', 'glorot_uniform', 'he_normal', 'orthogonal', 'zeros')


class Scaled(keras.initializers.Initializer):
    """`base(shape) * scale`."""

    def __init__(self, base: keras.initializers.Initializer, scale: float):
        self.base, self.scale = base, float(scale)

    def __call__(self, shape, dtype=None):
        return self.base(shape, dtype=dtype) * self.scale

    def get_config(self):
        return {'base': keras.initializers.serialize(self.base), 'scale': self.scale}


def make_initializer(name: str, scale: float = 1.0, seed: Optional[int] = None):
    """Returns the initializer `name` scaled by `scale`.

    Args:
      name: one of `INITIALIZERS`.
      scale: stddev for `normal`/`truncated_normal`; a multiplier for the others.
      seed: initializer seed (repeatable weights).

    Raises:
      ValueError: unknown name or non-positive scale.
    """
    if name not in INITIALIZERS:
        raise ValueError(f'Unknown initializer {name!r}; valid: {list(INITIALIZERS)}.')
    if scale <= 0 and name != 'zeros':
        raise ValueError(f'Initializer scale must be > 0, got {scale!r}.')
    if name == 'normal':
        return keras.initializers.RandomNormal(stddev=scale, seed=seed)
    if name == 'truncated_normal':
        return keras.initializers.TruncatedNormal(stddev=scale, seed=seed)
    if name == 'zeros':
        return keras.initializers.Zeros()
    base = {
        'glorot_uniform': keras.initializers.GlorotUniform,
        'he_normal': keras.initializers.HeNormal,
        'orthogonal': keras.initializers.Orthogonal,
    }[name](seed=seed)
    return base if scale == 1.0 else Scaled(base, scale)
