"""Fully connected networks (Mehta et al. 2021 section 3; Zhang et al. 2020 FCNs).

Layer names: hidden Dense layers `hidden` (one hidden layer) or `hidden1..hiddenD`, each followed
by its activation probe `<name>_rep`; the output Dense layer is `logits`. Dense layers carry no
activation (see models/base.py).
"""

from typing import Optional, Sequence, Union

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import activations, initializers

ACTIVATIONS = ('sin', 'relu', 'sigmoid', 'linear', 'tanh')


def activation_layer(name: str, layer_name: str) -> keras.layers.Layer:
    """An activation layer; `sin` is not a Keras built-in."""
    if name not in ACTIVATIONS:
        raise ValueError(f'Unknown activation {name!r}; valid: {list(ACTIVATIONS)}.')
    if name == 'sin':
        return keras.layers.Activation(activations.sin, name=layer_name)
    return keras.layers.Activation(name, name=layer_name)


def _per_layer(value, n: int, what: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f'{what} has {len(value)} entries, expected one per layer ({n}).')
        return list(value)
    return [value] * n


@registry.MODELS.register('mlp')
@gin.configurable(module='models')
def mlp(
    input_shape: Sequence[int],
    num_outputs: int,
    depth: int = 1,
    width: int = 1024,
    activation: str = 'sin',
    initializer: Union[str, Sequence[str]] = ('normal', 'glorot_uniform'),
    init_scale: Union[float, Sequence[float]] = (1.0, 1.0),
    use_bias: bool = False,
    seed: Optional[int] = None,
) -> keras.Model:
    """An MLP with `depth` hidden layers of `width` units; inputs are flattened.

    Args:
      input_shape: example shape, e.g. (8, 8, 1).
      num_outputs: logits (classes) or regression outputs.
      depth: number of hidden layers (1 = the paper's 2-layer MLP).
      width: hidden units per layer.
      activation: one of `ACTIVATIONS`.
      initializer: name per layer (depth + 1 entries, last is the output layer) or one for all.
      init_scale: σ (normal) or multiplier per layer, or one for all.
      use_bias: biases on every Dense layer (initialised to zero).
      seed: base seed; layer k uses seed + k.

    Returns:
      A functional `keras.Model` mapping `[batch, *input_shape]` to `[batch, num_outputs]`.
    """
    if depth < 0 or width <= 0 or num_outputs <= 0:
        raise ValueError(f'Need depth >= 0, width > 0, num_outputs > 0; got {depth}, {width}, {num_outputs}.')
    inits = _per_layer(initializer, depth + 1, 'initializer')
    scales = _per_layer(init_scale, depth + 1, 'init_scale')
    inputs = keras.Input(shape=tuple(input_shape), name='x')
    h = keras.layers.Flatten(name='flatten')(inputs) if len(input_shape) > 1 else inputs
    for k in range(depth):
        name = 'hidden' if depth == 1 else f'hidden{k + 1}'
        layer_seed = None if seed is None else seed + k
        h = keras.layers.Dense(
            width,
            use_bias=use_bias,
            kernel_initializer=initializers.make_initializer(inits[k], scales[k], layer_seed),
            name=name,
        )(h)
        h = activation_layer(activation, name + '_rep')(h)
    logits = keras.layers.Dense(
        num_outputs,
        use_bias=use_bias,
        kernel_initializer=initializers.make_initializer(inits[-1], scales[-1], None if seed is None else seed + depth),
        name='logits',
    )(h)
    return keras.Model(inputs, logits, name='mlp')
