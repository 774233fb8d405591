"""VGG-16 for 32x32 inputs (Stephenson et al., ICLR 2021, appendix A.10, Table 3).

13 conv3x3 + BatchNorm + ReLU layers (64, 64, M, 128, 128, M, 256 x3, M, 512 x3, M, 512 x3, M;
M = 2x2 max-pool, stride 2), then Linear 512->4096 + ReLU + Dropout, 4096->4096 + ReLU +
Dropout, and the logits. `width_multiplier` scales every conv and hidden linear width.

Layer names: `conv1..conv13` (each with `convK_bn` and the probe `convK_rep`), `pool1..pool5`,
`fc1`, `fc1_rep`, `fc1_dropout`, `fc2`, `fc2_rep`, `fc2_dropout`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import units

# Conv widths per stage; a max-pool follows every stage.
STAGES = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))


@registry.MODELS.register('vgg16')
@gin.configurable(module='models')
def vgg16(
    input_shape: Sequence[int],
    num_outputs: int,
    width_multiplier: float = 1.0,
    fc_width: int = 4096,
    dropout: float = 0.5,
    batch_norm: bool = True,
    initializer: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """VGG-16 (Table 3) mapping `[batch, H, W, C]` to `[batch, num_outputs]` logits.

    Args:
      input_shape: (H, W, C), e.g. (32, 32, 3); H and W must survive five 2x2 pools (>= 32).
      num_outputs: number of classes.
      width_multiplier: multiplies every conv width and `fc_width`.
      fc_width: width of the two hidden linear layers (paper: 4,096).
      dropout: dropout rate after each hidden linear layer (paper: Dropout, rate not given; 0.5).
      batch_norm: BatchNorm after every conv (paper: yes).
      initializer: kernel initializer name (models/initializers.py); `init_scale` scales it.
      seed: base seed; the k-th parameterised layer uses seed + k.
    """
    shape = units.check_image_shape('vgg16', input_shape)
    if min(shape[:2]) < 32:
        raise ValueError(f'vgg16 needs inputs of at least 32x32 (five 2x2 pools), got {shape[:2]}.')
    init = units.Initializers(initializer, init_scale, seed)
    inputs = keras.Input(shape=shape, name='x')
    h, k = inputs, 0
    for s, widths in enumerate(STAGES):
        for w in widths:
            k += 1
            h = units.conv(h, units.scaled(w, width_multiplier), 3, f'conv{k}', init, batch_norm=batch_norm)
        h = keras.layers.MaxPooling2D(2, strides=2, name=f'pool{s + 1}')(h)
    h = keras.layers.Flatten(name='flatten')(h)
    for j in (1, 2):
        h = units.dense(h, units.scaled(fc_width, width_multiplier), f'fc{j}', init)
        h = keras.layers.Dropout(dropout, seed=None if seed is None else seed + 100 + j, name=f'fc{j}_dropout')(h)
    logits = units.dense(h, num_outputs, 'logits', init, relu=False)
    return keras.Model(inputs, logits, name='vgg16')
