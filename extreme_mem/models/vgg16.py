"""VGG-16 as in Maennel et al. (NeurIPS 2020), appendix A.2.

Configuration D of Simonyan & Zisserman (2015, Table 1) without the two FC-4096 layers: 13 3×3
convs (SAME, stride 1, biases, ReLU) in five blocks of 64, 128, 256, 512, 512 filters, each block
followed by a 2×2 max pool (SAME, stride 2), then the head on the flattened features. Kernels
are He normal (or orthogonal) × `init_scale`, biases zero (appendix A.3).

Layer names follow the paper: `conv0`..`conv12` with probes `conv0_rep`..`conv12_rep`,
`pool1`..`pool5`, `flatten`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import simple_cnn

# Configuration D: filters per conv, 'M' = max pool.
CONFIG_D = (64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M')


@registry.MODELS.register('vgg16_d')
@gin.configurable(module='models')
def vgg16_d(
    input_shape: Sequence[int],
    num_outputs: int,
    width_multiplier: float = 1.0,
    init_algorithm: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """VGG-16 (configuration D, no FC-4096 layers).

    Args:
      input_shape: (H, W, C); any size (SAME pooling keeps at least 1×1).
      num_outputs: logits.
      width_multiplier: filters per conv are round(multiplier × configuration D) (1.0: the paper;
        smaller values for quick CPU runs).
      init_algorithm: 'he_normal' or 'orthogonal'.
      init_scale: multiplier of every kernel initializer.
      seed: base seed; layer k uses seed + k.
    """
    if len(input_shape) != 3:
        raise ValueError(f'vgg16_d needs (H, W, C) inputs, got input_shape={tuple(input_shape)}.')
    if width_multiplier <= 0 or num_outputs < 1:
        raise ValueError(f'vgg16_d needs width_multiplier > 0 and num_outputs >= 1, got {width_multiplier}, '
                         f'{num_outputs}.')
    simple_cnn.kernel_initializer(init_algorithm, init_scale, None)
    inputs = keras.Input(shape=tuple(input_shape), name='x')
    h, conv, pool = inputs, 0, 0
    for item in CONFIG_D:
        if item == 'M':
            pool += 1
            h = keras.layers.MaxPooling2D(2, strides=2, padding='same', name=f'pool{pool}')(h)
            continue
        init = simple_cnn.kernel_initializer(init_algorithm, init_scale, None if seed is None else seed + conv)
        h = keras.layers.Conv2D(max(1, round(item * width_multiplier)), 3, padding='same', kernel_initializer=init,
                                bias_initializer='zeros', name=f'conv{conv}')(h)
        h = keras.layers.Activation('relu', name=f'conv{conv}_rep')(h)
        conv += 1
    h = keras.layers.Flatten(name='flatten')(h)
    init = simple_cnn.kernel_initializer(init_algorithm, init_scale, None if seed is None else seed + conv)
    logits = keras.layers.Dense(num_outputs, kernel_initializer=init, bias_initializer='zeros', name='logits')(h)
    return keras.Model(inputs, logits, name='vgg16_d')
