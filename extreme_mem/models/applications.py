"""ResNet-50 and DenseNet-121 from `keras.applications`, trained from scratch (`weights=None`).

Mehta et al. (ICLR 2021) section 5 / Fig. 5 compare the representation alignment of the last
hidden layer across architectures (2-layer MLP, appendix-H ConvNet, ResNet-50, DenseNet-121) at
fixed hyper-parameters. Here the Keras backbone (no top, no pretrained weights) is followed by
global average pooling, the probe `features_rep` (the last hidden representation, tag
`<split>/rep_alignment/features`) and a `logits` Dense layer (glorot uniform kernel, zero bias,
as the paper's appendix C/H for non-scaled layers).

The backbone layers are part of the returned functional model (not a nested model), so every
layer is addressable by name (`lr_multipliers`, `frozen_layers`, probes). Keras applications
need inputs of at least 32x32 (e.g. `data.Digits.image_size = 32`); any channel count works
without pretrained weights.

Layer names: the backbone's own (`conv1_conv`, `conv2_block1_1_conv`, ... for ResNet-50;
`conv1_conv`, `conv2_block1_0_bn`, ... for DenseNet-121), then `features` (pooling),
`features_rep` (probe) and `logits`.
"""

from typing import Callable, Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import initializers

MIN_SIZE = 32  # keras.applications' minimum input height/width without pretrained weights
POOLINGS = ('avg', 'max')


def _check_input_shape(name: str, input_shape: Sequence[int]) -> tuple:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3:
        raise ValueError(f'{name} needs (H, W, C) image inputs, got input_shape={shape}.')
    if min(shape[:2]) < MIN_SIZE:
        raise ValueError(
            f'{name} needs inputs of at least {MIN_SIZE}x{MIN_SIZE}, got {shape[:2]}; resize the data, '
            f'e.g. data.Digits.image_size = {MIN_SIZE}.'
        )
    return shape


def _classifier(
    name: str,
    backbone_fn: Callable[..., keras.Model],
    input_shape: Sequence[int],
    num_outputs: int,
    pooling: str,
    seed: Optional[int],
) -> keras.Model:
    """`backbone_fn(include_top=False, weights=None)` + pooling + probe + logits."""
    shape = _check_input_shape(name, input_shape)
    if num_outputs <= 0:
        raise ValueError(f'num_outputs must be positive, got {num_outputs}.')
    if pooling not in POOLINGS:
        raise ValueError(f'Unknown pooling {pooling!r}; valid: {list(POOLINGS)}.')
    inputs = keras.Input(shape=shape, name='x')
    backbone = backbone_fn(include_top=False, weights=None, input_tensor=inputs, pooling=None)
    pool = keras.layers.GlobalAveragePooling2D if pooling == 'avg' else keras.layers.GlobalMaxPooling2D
    h = pool(name='features')(backbone.output)
    h = keras.layers.Activation('linear', name='features_rep')(h)
    logits = keras.layers.Dense(
        num_outputs,
        kernel_initializer=initializers.make_initializer('glorot_uniform', 1.0, seed),
        bias_initializer='zeros',
        name='logits',
    )(h)
    return keras.Model(inputs, logits, name=name)


@registry.MODELS.register('resnet50')
@gin.configurable(module='models')
def resnet50(
    input_shape: Sequence[int], num_outputs: int, pooling: str = 'avg', seed: Optional[int] = None
) -> keras.Model:
    """ResNet-50 (He et al. 2016), `keras.applications.ResNet50(weights=None)`, new logits.

    Args:
      input_shape: (H, W, C) with H, W >= 32.
      num_outputs: number of logits.
      pooling: 'avg' or 'max' global pooling of the last feature map.
      seed: seed of the logits layer (the backbone uses Keras' global seed,
        `keras.utils.set_random_seed`, which the experiment sets).

    Returns:
      A functional `keras.Model` mapping `[batch, H, W, C]` to `[batch, num_outputs]`.

    Raises:
      ValueError: inputs that are not images of at least 32x32.
    """
    return _classifier('resnet50', keras.applications.ResNet50, input_shape, num_outputs, pooling, seed)


@registry.MODELS.register('densenet121')
@gin.configurable(module='models')
def densenet121(
    input_shape: Sequence[int], num_outputs: int, pooling: str = 'avg', seed: Optional[int] = None
) -> keras.Model:
    """DenseNet-121 (Huang et al. 2017), `keras.applications.DenseNet121(weights=None)`, new logits.

    Args:
      input_shape: (H, W, C) with H, W >= 32.
      num_outputs: number of logits.
      pooling: 'avg' or 'max' global pooling of the last feature map.
      seed: seed of the logits layer (the backbone uses Keras' global seed).

    Returns:
      A functional `keras.Model` mapping `[batch, H, W, C]` to `[batch, num_outputs]`.

    Raises:
      ValueError: inputs that are not images of at least 32x32.
    """
    return _classifier('densenet121', keras.applications.DenseNet121, input_shape, num_outputs, pooling, seed)
