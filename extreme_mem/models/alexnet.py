"""AlexNet adapted to 32x32 inputs (Stephenson et al., ICLR 2021, appendix A.10, Table 2).

conv 64 11x11 (stride 4) + ReLU, max-pool 2x2/2, conv 192 5x5 + ReLU, max-pool, conv 384 3x3,
conv 256 3x3, conv 1024 3x3 (each + ReLU), max-pool, then the logits (Linear 1024 -> classes for
32x32 inputs). 'same' padding throughout, so 32x32 -> 8 -> 4 -> 4 -> 2 -> 2 -> 1.

Layer names: `conv1..conv5` with probes `convK_rep`, `pool1..pool3`, `flatten`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import units

# (filters, kernel, stride, pool after)
CONVS = ((64, 11, 4, True), (192, 5, 1, True), (384, 3, 1, False), (256, 3, 1, False), (1024, 3, 1, True))


@registry.MODELS.register('alexnet')
@gin.configurable(module='models')
def alexnet(
    input_shape: Sequence[int],
    num_outputs: int,
    width_multiplier: float = 1.0,
    initializer: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """Modified AlexNet (Table 2); no batch norm, biases on every layer.

    Args:
      input_shape: (H, W, C), e.g. (32, 32, 3).
      num_outputs: number of classes.
      width_multiplier: multiplies every conv width.
      initializer: kernel initializer name; `init_scale` scales it.
      seed: base seed; the k-th parameterised layer uses seed + k.
    """
    shape = units.check_image_shape('alexnet', input_shape)
    init = units.Initializers(initializer, init_scale, seed)
    inputs = keras.Input(shape=shape, name='x')
    h, pools = inputs, 0
    for k, (filters, kernel, stride, pool) in enumerate(CONVS):
        h = units.conv(h, units.scaled(filters, width_multiplier), kernel, f'conv{k + 1}', init, strides=stride,
                        batch_norm=False)
        if pool:
            pools += 1
            h = keras.layers.MaxPooling2D(2, strides=2, padding='same', name=f'pool{pools}')(h)
    h = keras.layers.Flatten(name='flatten')(h)
    logits = units.dense(h, num_outputs, 'logits', init, relu=False)
    return keras.Model(inputs, logits, name='alexnet')
