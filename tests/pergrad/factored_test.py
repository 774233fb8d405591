"""Tests for extreme_mem/pergrad/factored.py against explicitly materialised per-example gradients."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.pergrad import factored
from extreme_mem.pergrad import stats

LABELS = np.array([0, 1, 1, 2, 0, 2, 2])
SPEC = stats.ClassSpec.make(3)


def _assert_stats_close(test, got, want, check_gram):
    scale = float(np.sum(want.sq_norms))
    for field in ('sq_norms', 'class_sum_sq_norms', 'class_counts', 'total_sum_sq_norm'):
        test.assertAllClose(getattr(got, field), getattr(want, field), rtol=1e-4, atol=1e-6 * scale, msg=field)
    if check_gram:
        test.assertAllClose(got.gram, want.gram, rtol=1e-4, atol=1e-6 * scale)


class FactoredTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(
        (3, 2, False),  # n(K+O) > K·O: per-class A_cᵀΔ_c
        (40, 30, False),  # Gram route
        (3, 2, True),
    )
    def test_dense_kernel_stats(self, k, o, compute_gram):
        rng = np.random.RandomState(0)
        a = rng.normal(size=(len(LABELS), k)).astype(np.float32)
        d = rng.normal(size=(len(LABELS), o)).astype(np.float32)
        per_example = np.einsum('nk,no->nko', a, d)
        want = stats.from_vectors(per_example, LABELS, 3, compute_gram=True)
        got = factored.dense_kernel_stats(a, d, LABELS, SPEC, compute_gram)
        _assert_stats_close(self, got, want, compute_gram)

    @parameterized.product(padding=('valid', 'same'), strides=(1, 2), dilation=(1, 2))
    def test_patches_reproduce_conv2d(self, padding, strides, dilation):
        if strides > 1 and dilation > 1:
            self.skipTest('TensorFlow conv2d does not combine strides and dilation.')
        rng = np.random.RandomState(1)
        x = rng.normal(size=(2, 9, 8, 3)).astype(np.float32)
        kernel = rng.normal(size=(3, 2, 3, 4)).astype(np.float32)
        want = tf.nn.conv2d(x, kernel, strides, padding.upper(), dilations=dilation)
        p = factored.conv2d_patches(x, (3, 2), (strides, strides), (dilation, dilation), padding)
        got = tf.reshape(tf.matmul(p, kernel.reshape(-1, 4)), want.shape)
        self.assertAllClose(got, want, atol=1e-5)

    @parameterized.product(
        shape=((6, 6, 2, 3), (3, 3, 8, 16)),  # (H, W, C_in, C_out): G route; patch-Gram route
        padding=('valid', 'same'),
        strides=(1, 2),
        compute_gram=(False, True),
    )
    def test_conv2d_kernel_stats(self, shape, padding, strides, compute_gram):
        h, w, cin, cout = shape
        rng = np.random.RandomState(2)
        n = len(LABELS)
        x = rng.normal(size=(n, h, w, cin)).astype(np.float32)
        out_shape = tf.nn.conv2d(x, np.zeros((2, 2, cin, cout), np.float32), strides, padding.upper()).shape
        d = rng.normal(size=out_shape).astype(np.float32)
        per_example = np.stack(
            [
                tf.compat.v1.nn.conv2d_backprop_filter(
                    x[i : i + 1], [2, 2, cin, cout], d[i : i + 1], [1, strides, strides, 1], padding.upper()
                )
                for i in range(n)
            ]
        )
        want = stats.from_vectors(per_example, LABELS, 3, compute_gram=True)
        got = factored.conv2d_kernel_stats(
            x, d, (2, 2), (strides, strides), (1, 1), padding, LABELS, SPEC, compute_gram, chunk_size=3
        )
        _assert_stats_close(self, got, want, compute_gram)

    def test_bias_stats_sum_positions(self):
        d = np.arange(len(LABELS) * 2 * 2 * 3, dtype=np.float32).reshape(len(LABELS), 2, 2, 3)
        want = stats.from_vectors(d.sum(axis=(1, 2)), LABELS, 3, compute_gram=True)
        got = factored.bias_stats(d, LABELS, SPEC, compute_gram=True)
        _assert_stats_close(self, got, want, True)


if __name__ == '__main__':
    tf.test.main()
