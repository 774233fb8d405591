"""Tests for extreme_mem/metrics/gradient_split.py against hand-derived numpy gradients.

The oracle is a 2-layer ReLU network N(x) = W2ᵀ relu(W1ᵀ x) (no biases) written out in numpy:
dN_c/dW2[β, α] = δ_cα a_β and dN_c/dW1[γ, β] = x_γ W2[β, c] 1[h_β > 0]; the two parts of eq. 15
are then formed literally, example by example and class by class.
"""

import keras
import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.data import base as data_base
from extreme_mem.metrics import base
from extreme_mem.metrics import gradient_split
from extreme_mem.models import resnet


def _model(d_in=5, width=4, classes=3, seed=0):
    inputs = keras.Input(shape=(d_in,))
    h = keras.layers.Dense(width, use_bias=False, name='hidden',
                           kernel_initializer=keras.initializers.RandomNormal(seed=seed))(inputs)
    a = keras.layers.ReLU(name='hidden_rep')(h)
    logits = keras.layers.Dense(classes, use_bias=False, name='logits',
                                kernel_initializer=keras.initializers.RandomNormal(seed=seed + 1))(a)
    return keras.Model(inputs, logits)


def _oracle(w1, w2, x, y, classes):
    """Literal eq. 15: per-example, per-class gradients g_c(x) of both weight matrices."""
    n = len(x)
    h = x @ w1
    a = np.maximum(h, 0.0)
    logits = a @ w2
    p_model = np.exp(logits - logits.max(1, keepdims=True))
    p_model /= p_model.sum(1, keepdims=True)
    g1 = np.zeros((n, classes) + w1.shape)
    g2 = np.zeros((n, classes) + w2.shape)
    for i in range(n):
        for c in range(classes):
            g2[i, c][:, c] = a[i]
            g1[i, c] = np.outer(x[i], w2[:, c] * (h[i] > 0))
    out = []
    for g in (g1, g2):
        g_bar = g.mean(axis=(0, 1))  # average over examples and classes
        p_label = np.eye(classes)[y]
        dep = -np.mean([sum(p_label[i, c] * (g[i, c] - g_bar) for c in range(classes)) for i in range(n)], axis=0)
        ind = np.mean([sum(p_model[i, c] * (g[i, c] - g_bar) for c in range(classes)) for i in range(n)], axis=0)
        out.append((dep, ind))
    return out


class GradientSplitTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(7, 5)).astype(np.float32)
        self.y = np.array([0, 1, 2, 0, 1, 1, 2])
        self.model = _model()

    def test_matches_the_literal_eq15(self):
        dep, ind = gradient_split.label_split_gradients(self.model, self.x, self.y, 3, batch_size=3)
        w1, w2 = (v.numpy().astype(np.float64) for v in self.model.trainable_variables)
        (dep1, ind1), (dep2, ind2) = _oracle(w1, w2, self.x.astype(np.float64), self.y, 3)
        self.assertAllClose(dep[0], dep1, atol=1e-5)
        self.assertAllClose(ind[0], ind1, atol=1e-5)
        self.assertAllClose(dep[1], dep2, atol=1e-5)
        self.assertAllClose(ind[1], ind2, atol=1e-5)

    def test_parts_sum_to_the_cross_entropy_gradient(self):
        dep, ind = gradient_split.label_split_gradients(self.model, self.x, self.y, 3)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                self.y, self.model(self.x), from_logits=True))
        for d, i, g in zip(dep, ind, tape.gradient(loss, self.model.trainable_variables)):
            self.assertAllClose(d + i, g.numpy(), atol=1e-5)

    def test_padded_chunks_of_a_batch_norm_convnet(self):
        # 16 examples in chunks of 6 (the last padded with zero-weight copies) against one CE gradient.
        model = resnet.resnet18((8, 8, 3), 4, width_multiplier=0.0625, seed=0)
        x = np.random.default_rng(1).normal(size=(16, 8, 8, 3)).astype(np.float32)
        y = np.arange(16) % 4
        dep, ind = gradient_split.label_split_gradients(model, x, y, 4, batch_size=6)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                y, model(x, training=False), from_logits=True))
        for d, i, g in zip(dep, ind, tape.gradient(loss, model.trainable_variables)):
            self.assertAllClose(d + i, g.numpy(), atol=1e-5)

    def test_uniform_labels_and_uniform_outputs_cancel(self):
        # Eq. 15: dep = 0 when P_L is uniform (every class equally often per example: use P copies),
        # ind = 0 when the output is uniform (zero last layer).
        x = np.repeat(self.x[:2], 3, axis=0)
        y = np.tile(np.arange(3), 2)
        dep, _ = gradient_split.label_split_gradients(self.model, x, y, 3)
        for d in dep:
            self.assertAllClose(d, np.zeros_like(d), atol=1e-6)
        self.model.get_layer('logits').kernel.assign(np.zeros((4, 3), np.float32))
        _, ind = gradient_split.label_split_gradients(self.model, self.x, self.y, 3)
        for i in ind:
            self.assertAllClose(i, np.zeros_like(i), atol=1e-7)

    def test_plugin_norms_per_subset(self):
        labels = self.y.copy()
        labels[[1, 4]] = [2, 0]
        train = data_base.RelabeledSplit(self.x, labels.astype(np.int32), self.y.astype(np.int32),
                                         np.arange(7), np.array([0, 1, 0, 0, 1, 0, 0], bool))
        data = data_base.Data(train, train, data_base.DatasetInfo('fake', 3, (5,)))
        plugin = gradient_split.GradientSplit()
        out = plugin.evaluate(base.EvalContext(step=0, model=self.model, data=data, evals={}))
        self.assertLen(out, 3 * 3 * 2)
        w1, w2 = (v.numpy().astype(np.float64) for v in self.model.trainable_variables)
        perm = np.array([1, 4])
        (dep1, ind1), _ = _oracle(w1, w2, self.x[perm].astype(np.float64), labels[perm], 3)
        self.assertAllClose(out['train/grad_norm_dep/permuted/hidden'], np.linalg.norm(dep1), rtol=1e-4)
        self.assertAllClose(out['train/grad_norm/permuted/hidden'], np.linalg.norm(dep1 + ind1), rtol=1e-4)
        (dep_all, ind_all), _ = _oracle(w1, w2, self.x.astype(np.float64), labels, 3)
        self.assertAllClose(out['train/grad_norm_ind/all/hidden'], np.linalg.norm(ind_all), rtol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, 'max_examples must be >= 1, got 0'):
            gradient_split.GradientSplit(max_examples=0)
        with self.assertRaisesRegex(ValueError, 'at least one example'):
            gradient_split.label_split_gradients(self.model, self.x[:0], self.y[:0], 3)

    def test_is_registered(self):
        self.assertIs(registry.METRICS.get('gradient_split'), gradient_split.GradientSplit)


if __name__ == '__main__':
    tf.test.main()
