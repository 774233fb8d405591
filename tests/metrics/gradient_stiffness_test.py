"""Tests for extreme_mem/metrics/gradient_stiffness.py with hand-computed literals."""

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.metrics import gradient_stiffness
from tests import testing

# g0 = (1, 0), g1 = (2, 0), g2 = (0, 3), g3 = (-1, 0); classes 0, 0, 1, 1.
G = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])
LABELS = np.array([0, 0, 1, 1])
# Cosines: c01 = 1, c02 = 0, c03 = -1, c12 = 0, c13 = -1, c23 = 0 -> mean over pairs = -1/6.


class GradientStiffnessTest(tf.test.TestCase):

    def test_literals(self):
        gram = G @ G.T
        self.assertAllClose(gradient_stiffness.stiffness(gram), -1 / 6)
        # Class 0: cos(g0, g1) = 1; class 1: cos(g2, g3) = 0 -> mean 0.5.
        self.assertAllClose(gradient_stiffness.class_stiffness(gram, LABELS), 0.5)
        self.assertIsNone(gradient_stiffness.stiffness(np.ones((1, 1))))
        self.assertIsNone(gradient_stiffness.class_stiffness(gram, [0, 1, 2, 3]))

    def test_zero_gradient_counts_as_cosine_zero(self):
        gram = np.array([[1.0, 0.0], [0.0, 0.0]])
        self.assertAllClose(gradient_stiffness.stiffness(gram), 0.0)

    def test_plugin(self):
        grad_stats = testing.grad_stats_from({'a/kernel': G}, LABELS, 2)
        plugin = gradient_stiffness.GradientStiffness(include_logits_grad=False)
        plugin.update(testing.step_outputs(LABELS, 2, grad_stats=grad_stats))
        self.assertAllClose(
            plugin.result(), {'train/grad_stiffness/a': -1 / 6, 'train/grad_stiffness_in_class/a': 0.5}
        )
        self.assertTrue(gradient_stiffness.GradientStiffness.wants_gram)
        self.assertIs(registry.METRICS.get('gradient_stiffness'), gradient_stiffness.GradientStiffness)
        no_gram = testing.grad_stats_from({'a/kernel': G}, LABELS, 2, compute_gram=False)
        with self.assertRaisesRegex(ValueError, 'declare .Need.GRAM. in the plugin needs'):
            plugin.update(testing.step_outputs(LABELS, 2, grad_stats=no_gram))


if __name__ == '__main__':
    tf.test.main()
