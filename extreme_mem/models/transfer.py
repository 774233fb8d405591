"""Transfer from random-label pre-training (Maennel et al., NeurIPS 2020, appendix A.4, sec. 2.4-2.5).

Reusable pieces on Keras models (no training here):

- `layer_norms` / `rescale_to_norms`: re-scale each layer after pre-training to its ℓ2 (or ℓ1)
  norm at initialisation, removing the weight-scale effect (sec. 1.1, A.4);
- `transfer_layers`: copy the first k parameterised layers into a fresh model whose head stays
  freshly initialised (A.4);
- `covariance_init`: conv filters sampled from N(0, Σ_w) of pre-trained filters (Fig. 5);
- `data_covariance_init`: the layer-by-layer initialisation from the data covariance (sec. 2.5,
  Table 1, appendix E.3);
- `prepare_downstream`: one arm of the transfer protocol (`ARMS`);
- `training_auc`: the area under the training-accuracy curve (appendix B).

A "layer" is a Keras layer with weights; "kernel layers" (Conv2D, Dense) are what k counts.
"""

from typing import Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from extreme_mem.geometry import covariance

NORMS = ('l2', 'l1')
ARMS = ('scratch', 'pretrained_conv', 'pretrained_conv_dense', 'no_rescale', 'covariance_init')
_NORMALIZATION = (keras.layers.GroupNormalization, keras.layers.BatchNormalization,
                  keras.layers.LayerNormalization)


def kernel_layers(model: keras.Model) -> list:
    """Conv and dense layers (those with a `kernel`), in model order."""
    return [l for l in model.layers if getattr(l, 'kernel', None) is not None]


def conv_layers(model: keras.Model) -> list:
    return [l for l in kernel_layers(model) if len(l.kernel.shape) == 4]


def _norm(arrays: Sequence[np.ndarray], norm: str) -> float:
    if norm not in NORMS:
        raise ValueError(f'Unknown norm {norm!r}; valid: {list(NORMS)}.')
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])
    return float(np.sum(np.abs(flat)) if norm == 'l1' else np.sqrt(np.sum(flat**2)))


def layer_norms(model: keras.Model, norm: str = 'l2') -> dict:
    """Kernel layer name -> norm of all its weights (kernel and bias as one vector)."""
    return {l.name: _norm(l.get_weights(), norm) for l in kernel_layers(model)}


def rescale_to_norms(model: keras.Model, norms: Mapping[str, float], norm: str = 'l2',
                     preserve_predictions: bool = True) -> dict:
    """Multiplies each kernel layer's weights so that its norm equals `norms[layer]` (in place).

    Appendix A.4 multiplies "all parameters of a given layer by a strictly positive constant".
    With non-zero biases that changes the predictions of a ReLU network unless each bias also
    carries the scale of the layers below it; `preserve_predictions=True` does that: layer ℓ's
    kernel is multiplied by c_ℓ and its bias by C_ℓ = c_1 ⋯ c_ℓ, with c_ℓ chosen so the layer's
    norm is `norms[layer]`. The logits are then C_L × the old logits (same argmax). With
    `preserve_predictions=False` kernel and bias of a layer share c_ℓ (the literal recipe).
    Needs a chain of positively homogeneous layers (ReLU, max pooling, flatten).

    Returns:
      Layer name -> the kernel factor c_ℓ.

    Raises:
      ValueError: normalisation layers in the model (not re-scaled; A.4: ResNets are not), a
        missing layer in `norms`, or an all-zero layer.
    """
    normalizing = [l.name for l in model.layers if isinstance(l, _NORMALIZATION)]
    if normalizing:
        raise ValueError(f'Cannot re-scale a model with normalisation layers {normalizing[:3]}...; '
                         'appendix A.4 does not re-scale ResNets: use rescale=None.')
    cumulative, factors = 1.0, {}
    for layer in kernel_layers(model):
        if layer.name not in norms:
            raise ValueError(f'No target norm for layer {layer.name!r}; have {sorted(norms)}.')
        weights = layer.get_weights()
        kernel, rest = weights[0], weights[1:]
        carried = cumulative if preserve_predictions else 1.0
        current = _norm([kernel] + [carried * r for r in rest], norm)
        if current == 0:
            raise ValueError(f'Layer {layer.name!r} has all-zero weights; it cannot be re-scaled.')
        c = float(norms[layer.name]) / current
        layer.set_weights([kernel * c] + [r * c * carried for r in rest])
        cumulative *= c
        factors[layer.name] = c
    return factors


def _layers_up_to(model: keras.Model, num_layers: Optional[int]) -> list:
    """Weighted layers before the (k+1)-th kernel layer; the head (last kernel layer) is never included."""
    kernels = kernel_layers(model)
    limit = len(kernels) - 1 if num_layers is None else int(num_layers)
    if not 0 <= limit <= len(kernels) - 1:
        raise ValueError(f'num_layers must be in [0, {len(kernels) - 1}] (kernel layers without the head '
                         f'{kernels[-1].name!r}), got {num_layers}.')
    stop = kernels[limit].name
    out = []
    for layer in model.layers:
        if layer.name == stop:
            break
        if layer.weights:
            out.append(layer)
    return out


def transfer_layers(target: keras.Model, source: keras.Model, num_layers: Optional[int]) -> list:
    """Copies the first `num_layers` kernel layers (and weighted layers between them) from `source`.

    The head and every later layer of `target` keep their fresh initialisation (A.4: "replace
    the classifier head with a freshly initialized one"). Layers are matched by name.

    Args:
      target: freshly initialised downstream model (modified in place).
      source: pre-trained model of the same architecture (its head may have another width).
      num_layers: k; None: every layer but the head.

    Returns:
      Names of the copied layers.
    """
    copied = []
    for layer in _layers_up_to(source, num_layers):
        target.get_layer(layer.name).set_weights(layer.get_weights())
        copied.append(layer.name)
    return copied


def second_moment(kernel: np.ndarray) -> np.ndarray:
    """E[w wᵀ] over the filters of a kernel: Σ_w of Proposition 1, where E[w] = 0."""
    return covariance.filter_covariance(kernel, center=False)


def covariance_init(target: keras.Model, source: keras.Model, layers: Sequence[str], seed: int = 0) -> None:
    """Sets each named layer of `target` to filters drawn from N(0, E[w wᵀ]) of `source`'s filters, bias 0.

    Fig. 5 "covariance": "the filters in the convolutional layer are random samples from a
    Gaussian distribution with mean 0 and the covariance obtained from training on random
    labels. The bias is set to zero".
    """
    for k, name in enumerate(layers):
        kernel = source.get_layer(name).get_weights()[0]
        layer = target.get_layer(name)
        sampled = covariance.sample_filters(second_moment(kernel), layer.kernel.shape, seed=[seed, k])
        layer.set_weights([sampled] + [np.zeros_like(w) for w in layer.get_weights()[1:]])


def _conv_geometry(layer) -> tuple:
    kh, kw = layer.kernel_size
    if kh != kw or layer.strides[0] != layer.strides[1]:
        raise ValueError(f'Layer {layer.name!r}: only square kernels and strides are supported.')
    return kh, layer.strides[0], layer.padding


def data_covariance_init(model: keras.Model, images: np.ndarray, num_layers: int,
                         taus: Optional[Sequence[float]] = None, mode: str = 'eigenvectors',
                         seed: int = 0, batch_size: int = 512) -> list:
    """The layer-by-layer data-covariance initialisation of sec. 2.5 (in place).

    For conv layers L_1..L_k in order: run `images` through the (already initialised) layers
    below, take the covariance Σ of the k×k×C input patches of L_i, and set L_i's filters to
    τ_j e_j for the top eigenvectors e_j of Σ (`covariance.eigen_filters`), biases 0.

    Args:
      model: a model with >= `num_layers` conv layers.
      images: [n, H, W, C] training images (labels are not used).
      num_layers: conv layers to initialise (0 leaves the model unchanged).
      taus: τ_j (default 1 for every filter: f_2, Table 2).
      mode: 'eigenvectors' (Tables 1-3) or 'sample' (Table 4).
      seed: signs / samples seed.

    Returns:
      Names of the initialised layers.
    """
    convs = conv_layers(model)
    if not 0 <= num_layers <= len(convs):
        raise ValueError(f'num_layers must be in [0, {len(convs)}] (conv layers of {model.name}), got {num_layers}.')
    done = []
    for i, layer in enumerate(convs[:num_layers]):
        feed = keras.Model(model.inputs[0], layer.input)
        inputs = np.concatenate([np.asarray(feed(images[s:s + batch_size], training=False))
                                 for s in range(0, len(images), batch_size)])
        size, stride, padding = _conv_geometry(layer)
        sigma = covariance.patch_covariance(inputs, size, stride, padding)
        kernel = covariance.eigen_filters(sigma, layer.kernel.shape, taus, mode, seed=[seed, i])
        layer.set_weights([kernel] + [np.zeros_like(w) for w in layer.get_weights()[1:]])
        done.append(layer.name)
    return done


def restore_checkpoint(model: keras.Model, run_dir: str) -> str:
    """Loads the model weights of the latest checkpoint in `<run_dir>/checkpoints` (optimizer ignored).

    Raises:
      FileNotFoundError: no checkpoint there (run the upstream first).
    """
    latest = tf.train.latest_checkpoint(f'{run_dir}/checkpoints')
    if latest is None:
        raise FileNotFoundError(f'No checkpoint in {run_dir}/checkpoints: run the upstream (pre-training) first.')
    tf.train.Checkpoint(model=model).restore(latest).expect_partial()
    return latest


def prepare_downstream(arm: str, fresh: keras.Model, upstream: Optional[keras.Model] = None,
                       upstream_init: Optional[keras.Model] = None, num_layers: Optional[int] = None,
                       norm: Optional[str] = 'l2', seed: int = 0) -> dict:
    """Turns `fresh` into the starting point of one transfer arm (in place).

    Arms (Fig. 5 and appendix A.4; every arm keeps `fresh`'s head):
      scratch: `fresh` unchanged.
      pretrained_conv: the conv layers of `upstream`, re-scaled to `upstream_init`'s norms.
      pretrained_conv_dense: every layer but the head, re-scaled.
      no_rescale: every layer but the head, not re-scaled (the gray curve of Fig. 5).
      covariance_init: conv filters sampled from N(0, Σ_w) of the re-scaled upstream filters,
        biases 0, everything else fresh.
    `num_layers` (k) overrides the arm's default number of transferred kernel layers (Fig. 6);
    `norm` is 'l2', 'l1', or None (no re-scaling, e.g. ResNets).

    Args:
      upstream: the pre-trained model (modified: re-scaled).
      upstream_init: the upstream model at initialisation (its norms are the targets).

    Returns:
      `{'arm', 'transferred': [names], 'rescale_factors': {name: c}}`.
    """
    if arm not in ARMS:
        raise ValueError(f'Unknown transfer arm {arm!r}; valid: {list(ARMS)}.')
    info = {'arm': arm, 'transferred': [], 'rescale_factors': {}}
    if arm == 'scratch':
        return info
    if upstream is None:
        raise ValueError(f'Arm {arm!r} needs the pre-trained upstream model.')
    if norm is not None and arm != 'no_rescale':
        if upstream_init is None:
            raise ValueError(f'Arm {arm!r} re-scales to the initial norms: pass upstream_init (or norm=None).')
        info['rescale_factors'] = rescale_to_norms(upstream, layer_norms(upstream_init, norm), norm)
    num_convs = len(conv_layers(upstream))
    if arm == 'covariance_init':
        names = [l.name for l in conv_layers(upstream)[:num_convs if num_layers is None else num_layers]]
        covariance_init(fresh, upstream, names, seed=seed)
        info['transferred'] = names
        return info
    k = num_layers if num_layers is not None else (num_convs if arm == 'pretrained_conv' else None)
    info['transferred'] = transfer_layers(fresh, upstream, k)
    return info


def training_auc(steps: Sequence[float], accuracies: Sequence[float], num_steps: Optional[float] = None) -> float:
    """Area under the training-accuracy curve, normalised to [0, 1] (appendix B).

    Trapezoidal area over training progress steps / num_steps ∈ [0, 1]; the curve is extended
    flat to `num_steps` if it stops earlier (e.g. at a stopping accuracy). 1.0 means 100% from
    the first step.

    Args:
      steps: evaluation steps, increasing, starting at 0 for the accuracy at initialisation.
      accuracies: full-training-set accuracy at those steps.
      num_steps: the step budget (default: the last step).
    """
    x = np.asarray(steps, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(f'training_auc needs >= 2 matching steps and accuracies, got {x.shape} and {y.shape}.')
    if np.any(np.diff(x) <= 0):
        raise ValueError('training_auc needs strictly increasing steps.')
    end = x[-1] if num_steps is None else float(num_steps)
    if end < x[-1]:
        raise ValueError(f'num_steps {end} is before the last step {x[-1]}.')
    if end > x[-1]:
        x, y = np.append(x, end), np.append(y, y[-1])
    span = end - x[0]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2) / span)
