"""Tests for extreme_mem/losses.py against numpy formulas."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses, registry

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(7, 4)).astype(np.float32) * 3
LABELS = np.array([0, 1, 2, 3, 0, 1, 2], np.int32)


def np_softmax_ce(labels, logits, t):
    z = logits / t
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(labels)), labels]


class LossesTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(1.0, 0.1, 10.0)
    def test_cross_entropy_with_temperature(self, t):
        self.assertAllClose(losses.cross_entropy(LABELS, LOGITS, temperature=t), np_softmax_ce(LABELS, LOGITS, t),
                            rtol=1e-5, atol=1e-5)

    @parameterized.parameters(1.0, 0.5, 4.0)
    def test_hinge(self, margin):
        expected = np.zeros(len(LABELS))
        for n, y in enumerate(LABELS):
            expected[n] = sum(max(0.0, margin + LOGITS[n, i] - LOGITS[n, y]) for i in range(4) if i != y)
        self.assertAllClose(losses.hinge(LABELS, LOGITS, margin=margin), expected, rtol=1e-5, atol=1e-5)

    @parameterized.parameters(1.0, 10.0)
    def test_squared(self, scale):
        onehot = np.eye(4)[LABELS]
        expected = ((LOGITS - scale * onehot) ** 2).mean(-1)
        self.assertAllClose(losses.squared(LABELS, LOGITS, target_scale=scale), expected, rtol=1e-5)

    def test_mse(self):
        targets = RNG.normal(size=(3, 2, 2)).astype(np.float32)
        outputs = RNG.normal(size=(3, 2, 2)).astype(np.float32)
        self.assertAllClose(losses.mse(targets, outputs), ((outputs - targets) ** 2).reshape(3, -1).mean(-1))

    def test_per_example_shape_and_registered(self):
        for name in ('cross_entropy', 'hinge', 'squared'):
            self.assertEqual(registry.LOSSES.get(name)(LABELS, LOGITS).shape, (7,))


if __name__ == '__main__':
    tf.test.main()
