"""Post-training analyses of Zhang et al. (ICLR 2020), "Identity Crisis": pure functions on a model.

- Layer-wise information loss (section 3.2, Fig. 5): each example of a labelled test set is
  classified by the inner-product-weighted average of the one-hot labels of a labelled training
  set, computed on one layer's representations (`similarity_classifier_error`); the error per
  layer shows where the input's information washes out (`layerwise_errors`).
- Input-size robustness (section 3.3, Figs. 6-7): a fully convolutional net applied to the
  evaluation images resized to other sizes (`resize_images`, `size_correlations`).
- Intermediate-layer pictures (appendix F): the top singular vector of a layer's
  [channels, H·W] activation matrix (`top_singular_image`) and the channel most correlated with
  the input (`max_correlated_channel`).
- `image_grid`: rows of images tiled into one array for a PNG or a TensorBoard image.

Activations come from `chain_activations`, which runs a chain model (each layer feeds the next, as
in `models/identity_nets.py`) one layer at a time, so only one layer's activations are held.
"""

from typing import Iterator, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from extreme_mem.metrics import identity_correlation
from extreme_mem.models import base as models_base


def chain_activations(model, images: np.ndarray) -> Iterator[Tuple[str, np.ndarray]]:
    """Yields `('input', x)`, then `(probe, activation)` per probe layer, then `('output', f(x))`.

    Args:
      model: a Keras model whose layers form a chain (each layer's input is the previous output).
      images: [n, H, W, C].
    """
    h = tf.convert_to_tensor(np.asarray(images, np.float32))
    yield 'input', h.numpy()
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        h = layer(h, training=False)
        if layer.name.endswith(models_base.PROBE_SUFFIX):
            yield models_base.probe_name(layer.name), h.numpy()
    yield 'output', h.numpy()


def similarity_classifier_error(train_reps: np.ndarray, train_labels: np.ndarray, test_reps: np.ndarray,
                                test_labels: np.ndarray, num_classes: int) -> float:
    """Error of the similarity-weighted classifier of section 3.2.

    Test example i gets class argmax_c Σ_j <r_i, r_j> onehot(y_j)_c over the training examples j.

    Args:
      train_reps: [n_train, ...] representations; train_labels: [n_train] ints.
      test_reps: [n_test, ...]; test_labels: [n_test] ints.
      num_classes: number of classes.

    Returns:
      Fraction of test examples misclassified.
    """
    a = np.asarray(train_reps, np.float64).reshape(len(train_reps), -1)
    b = np.asarray(test_reps, np.float64).reshape(len(test_reps), -1)
    onehot = np.eye(num_classes)[np.asarray(train_labels, int)]
    scores = (b @ a.T) @ onehot
    return float(np.mean(np.argmax(scores, axis=1) != np.asarray(test_labels, int)))


def layerwise_errors(model, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                     num_classes: int) -> dict:
    """`{layer: similarity-classifier error}` for the input, every probe layer and the output (Fig. 5)."""
    n = len(train_x)
    out = {}
    for name, reps in chain_activations(model, np.concatenate([train_x, test_x])):
        out[name] = similarity_classifier_error(reps[:n], train_y, reps[n:], test_y, num_classes)
    return out


def resize_images(images: np.ndarray, size: int) -> np.ndarray:
    """[n, H, W, C] -> [n, size, size, C], bilinear (area averaging when shrinking)."""
    images = np.asarray(images, np.float32)
    method = 'area' if size < images.shape[1] else 'bilinear'
    return tf.image.resize(images, (size, size), method=method).numpy()


def size_correlations(predict, images: np.ndarray, sizes: Sequence[int]) -> dict:
    """`{size: mean Pearson correlation of f(x_s) with x_s}` over `images` resized to each size."""
    out = {}
    for size in sizes:
        x = resize_images(images, int(size))
        out[int(size)] = float(np.mean(identity_correlation.pearson(predict(x), x)))
    return out


def top_singular_image(activation: np.ndarray) -> np.ndarray:
    """[H, W, C] -> [H, W]: the top right singular vector of the [C, H·W] matrix (appendix F).

    The sign is chosen so that the image correlates positively with the channel mean.
    """
    h, w, c = activation.shape
    matrix = np.asarray(activation, np.float64).reshape(h * w, c).T
    _, _, vt = np.linalg.svd(matrix, full_matrices=False)
    v = vt[0]
    if v @ matrix.mean(axis=0) < 0:
        v = -v
    return v.reshape(h, w)


def max_correlated_channel(activation: np.ndarray, image: np.ndarray) -> np.ndarray:
    """[H, W, C] -> [H, W]: the channel with the largest Pearson correlation to `image` (mean over its channels)."""
    ref = np.asarray(image, np.float64).mean(axis=-1)
    channels = np.moveaxis(np.asarray(activation, np.float64), -1, 0)
    corr = identity_correlation.pearson(channels, ref)
    return channels[int(np.argmax(corr))]


def image_grid(rows: Sequence[Sequence[np.ndarray]], pad: int = 2) -> np.ndarray:
    """Tiles rows of [H, W] or [H, W, 1] images (any sizes) into one [rows·(Hmax+pad), cols·(Wmax+pad)] array.

    Each image is rescaled to [0, 1] on its own (min-max), as the paper's figures show them;
    padding and empty cells are 1 (white).
    """
    rows = [[np.asarray(im, np.float64).reshape(np.asarray(im).shape[:2]) for im in row] for row in rows]
    hmax = max(im.shape[0] for row in rows for im in row)
    wmax = max(im.shape[1] for row in rows for im in row)
    cols = max(len(row) for row in rows)
    grid = np.ones((len(rows) * (hmax + pad), cols * (wmax + pad)))
    for i, row in enumerate(rows):
        for j, im in enumerate(row):
            span = im.max() - im.min()
            scaled = (im - im.min()) / span if span > 0 else np.full_like(im, 0.5)
            y, x = i * (hmax + pad), j * (wmax + pad)
            grid[y:y + im.shape[0], x:x + im.shape[1]] = scaled
    return grid
