"""ResNet-18 for 32x32 inputs with a width multiplier (Stephenson et al., ICLR 2021, A.10 Table 4).

Stem conv3x3 (64) + BatchNorm + ReLU, then four stages of two basic blocks with 64, 128, 256, 512
channels (times `width_multiplier`; stages 2-4 start with stride 2), global average pooling and
the logits. Basic block: conv3x3 + BN + ReLU, conv3x3 + BN, plus the shortcut (1x1 conv + BN
when the shape changes), then ReLU. The double-descent sweep of section 4 (after Nakkiran et al.
2019) scales every width by one factor: `models.resnet18.width_multiplier`.

Layer names: `conv1` (+`conv1_bn`, probe `conv1_rep`); per block `s{S}b{B}_conv1`,
`s{S}b{B}_conv2` (each with `_bn`; probes `s{S}b{B}_conv1_rep` and, after the residual sum and
ReLU, `s{S}b{B}_conv2_rep`), `s{S}b{B}_shortcut` (+`_bn`, no probe: the paper omits skip
connections), `s{S}b{B}_add`; `pool`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import units

STAGE_WIDTHS = (64, 128, 256, 512)
BLOCKS_PER_STAGE = 2


def basic_block(h, filters: int, strides: int, name: str, init: units.Initializers):
    """One basic block; returns the block output (after the final ReLU probe)."""
    shortcut = h
    h = units.conv(h, filters, 3, f'{name}_conv1', init, strides=strides)
    h = units.conv(h, filters, 3, f'{name}_conv2', init, relu=False)
    if strides != 1 or shortcut.shape[-1] != filters:
        shortcut = units.conv(shortcut, filters, 1, f'{name}_shortcut', init, strides=strides, relu=False)
    h = keras.layers.Add(name=f'{name}_add')([h, shortcut])
    return keras.layers.ReLU(name=f'{name}_conv2_rep')(h)


@registry.MODELS.register('resnet18')
@gin.configurable(module='models')
def resnet18(
    input_shape: Sequence[int],
    num_outputs: int,
    width_multiplier: float = 1.0,
    initializer: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """ResNet-18 (Table 4) mapping `[batch, H, W, C]` to `[batch, num_outputs]` logits.

    Args:
      input_shape: (H, W, C), e.g. (32, 32, 3).
      num_outputs: number of classes.
      width_multiplier: multiplies every width (64, 128, 256, 512); e.g. 1/64 ... 1 for the
        double-descent sweep (Nakkiran et al.'s k = 1 ... 64 is width_multiplier = k / 64).
      initializer: kernel initializer name; `init_scale` scales it.
      seed: base seed; the k-th parameterised layer uses seed + k.
    """
    shape = units.check_image_shape('resnet18', input_shape)
    init = units.Initializers(initializer, init_scale, seed)
    inputs = keras.Input(shape=shape, name='x')
    h = units.conv(inputs, units.scaled(64, width_multiplier), 3, 'conv1', init)
    for s, width in enumerate(STAGE_WIDTHS):
        for b in range(BLOCKS_PER_STAGE):
            strides = 2 if s > 0 and b == 0 else 1
            h = basic_block(h, units.scaled(width, width_multiplier), strides, f's{s + 1}b{b + 1}', init)
    h = keras.layers.GlobalAveragePooling2D(name='pool')(h)
    logits = units.dense(h, num_outputs, 'logits', init, relu=False)
    return keras.Model(inputs, logits, name='resnet18')
