"""Networks of Zhang et al. (ICLR 2020), "Identity Crisis": image -> image of the same shape.

- `identity_linear`: `depth` linear Dense layers (width = input size, the no-bottleneck
  condition of appendix B.1), with or without biases; depth 1 is Theorem 1's `f(x) = W x`.
- `identity_fcn`: `depth` hidden ReLU Dense layers of `width` units (2,048 in appendix A), then a
  linear output layer.
- `identity_cnn`: `depth` hidden ReLU convolutions (`kernel_size`×`kernel_size`, stride 1, SAME
  padding, `channels` channels; 5×5 and 128 in appendix A), then a linear convolution to the
  image's channels. Fully convolutional (input shape [None, None, C]), so a net trained at 28×28
  runs at any size (section 3.3). Depth 0 is the single convolution of Theorem 2.

`depth` counts hidden layers for `identity_fcn`/`identity_cnn` (the rows of Fig. 4) and weight
layers for `identity_linear`. Layer names: `hidden{k}` / `conv{k}` with activation probes
`hidden{k}_rep` / `conv{k}_rep` (models/base.py), the output layer `output`. Every model maps
[batch, H, W, C] to [batch, H, W, C]; `num_outputs` (the source's class count) is ignored.
"""

from typing import Optional, Sequence

import gin
import keras
import numpy as np

from extreme_mem import registry
from extreme_mem.models import initializers

# Names beyond models/initializers.py: Keras built-ins, and PyTorch's default for Linear/Conv
# layers (U(±1/√fan_in), the paper's "default" init of appendix I).
EXTRA_INITIALIZERS = ('glorot_normal', 'he_uniform', 'lecun_normal', 'lecun_uniform', 'pytorch_default')


def make_initializer(name: str, scale: float = 1.0, seed: Optional[int] = None):
    """The kernel initializer `name` (see `valid_initializers()`), multiplied by `scale`."""
    if name in initializers.INITIALIZERS:
        return initializers.make_initializer(name, scale, seed)
    if name not in EXTRA_INITIALIZERS:
        raise ValueError(f'Unknown initializer {name!r}; valid: {valid_initializers()}.')
    if name == 'pytorch_default':
        base = keras.initializers.VarianceScaling(1.0 / 3.0, 'fan_in', 'uniform', seed=seed)
    else:
        base = keras.initializers.get({'class_name': name, 'config': {'seed': seed}})
    return base if scale == 1.0 else initializers.Scaled(base, scale)


def valid_initializers() -> list:
    return list(initializers.INITIALIZERS) + list(EXTRA_INITIALIZERS)


def _check(input_shape, depth: int, minimum: int, what: str) -> tuple:
    shape = tuple(int(s) if s is not None else None for s in input_shape)
    if len(shape) != 3:
        raise ValueError(f'{what} needs (H, W, C) images, got input_shape={shape}.')
    if not isinstance(depth, (int, np.integer)) or depth < minimum:
        raise ValueError(f'{what} depth must be an integer >= {minimum}, got {depth!r}.')
    return shape


def _dense_stack(input_shape, depth, width, activation, use_bias, initializer, init_scale, seed, name):
    """Flatten -> `depth` hidden Dense (+activation probe) -> Dense(prod(shape)) -> reshape."""
    size = int(np.prod(input_shape))
    inputs = keras.Input(shape=input_shape, name='x')
    h = keras.layers.Flatten(name='flatten')(inputs)
    for k in range(depth):
        layer = f'hidden{k + 1}'
        h = keras.layers.Dense(width, use_bias=use_bias, name=layer,
                               kernel_initializer=make_initializer(initializer, init_scale, _seed(seed, k)))(h)
        h = keras.layers.Activation(activation, name=layer + '_rep')(h)
    h = keras.layers.Dense(size, use_bias=use_bias, name='output',
                           kernel_initializer=make_initializer(initializer, init_scale, _seed(seed, depth)))(h)
    outputs = keras.layers.Reshape(input_shape, name='image')(h)
    return keras.Model(inputs, outputs, name=name)


def _seed(seed: Optional[int], k: int) -> Optional[int]:
    return None if seed is None else seed + k


@registry.MODELS.register('identity_linear')
@gin.configurable(module='models')
def identity_linear(input_shape: Sequence[int], num_outputs: int = 0, depth: int = 1, use_bias: bool = False,
                    initializer: str = 'glorot_uniform', init_scale: float = 1.0,
                    seed: Optional[int] = None) -> keras.Model:
    """`depth` linear layers d -> d (d = H·W·C); depth 1 without bias is Theorem 1's model.

    Args:
      input_shape: (H, W, C).
      num_outputs: ignored (the output is the image).
      depth: weight layers (>= 1).
      use_bias: biases on every layer (Theorem 1's closed form holds without them).
      initializer: kernel initializer name (`valid_initializers()`).
      init_scale: multiplier (stddev for `normal`).
      seed: base seed; layer k uses seed + k.
    """
    del num_outputs
    shape = _check(input_shape, depth, 1, 'identity_linear')
    size = int(np.prod(shape))
    return _dense_stack(shape, depth - 1, size, 'linear', use_bias, initializer, init_scale, seed, 'identity_linear')


@registry.MODELS.register('identity_fcn')
@gin.configurable(module='models')
def identity_fcn(input_shape: Sequence[int], num_outputs: int = 0, depth: int = 1, width: int = 2048,
                 use_bias: bool = True, initializer: str = 'glorot_uniform', init_scale: float = 1.0,
                 seed: Optional[int] = None) -> keras.Model:
    """`depth` hidden ReLU layers of `width` units, then a linear layer to the image.

    Args:
      input_shape: (H, W, C).
      num_outputs: ignored.
      depth: hidden layers (>= 0; 0 is a linear map).
      width: hidden units (appendix A: 2,048).
      use_bias: biases on every layer.
      initializer, init_scale, seed: as in `identity_linear`.
    """
    del num_outputs
    shape = _check(input_shape, depth, 0, 'identity_fcn')
    if width <= 0:
        raise ValueError(f'identity_fcn width must be > 0, got {width}.')
    return _dense_stack(shape, depth, width, 'relu', use_bias, initializer, init_scale, seed, 'identity_fcn')


@registry.MODELS.register('identity_cnn')
@gin.configurable(module='models')
def identity_cnn(input_shape: Sequence[int], num_outputs: int = 0, depth: int = 1, channels: int = 128,
                 kernel_size: int = 5, use_bias: bool = True, initializer: str = 'glorot_uniform',
                 init_scale: float = 1.0, seed: Optional[int] = None) -> keras.Model:
    """Fully convolutional: `depth` hidden ReLU convs, then a linear conv back to C channels.

    Args:
      input_shape: (H, W, C); H and W may be None (any size).
      num_outputs: ignored.
      depth: hidden layers (>= 0; 0 is Theorem 2's single convolution).
      channels: hidden channels (appendix A: 128).
      kernel_size: odd kernel height = width (appendix A: 5; Fig. 9 varies it to 57).
      use_bias, initializer, init_scale, seed: as in `identity_linear`.
    """
    del num_outputs
    shape = _check(input_shape, depth, 0, 'identity_cnn')
    if channels <= 0 or kernel_size <= 0 or kernel_size % 2 != 1:
        raise ValueError(f'identity_cnn needs channels > 0 and an odd kernel_size > 0, got {channels}, {kernel_size}.')
    inputs = keras.Input(shape=(None, None, shape[-1]), name='x')
    h = inputs
    for k in range(depth):
        layer = f'conv{k + 1}'
        h = keras.layers.Conv2D(channels, kernel_size, padding='same', use_bias=use_bias, name=layer,
                                kernel_initializer=make_initializer(initializer, init_scale, _seed(seed, k)))(h)
        h = keras.layers.Activation('relu', name=layer + '_rep')(h)
    outputs = keras.layers.Conv2D(shape[-1], kernel_size, padding='same', use_bias=use_bias, name='output',
                                  kernel_initializer=make_initializer(initializer, init_scale, _seed(seed, depth)))(h)
    return keras.Model(inputs, outputs, name='identity_cnn')
