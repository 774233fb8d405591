"""Tests for extreme_mem/data/base.py: `Split` and `RelabeledSplit` provenance."""

import numpy as np
import tensorflow as tf

from extreme_mem.data import base


def _split(n=6):
    labels = np.arange(n, dtype=np.int32) % 3
    return base.Split(np.arange(n * 2, dtype=np.float32).reshape(n, 2), labels, labels.copy(), np.arange(n))


class SplitTest(tf.test.TestCase):

    def test_length_validation(self):
        with self.assertRaisesRegex(ValueError, 'labels has 2 entries'):
            base.Split(np.zeros((3, 2)), np.zeros(2), np.zeros(3), np.arange(3))
        s = _split()
        with self.assertRaisesRegex(ValueError, 'relabeled has 2 entries'):
            base.RelabeledSplit(s.images, s.labels, s.true_labels, s.index, np.zeros(2, bool))

    def test_relabeled_split_keeps_provenance(self):
        s = _split()
        r = base.RelabeledSplit(s.images, (s.labels + 1) % 3, s.true_labels, s.index, [1, 0, 1, 0, 0, 0])
        self.assertIsInstance(r, base.Split)
        self.assertEqual(r.relabeled.dtype, bool)
        sub = r.take(np.array([2, 1]))
        self.assertIsInstance(sub, base.RelabeledSplit)
        self.assertAllEqual(sub.relabeled, [True, False])
        self.assertAllEqual(sub.index, [2, 1])
        relabeled = r.with_labels(s.labels)
        self.assertAllEqual(relabeled.relabeled, r.relabeled)
        self.assertFalse(np.any(relabeled.corrupted))

    def test_default_relabeled_is_all_false(self):
        s = _split()
        r = base.RelabeledSplit(s.images, s.labels, s.true_labels, s.index)
        self.assertAllEqual(r.relabeled, np.zeros(6, bool))


if __name__ == '__main__':
    tf.test.main()
