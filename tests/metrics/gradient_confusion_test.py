"""Tests for extreme_mem/metrics/gradient_confusion.py with hand-computed literals."""

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.metrics import gradient_confusion
from tests import testing

# <g0,g1> = 2, <g0,g2> = 0, <g0,g3> = -1, <g1,g2> = 0, <g1,g3> = -2, <g2,g3> = 0 -> min -2.
G = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])
LABELS = np.array([0, 0, 1, 1])


class GradientConfusionTest(tf.test.TestCase):

    def test_literals(self):
        self.assertAllClose(gradient_confusion.confusion(G @ G.T), -2.0)
        self.assertAllClose(gradient_confusion.confusion(np.array([[5.0, 1.0], [1.0, 7.0]])), 1.0)  # diagonal ignored
        self.assertIsNone(gradient_confusion.confusion(np.ones((1, 1))))

    def test_plugin(self):
        bias = np.array([[1.0], [0.0], [0.0], [1.0]])
        grad_stats = testing.grad_stats_from({'a/kernel': G, 'a/bias': bias}, LABELS, 2)
        plugin = gradient_confusion.GradientConfusion(include_logits_grad=False)
        plugin.update(testing.step_outputs(LABELS, 2, grad_stats=grad_stats))
        # Bias folded in: <g0,g3> becomes -1 + 1 = 0, so the minimum is <g1,g3> = -2.
        self.assertAllClose(plugin.result(), {'train/grad_confusion/a': -2.0})
        self.assertTrue(gradient_confusion.GradientConfusion.wants_gram)
        self.assertIs(registry.METRICS.get('gradient_confusion'), gradient_confusion.GradientConfusion)


if __name__ == '__main__':
    tf.test.main()
