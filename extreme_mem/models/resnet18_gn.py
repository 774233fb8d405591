"""ResNet-18 v2 (pre-activation, He et al. 2016b) with GroupNorm (Wu & He 2018) for Maennel et al. (2020).

Appendix A.2: "vanilla ResNet-v2 architecture with batch normalization replaced by group
normalization". Four stages of two basic blocks (64, 128, 256, 512 filters; stages 2-4 start
with stride 2); each block is GN-ReLU-conv3×3-GN-ReLU-conv3×3 plus the identity, or a 1×1
projection of the pre-activated input when the shape changes. The stem is a 3×3 conv (`stem =
'cifar'`) or a 7×7/2 conv plus 3×3/2 max pool (`stem = 'imagenet'`); then GN-ReLU, global average
pooling and the head. Convs have no bias (GN has β); kernels are He normal (or orthogonal) ×
`init_scale`. Appendix A.4: ResNets are not re-scaled after pre-training.

Layer names: `stem`, blocks `s{stage}b{block}_{gn1,conv1,gn2,conv2,proj}`, probes
`s{stage}b{block}_rep` (the block's first pre-activation ReLU) and `final_rep`, `pool`, `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import simple_cnn

STEMS = ('cifar', 'imagenet')
STAGE_FILTERS = (64, 128, 256, 512)


@registry.MODELS.register('resnet18_gn')
@gin.configurable(module='models')
def resnet18_gn(
    input_shape: Sequence[int],
    num_outputs: int,
    width: int = 64,
    blocks_per_stage: Sequence[int] = (2, 2, 2, 2),
    groups: int = 32,
    stem: str = 'cifar',
    init_algorithm: str = 'he_normal',
    init_scale: float = 1.0,
    seed: Optional[int] = None,
) -> keras.Model:
    """ResNet-18 v2 with GroupNorm.

    Args:
      input_shape: (H, W, C).
      num_outputs: logits.
      width: filters of the first stage (64: ResNet-18); stage s has width · 2^s.
      blocks_per_stage: basic blocks per stage ((2, 2, 2, 2): ResNet-18).
      groups: GroupNorm groups (capped at the channel count).
      stem: 'cifar' (3×3 conv) or 'imagenet' (7×7/2 conv + 3×3/2 max pool).
      init_algorithm: 'he_normal' or 'orthogonal'.
      init_scale: multiplier of every kernel initializer.
      seed: base seed; the k-th kernel uses seed + k.
    """
    if len(input_shape) != 3:
        raise ValueError(f'resnet18_gn needs (H, W, C) inputs, got input_shape={tuple(input_shape)}.')
    if stem not in STEMS:
        raise ValueError(f'Unknown stem {stem!r}; valid: {list(STEMS)}.')
    if width < 1 or groups < 1 or num_outputs < 1 or not blocks_per_stage:
        raise ValueError(f'resnet18_gn needs width, groups, num_outputs >= 1 and some blocks; got {width}, {groups}, '
                         f'{num_outputs}, {blocks_per_stage}.')
    simple_cnn.kernel_initializer(init_algorithm, init_scale, None)
    counter = [0]

    def init():
        counter[0] += 1
        return simple_cnn.kernel_initializer(init_algorithm, init_scale, None if seed is None else seed + counter[0])

    def conv(h, filters, size, stride, name):
        return keras.layers.Conv2D(filters, size, strides=stride, padding='same', use_bias=False,
                                   kernel_initializer=init(), name=name)(h)

    def norm(h, name):
        channels = h.shape[-1]
        g = min(groups, channels)
        while channels % g:
            g -= 1
        return keras.layers.GroupNormalization(groups=g, name=name)(h)

    inputs = keras.Input(shape=tuple(input_shape), name='x')
    if stem == 'cifar':
        h = conv(inputs, width, 3, 1, 'stem')
    else:
        h = conv(inputs, width, 7, 2, 'stem')
        h = keras.layers.MaxPooling2D(3, strides=2, padding='same', name='stem_pool')(h)
    for s, num_blocks in enumerate(blocks_per_stage):
        filters = width * 2**s
        for b in range(num_blocks):
            stride = 2 if (s > 0 and b == 0) else 1
            prefix = f's{s + 1}b{b + 1}'
            pre = keras.layers.Activation('relu', name=f'{prefix}_rep')(norm(h, f'{prefix}_gn1'))
            shortcut = h
            if stride != 1 or h.shape[-1] != filters:
                shortcut = conv(pre, filters, 1, stride, f'{prefix}_proj')
            r = conv(pre, filters, 3, stride, f'{prefix}_conv1')
            r = keras.layers.Activation('relu', name=f'{prefix}_relu2')(norm(r, f'{prefix}_gn2'))
            r = conv(r, filters, 3, 1, f'{prefix}_conv2')
            h = keras.layers.Add(name=f'{prefix}_add')([shortcut, r])
    h = keras.layers.Activation('relu', name='final_rep')(norm(h, 'final_gn'))
    h = keras.layers.GlobalAveragePooling2D(name='pool')(h)
    logits = keras.layers.Dense(num_outputs, kernel_initializer=init(), bias_initializer='zeros', name='logits')(h)
    return keras.Model(inputs, logits, name='resnet18_gn')
