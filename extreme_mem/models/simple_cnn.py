"""Simple CNN of Maennel et al. (NeurIPS 2020), appendix A.2 (and the Table 1 CNN of appendix E.3).

`num_conv_layers` 3×3 convs of `num_filters` filters (biases, stride 1, ReLU), an optional max
pool, a dense layer of `num_units` (ReLU) on the flattened features, and the head `logits`.
Kernels are He normal × `init_scale` (or orthogonal × `init_scale`, appendix B.2), biases zero
(appendix A.3).

Layer names: `conv1`..`convN` with probes `conv1_rep`..`convN_rep`, optional `pool`, `flatten`,
`fc` with probe `fc_rep`, `logits`. Parameterised layers carry no activation (models/base.py).
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import initializers

INIT_ALGORITHMS = ('he_normal', 'orthogonal')
PADDINGS = ('same', 'valid')


def kernel_initializer(init_algorithm: str, init_scale: float, seed: Optional[int]):
    """He normal or orthogonal, scaled by `init_scale` (appendix A.3 and B.2)."""
    if init_algorithm not in INIT_ALGORITHMS:
        raise ValueError(f'Unknown init_algorithm {init_algorithm!r}; valid: {list(INIT_ALGORITHMS)}.')
    return initializers.make_initializer(init_algorithm, init_scale, seed)


@registry.MODELS.register('simple_cnn')
@gin.configurable(module='models')
def simple_cnn(
    input_shape: Sequence[int],
    num_outputs: int,
    num_conv_layers: int = 1,
    num_filters: int = 64,
    num_units: int = 256,
    padding: str = 'same',
    pool_size: Optional[int] = None,
    pool_stride: int = 2,
    init_algorithm: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """The Simple CNN (appendix A.2).

    Args:
      input_shape: (H, W, C).
      num_outputs: logits.
      num_conv_layers: number of 3×3 conv layers (>= 1).
      num_filters: filters per conv layer.
      num_units: units of the dense hidden layer.
      padding: conv padding, 'same' or 'valid' (the paper does not say; 'same' keeps 8×8 digits usable).
      pool_size: max pool after the convs (appendix E.3: 3, stride 2); None: no pooling (A.2).
      pool_stride: stride of that pool.
      init_algorithm: 'he_normal' or 'orthogonal'.
      init_scale: multiplier of every kernel initializer.
      seed: base seed; layer k uses seed + k.

    Returns:
      A functional `keras.Model` mapping [batch, H, W, C] to [batch, num_outputs].
    """
    if len(input_shape) != 3:
        raise ValueError(f'simple_cnn needs (H, W, C) inputs, got input_shape={tuple(input_shape)}.')
    if num_conv_layers < 1 or num_filters < 1 or num_units < 1 or num_outputs < 1:
        raise ValueError('simple_cnn needs num_conv_layers, num_filters, num_units, num_outputs >= 1; got '
                         f'{num_conv_layers}, {num_filters}, {num_units}, {num_outputs}.')
    if padding not in PADDINGS:
        raise ValueError(f'Unknown padding {padding!r}; valid: {list(PADDINGS)}.')
    kernel_initializer(init_algorithm, init_scale, None)  # validate before building

    def init(k):
        return kernel_initializer(init_algorithm, init_scale, None if seed is None else seed + k)

    inputs = keras.Input(shape=tuple(input_shape), name='x')
    h = inputs
    for k in range(num_conv_layers):
        name = f'conv{k + 1}'
        h = keras.layers.Conv2D(num_filters, 3, padding=padding, kernel_initializer=init(k),
                                bias_initializer='zeros', name=name)(h)
        h = keras.layers.Activation('relu', name=name + '_rep')(h)
    if pool_size:
        h = keras.layers.MaxPooling2D(pool_size, strides=pool_stride, padding='same', name='pool')(h)
    h = keras.layers.Flatten(name='flatten')(h)
    h = keras.layers.Dense(num_units, kernel_initializer=init(num_conv_layers), bias_initializer='zeros',
                           name='fc')(h)
    h = keras.layers.Activation('relu', name='fc_rep')(h)
    logits = keras.layers.Dense(num_outputs, kernel_initializer=init(num_conv_layers + 1),
                                bias_initializer='zeros', name='logits')(h)
    return keras.Model(inputs, logits, name='simple_cnn')
