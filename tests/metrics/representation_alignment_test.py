"""Tests for extreme_mem/metrics/representation_alignment.py."""

import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.metrics import gradient_alignment
from extreme_mem.metrics import representation_alignment
from tests import testing


class RepresentationAlignmentTest(tf.test.TestCase):

    def test_class_alignment_equals_alignment_of_each_class(self):
        rng = np.random.RandomState(0)
        r = rng.normal(size=(9, 2, 3))  # conv-like representation, flattened per example
        labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 1])
        got = representation_alignment.class_alignment(r, labels, 4)
        self.assertEqual(sorted(got), [0, 1, 2])
        for c in range(3):
            self.assertAllClose(got[c][0], gradient_alignment.alignment(r[labels == c]))

    def test_plugin_tags(self):
        labels = [0, 0, 1, 1, 2]
        reps = {
            'hidden': tf.constant(testing.identical(5, [1.0, 0.0, 2.0])),  # Ω_c = 1
            'other': tf.constant([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [5.0, 5.0]]),  # Ω_0 = -1, Ω_1 = 0
        }
        plugin = representation_alignment.RepresentationAlignment(per_class=True)
        plugin.update(testing.step_outputs(labels, representations=reps))
        result = plugin.result()
        self.assertAllClose(result['train/rep_alignment/hidden'], 1.0)
        self.assertAllClose(result['train/rep_alignment/other'], -0.5)
        self.assertAllClose(result['train/rep_alignment/other/class_0'], -1.0)
        self.assertAllClose(result['train/rep_alignment/other/class_1'], 0.0)
        self.assertNotIn('train/rep_alignment/other/class_2', result)
        plugin.reset()
        self.assertEqual(plugin.result(), {})

    def test_probe_filter_and_registration(self):
        plugin = representation_alignment.RepresentationAlignment(probes=['hidden'])
        reps = {'hidden': tf.ones([2, 3]), 'other': tf.ones([2, 3])}
        plugin.update(testing.step_outputs([0, 0], representations=reps))
        self.assertEqual(list(plugin.result()), ['train/rep_alignment/hidden'])
        self.assertIs(
            registry.METRICS.get('representation_alignment'), representation_alignment.RepresentationAlignment
        )
        self.assertEqual(representation_alignment.RepresentationAlignment.needs, frozenset({'representations'}))
        with self.assertRaisesRegex(ValueError, 'representations is None'):
            plugin.update(testing.step_outputs([0, 0]))


if __name__ == '__main__':
    tf.test.main()
