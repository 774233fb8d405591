"""Tests for extreme_mem/metrics/weight_norm.py with hand-computed literals."""

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.metrics import weight_norm
from tests import testing

WEIGHTS = {'hidden/kernel': np.array([[3.0, 0.0]]), 'hidden/bias': np.array([4.0]), 'logits/kernel': np.zeros((2, 1))}
GRADS = {'hidden/kernel': np.array([[0.0, 1.0]]), 'hidden/bias': None, 'logits/kernel': np.ones((2, 1))}


class WeightNormTest(tf.test.TestCase):

    def test_layer_norms(self):
        norms = weight_norm.layer_norms(GRADS, WEIGHTS)
        self.assertEqual(list(norms), ['hidden', 'logits'])
        self.assertAllClose(norms['hidden'], (5.0, 1.0))
        self.assertAllClose(norms['logits'], (0.0, np.sqrt(2.0)))

    def test_plugin(self):
        plugin = weight_norm.WeightNorm()
        plugin.update(testing.step_outputs([0], weights=WEIGHTS, grads=GRADS))
        self.assertAllClose(
            plugin.result(),
            {
                'train/weight_norm/hidden': 5.0,
                'train/grad_norm/hidden': 1.0,
                'train/relative_grad_norm/hidden': 0.2,
                'train/weight_norm/logits': 0.0,
                'train/grad_norm/logits': np.sqrt(2.0),
            },
        )
        self.assertEqual(weight_norm.WeightNorm.needs, frozenset({'weights'}))
        self.assertIs(registry.METRICS.get('weight_norm'), weight_norm.WeightNorm)
        with self.assertRaisesRegex(ValueError, 'weights/grads are None'):
            plugin.update(testing.step_outputs([0]))


if __name__ == '__main__':
    tf.test.main()
