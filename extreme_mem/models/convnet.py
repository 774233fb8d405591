"""The small ConvNet of Mehta et al. (2021), appendix H.

conv5×5×32-ReLU, maxpool 3×3/2, conv5×5×64-ReLU, maxpool 3×3/2, dense 1024-ReLU, logits.
Layer names: `conv1`, `conv1_rep`, `pool1`, `conv2`, `conv2_rep`, `pool2`, `fc`, `fc_rep`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import initializers


@registry.MODELS.register('convnet')
@gin.configurable(module='models')
def convnet(
    input_shape: Sequence[int],
    num_outputs: int,
    filters: Sequence[int] = (32, 64),
    width: int = 1024,
    initializer: str = 'glorot_uniform',
    init_scale: float = 1.0,
    use_bias: bool = True,
    seed: Optional[int] = None,
) -> keras.Model:
    """Appendix-H ConvNet. `init_scale` multiplies (or is σ of) every layer's initializer.

    Args:
      input_shape: (H, W, C).
      num_outputs: number of logits.
      filters: channels of the two conv layers.
      width: units of the dense hidden layer.
      initializer: name from models/initializers.py.
      init_scale: σ or multiplier of every layer's initializer.
      use_bias: biases on conv/dense layers.
      seed: base seed; layer k uses seed + k.
    """
    if len(input_shape) != 3:
        raise ValueError(f'convnet needs (H, W, C) inputs, got input_shape={tuple(input_shape)}.')

    def init(k):
        return initializers.make_initializer(initializer, init_scale, None if seed is None else seed + k)

    inputs = keras.Input(shape=tuple(input_shape), name='x')
    h = inputs
    for k, f in enumerate(filters):
        name = f'conv{k + 1}'
        h = keras.layers.Conv2D(f, 5, padding='same', use_bias=use_bias, kernel_initializer=init(k), name=name)(h)
        h = keras.layers.Activation('relu', name=name + '_rep')(h)
        h = keras.layers.MaxPooling2D(3, strides=2, padding='same', name=f'pool{k + 1}')(h)
    h = keras.layers.Flatten(name='flatten')(h)
    h = keras.layers.Dense(width, use_bias=use_bias, kernel_initializer=init(len(filters)), name='fc')(h)
    h = keras.layers.Activation('relu', name='fc_rep')(h)
    logits = keras.layers.Dense(
        num_outputs, use_bias=use_bias, kernel_initializer=init(len(filters) + 1), name='logits'
    )(h)
    return keras.Model(inputs, logits, name='convnet')
