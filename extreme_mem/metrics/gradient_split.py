"""Label-dependent / label-independent split of the cross-entropy gradient, per layer and subset.

Stephenson et al. (ICLR 2021), section 4 "Gradient descent dynamics initially ignores permuted
examples", Fig. 5 and appendix A.2 (eqs. 14-16). With g_c(x) = dN_c(x)/dθ (N the logits) and
ḡ = <(1/P) Σ_c g_c(x)>_D, the mean cross-entropy gradient over a set D splits as

    ∇L = ∇L_dep + ∇L_ind,
    ∇L_dep = -<Σ_c P_L(c|x) (g_c(x) - ḡ)>_D,     ∇L_ind = +<Σ_c P_M(c|x) (g_c(x) - ḡ)>_D,

P_L the (one-hot) training label and P_M the softmax output; ∇L_dep vanishes for uniform labels,
∇L_ind for a uniform output. For the last layer (J = δ) these are eq. 16.

`label_split_gradients` computes both parts exactly with three backward passes over a set of
examples. The `gradient_split` plugin runs it at every evaluation on a fixed sample of the
training set (at most `max_examples`, drawn once), split into its unpermuted and permuted
examples, and logs per-layer ℓ2 norms (all of a layer's variables together):

    train/grad_norm/<subset>/<layer>        ‖∇L‖        (Fig. 5A-C)
    train/grad_norm_dep/<subset>/<layer>    ‖∇L_dep‖    (Fig. 5D-G, A.1)
    train/grad_norm_ind/<subset>/<layer>    ‖∇L_ind‖

with <subset> ∈ {all, unpermuted, permuted}; each subset's gradient is the mean over its own
examples, and `all` is the mean over the whole sample. The model runs in inference mode
(`training=False`: batch-norm statistics, no dropout), so the values are a deterministic
function of the weights.
"""

from typing import Optional, Sequence

import gin
import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.data import transforms
from extreme_mem.metrics import base

SUBSETS = ('all', 'unpermuted', 'permuted')
PARTS = ('grad_norm', 'grad_norm_dep', 'grad_norm_ind')


def label_split_gradients(model, images: np.ndarray, labels: np.ndarray, num_classes: int,
                          batch_size: int = 512) -> tuple:
    """Mean label-dependent and label-independent CE gradients (eqs. 14-15) over the examples.

    Args:
      model: a Keras model returning logits [n, num_classes].
      images: [n, ...] inputs (n >= 1).
      labels: [n] int training labels (P_L is their one-hot).
      num_classes: P.
      batch_size: examples per backward pass (sums are accumulated, so the result does not depend
        on it); use an even number.

    Returns:
      (dep, ind): lists of numpy arrays aligned with `model.trainable_variables`; dep + ind is the
      gradient of the mean cross-entropy.
    """
    n = len(images)
    if n == 0:
        raise ValueError('label_split_gradients needs at least one example.')
    variables = model.trainable_variables
    sums = [[np.zeros(v.shape, np.float64) for v in variables] for _ in range(3)]
    labels = np.asarray(labels, np.int32)
    for a in range(0, n, batch_size):
        # Every pass sees exactly `batch_size` examples (the last chunk is padded with zero-weight
        # copies): one shape, and no odd batch sizes, on which TF 2.21's oneDNN Conv2D filter
        # gradient crashes on this CPU.
        pos = np.arange(a, a + batch_size) % n
        weight = (np.arange(a, a + batch_size) < n).astype(np.float32)
        grads = _split_sums(model, tf.convert_to_tensor(images[pos]), tf.convert_to_tensor(labels[pos]),
                            tf.convert_to_tensor(weight), num_classes)
        for acc, grad in zip(sums, grads):
            for k, g in enumerate(grad):
                if g is not None:
                    acc[k] += np.asarray(tf.convert_to_tensor(g), np.float64)
    g_label, g_model, g_bar = sums
    dep = [(gl + gb) / n for gl, gb in zip(g_label, g_bar)]
    ind = [(gm - gb) / n for gm, gb in zip(g_model, g_bar)]
    return dep, ind


def _split_sums(model, x, y, weight, num_classes: int):
    """Weighted sums over the batch of the gradients of -Σ_c P_L·N_c, Σ_c stop(P_M)·N_c and Σ_c N_c / P."""
    with tf.GradientTape(persistent=True) as tape:
        logits = tf.cast(model(x, training=False), tf.float32)
        w = weight[:, None]
        p_label = tf.one_hot(y, num_classes)
        p_model = tf.stop_gradient(tf.nn.softmax(logits))
        by_label = -tf.reduce_sum(w * p_label * logits)
        by_model = tf.reduce_sum(w * p_model * logits)
        mean_logit = tf.reduce_sum(w * logits) / num_classes
    variables = model.trainable_variables
    out = [tape.gradient(t, variables) for t in (by_label, by_model, mean_logit)]
    del tape
    return out


def layer_norms(model, grads: Sequence[np.ndarray]) -> dict:
    """`{layer name: ℓ2 norm of all its variables' gradients}` (layer = first path component)."""
    sq: dict = {}
    for v, g in zip(model.trainable_variables, grads):
        layer = v.path.split('/')[0]
        sq[layer] = sq.get(layer, 0.0) + float(np.sum(np.square(g)))
    return {k: float(np.sqrt(s)) for k, s in sq.items()}


@registry.METRICS.register('gradient_split')
@gin.configurable(module='metrics')
class GradientSplit(base.MetricPlugin):
    """Per-layer norms of ∇L, ∇L_dep, ∇L_ind on all / unpermuted / permuted training examples."""

    needs = frozenset()  # evaluation only

    def __init__(self, max_examples: int = 2048, batch_size: int = 512, at_steps: Optional[Sequence[int]] = None,
                 seed: int = 0):
        super().__init__(every_n_steps=None)
        if max_examples < 1:
            raise ValueError(f'max_examples must be >= 1, got {max_examples}.')
        self._max_examples, self._batch_size, self._seed = int(max_examples), int(batch_size), seed
        self._at_steps = None if at_steps is None else set(at_steps)

    def _sample(self, split) -> np.ndarray:
        n = split.num_examples
        if n <= self._max_examples:
            return np.arange(n)
        return np.sort(np.random.default_rng(self._seed).choice(n, self._max_examples, replace=False))

    def evaluate(self, context: base.EvalContext) -> dict:
        if self._at_steps is not None and context.step not in self._at_steps:
            return {}
        split, model = context.data.train, context.model
        num_classes = int(context.data.info.num_classes)
        positions = self._sample(split)
        permuted = transforms.relabeled_mask(split)[positions]
        parts, counts = {}, {}
        for subset, mask in (('unpermuted', ~permuted), ('permuted', permuted)):
            if mask.any():
                pos = positions[mask]
                parts[subset] = label_split_gradients(model, split.images[pos], np.asarray(split.labels)[pos],
                                                      num_classes, self._batch_size)
                counts[subset] = int(mask.sum())
        total = sum(counts.values())
        parts['all'] = tuple(
            [sum(counts[s] * parts[s][i][k] for s in counts) / total for k in range(len(model.trainable_variables))]
            for i in (0, 1))
        results = {}
        for subset, (dep, ind) in parts.items():
            full = [d + i for d, i in zip(dep, ind)]
            for name, grads in zip(PARTS, (full, dep, ind)):
                for layer, value in layer_norms(model, grads).items():
                    results[f'train/{name}/{subset}/{layer}'] = value
        return results
