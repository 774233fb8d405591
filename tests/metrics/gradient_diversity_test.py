"""Tests for extreme_mem/metrics/gradient_diversity.py with hand-computed literals."""

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.metrics import gradient_diversity
from tests import testing


class GradientDiversityTest(tf.test.TestCase):

    def test_literals(self):
        # (1, 0), (0, 2): Σ||g||² = 5, ||Σg||² = 5 -> 1 (orthogonal).
        self.assertAllClose(gradient_diversity.diversity([1.0, 4.0], 5.0), 1.0)
        # n identical gradients: n||g||² / (n²||g||²) = 1/n.
        self.assertAllClose(gradient_diversity.diversity([2.0] * 4, 16 * 2.0), 0.25)
        self.assertIsNone(gradient_diversity.diversity([1.0, 1.0], 0.0))  # opposite gradients

    def test_plugin(self):
        labels = [0, 1, 1]
        per_var = {
            'a/kernel': np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]),  # 5 / 5
            'b/kernel': np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]),  # summed gradient vanishes: skipped
        }
        grad_stats = testing.grad_stats_from(per_var, labels, 2, compute_gram=False)
        logit_stats = testing.grad_stats_from({'z': testing.identical(3, [1.0, 1.0])}, labels, 2)['z']
        plugin = gradient_diversity.GradientDiversity()
        plugin.update(testing.step_outputs(labels, 2, grad_stats=grad_stats, logit_stats=logit_stats))
        result = plugin.result()
        self.assertEqual(sorted(result), ['train/grad_diversity/a', 'train/grad_diversity/logits_grad'])
        self.assertAllClose(result['train/grad_diversity/a'], 1.0)
        self.assertAllClose(result['train/grad_diversity/logits_grad'], 1 / 3)
        self.assertIs(registry.METRICS.get('gradient_diversity'), gradient_diversity.GradientDiversity)
        self.assertFalse(gradient_diversity.GradientDiversity.wants_gram)


if __name__ == '__main__':
    tf.test.main()
