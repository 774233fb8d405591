"""Fully connected ReLU network with one width per hidden layer (Maennel et al. 2020, appendix E.1).

The f(σ) experiments of Fig. 4 (left) and Fig. 20 use 2 hidden layers of different widths
(2,048 then 256, or 256 then 256), He initialisation and biases. Layer names: `hidden1`..`hiddenD`
with probes `hidden1_rep`..`hiddenD_rep`, then `logits`.
"""

from typing import Optional, Sequence

import gin
import keras

from extreme_mem import registry
from extreme_mem.models import initializers


@registry.MODELS.register('fcn')
@gin.configurable(module='models')
def fcn(
    input_shape: Sequence[int],
    num_outputs: int,
    widths: Sequence[int] = (2048, 256),
    initializer: str = 'he_normal',
    init_scale: float = 1.0,
    use_bias: bool = True,
    seed: Optional[int] = None,
) -> keras.Model:
    """ReLU MLP with hidden widths `widths` (inputs are flattened), zero biases.

    Args:
      input_shape: example shape.
      num_outputs: logits.
      widths: units per hidden layer (appendix E.1: (2048, 256) or (256, 256)).
      initializer: name in `initializers.INITIALIZERS` for every layer, scaled by `init_scale`.
      use_bias: biases (initialised to zero).
      seed: base seed; layer k uses seed + k.
    """
    widths = [int(w) for w in widths]
    if not widths or min(widths) < 1 or num_outputs < 1:
        raise ValueError(f'fcn needs positive widths and num_outputs, got {widths}, {num_outputs}.')
    initializers.make_initializer(initializer, init_scale, None)
    inputs = keras.Input(shape=tuple(input_shape), name='x')
    h = keras.layers.Flatten(name='flatten')(inputs) if len(input_shape) > 1 else inputs
    for k, width in enumerate(widths + [num_outputs]):
        name = 'logits' if k == len(widths) else f'hidden{k + 1}'
        h = keras.layers.Dense(width, use_bias=use_bias, bias_initializer='zeros', name=name,
                               kernel_initializer=initializers.make_initializer(
                                   initializer, init_scale, None if seed is None else seed + k))(h)
        if name != 'logits':
            h = keras.layers.Activation('relu', name=f'{name}_rep')(h)
    return keras.Model(inputs, h, name='fcn')
