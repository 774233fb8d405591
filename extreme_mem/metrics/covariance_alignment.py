"""Covariance alignment of a layer's weights with its input data (Maennel et al., NeurIPS 2020, sec. 2).

At evaluation time, for each chosen conv or dense layer: Σ_x, the covariance of the layer's
inputs (k×k×C patches for a conv layer; input vectors for a dense layer) over a fixed set of
training examples, and Σ_w, the covariance of the layer's filters. Tags:

- `eval/misalignment/data/<layer>`: M(Σ_x, Σ_w) (Definition 2, closed form);
- `eval/misalignment/random_mean/<layer>`, `eval/misalignment/random_std/<layer>`: the same sum
  over `num_random_bases` Haar-random orthonormal bases instead of Σ_x's eigenbasis (Fig. 2),
  the same bases at every evaluation;
- with `transfer_function`: `eval/transfer_sigma/<layer>/<i>` and `eval/transfer_tau/<layer>/<i>`,
  σ_i and f(σ_i) = sqrt(v_iᵀ Σ_w v_i) (Definition 3, Fig. 4), i = 0 for the largest σ.
The value at step 0 (initialisation) is the noise floor of the data-basis misalignment.
Σ_w must be positive definite: a layer needs more filters than its filter dimension d.
"""

from typing import Optional, Sequence

import gin
import keras
import numpy as np
from absl import logging

from extreme_mem import registry
from extreme_mem.geometry import covariance
from extreme_mem.metrics import base


def layer_input_covariance(model: keras.Model, layer_name: str, images: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Σ_x of the inputs the named conv (patches) or dense (vectors) layer sees on `images`."""
    layer = model.get_layer(layer_name)
    kernel = getattr(layer, 'kernel', None)
    if kernel is None:
        raise ValueError(f'Layer {layer_name!r} has no kernel; choose a conv or dense layer: '
                         f'{[l.name for l in model.layers if getattr(l, "kernel", None) is not None]}.')
    if layer.input is model.inputs[0]:
        inputs = np.asarray(images)
    else:
        feed = keras.Model(model.inputs[0], layer.input)
        inputs = np.concatenate([np.asarray(feed(images[s:s + batch_size], training=False))
                                 for s in range(0, len(images), batch_size)])
    if len(kernel.shape) == 4:
        kh, kw = layer.kernel_size
        if kh != kw or layer.strides[0] != layer.strides[1]:
            raise ValueError(f'Layer {layer_name!r}: only square kernels and strides are supported.')
        return covariance.patch_covariance(inputs, kh, layer.strides[0], layer.padding)
    return covariance.covariance(inputs.reshape(len(inputs), -1))


def first_kernel_layer(model: keras.Model) -> str:
    for layer in model.layers:
        if getattr(layer, 'kernel', None) is not None:
            return layer.name
    raise ValueError(f'Model {model.name!r} has no conv or dense layer.')


@registry.METRICS.register('covariance_alignment')
@gin.configurable(module='metrics')
class CovarianceAlignment(base.MetricPlugin):
    """Misalignment with the data eigenbasis vs random bases, and f(σ), per chosen layer."""

    needs = frozenset()  # evaluation only

    def __init__(
        self,
        layers: Optional[Sequence[str]] = None,  # None: the first conv/dense layer
        num_examples: Optional[int] = 2000,  # training examples for Σ_x (None: all)
        num_random_bases: int = 20,
        transfer_function: bool = False,
        at_steps: Optional[Sequence[int]] = None,  # None: every evaluation
        seed: int = 0,
    ):
        super().__init__(every_n_steps=None)
        if num_random_bases < 1:
            raise ValueError(f'num_random_bases must be >= 1, got {num_random_bases}.')
        self._layers = None if layers is None else list(layers)
        self._num_examples, self._num_random = num_examples, int(num_random_bases)
        self._transfer_function = transfer_function
        self._at_steps = None if at_steps is None else set(at_steps)
        self._seed = seed
        self._fixed_sigma_x: dict = {}  # layers fed by the raw input: Σ_x never changes

    def _images(self, data) -> np.ndarray:
        n = data.train.num_examples
        if self._num_examples is None or self._num_examples >= n:
            return data.train.images
        positions = np.sort(np.random.default_rng(self._seed).choice(n, size=self._num_examples, replace=False))
        return data.train.images[positions]

    def evaluate(self, context: base.EvalContext) -> dict:
        if self._at_steps is not None and context.step not in self._at_steps:
            return {}
        model = context.model
        layers = self._layers or [first_kernel_layer(model)]
        results = {}
        for name in layers:
            layer = model.get_layer(name)
            if name in self._fixed_sigma_x:
                sigma_x = self._fixed_sigma_x[name]
            else:
                sigma_x = layer_input_covariance(model, name, self._images(context.data))
                if layer.input is model.inputs[0]:
                    self._fixed_sigma_x[name] = sigma_x
            sigma_w = covariance.filter_covariance(layer.get_weights()[0])
            try:
                data_value = covariance.misalignment(sigma_x, sigma_w)
                random = covariance.random_basis_misalignment(sigma_w, self._num_random, seed=self._seed)
            except ValueError as e:
                logging.warning('covariance_alignment skips layer %s: %s', name, e)
                continue
            results[f'eval/misalignment/data/{name}'] = data_value
            results[f'eval/misalignment/random_mean/{name}'] = float(random.mean())
            results[f'eval/misalignment/random_std/{name}'] = float(random.std())
            if self._transfer_function:
                sigma, tau = covariance.transfer_function(sigma_x, sigma_w)
                for i, (s, t) in enumerate(zip(sigma, tau)):
                    results[f'eval/transfer_sigma/{name}/{i}'] = float(s)
                    results[f'eval/transfer_tau/{name}/{i}'] = float(t)
        return results
