"""Tests for extreme_mem/pergrad/stats.py with hand-computed literals."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.pergrad import stats

# 4 examples, 2-d "gradients"; classes 0, 0, 1, 1 of C = 3.
VECTORS = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 0.0]], np.float32)
LABELS = np.array([0, 0, 1, 1])


class StatsTest(tf.test.TestCase, parameterized.TestCase):

    def test_from_vectors_literal(self):
        s = stats.from_vectors(VECTORS, LABELS, 3, compute_gram=True)
        self.assertAllClose(s.sq_norms, [1, 4, 2, 9])
        self.assertAllClose(s.class_sum_sq_norms, [1 + 4, 16 + 1, 0])  # (1, 2) and (4, 1)
        self.assertAllClose(s.class_counts, [2, 2, 0])
        self.assertAllClose(s.total_sum_sq_norm, 25 + 9)  # (5, 3)
        self.assertAllClose(s.gram, VECTORS @ VECTORS.T)

    def test_without_gram(self):
        self.assertIsNone(stats.from_vectors(VECTORS, LABELS, 3).gram)

    def test_class_subset_zeroes_other_classes(self):
        s = stats.from_vectors(VECTORS, LABELS, 3, classes=[1])
        self.assertAllClose(s.class_sum_sq_norms, [0, 17, 0])
        self.assertAllClose(s.class_counts, [0, 2, 0])
        self.assertAllClose(s.total_sum_sq_norm, 34)

    def test_chunks_equal_whole(self):
        spec = stats.ClassSpec.make(3)
        whole = stats.from_vector_chunks([VECTORS], LABELS, spec, compute_gram=True)
        chunked = stats.from_vector_chunks([VECTORS[:1], VECTORS[1:3], VECTORS[3:]], LABELS, spec, compute_gram=True)
        for a, b in zip(whole, chunked):
            self.assertAllClose(a, b)

    def test_from_gram_equals_from_vectors(self):
        spec = stats.ClassSpec.make(3)
        want = stats.from_vectors(VECTORS, LABELS, 3, compute_gram=True)
        got = stats.from_gram(VECTORS @ VECTORS.T, LABELS, spec)
        for a, b in zip(want, got):
            self.assertAllClose(a, b)

    def test_combine_is_concatenation(self):
        other = np.array([[0.5], [-1.0], [2.0], [0.0]], np.float32)
        want = stats.from_vectors(np.concatenate([VECTORS, other], axis=1), LABELS, 3, compute_gram=True)
        with_gram = stats.from_vectors(VECTORS, LABELS, 3, compute_gram=True)
        other_stats = stats.from_vectors(other, LABELS, 3, compute_gram=True)
        got = stats.combine([with_gram, other_stats])
        for a, b in zip(want, got):
            self.assertAllClose(a, b)
        no_gram = stats.combine([stats.from_vectors(VECTORS, LABELS, 3), other_stats])
        self.assertIsNone(no_gram.gram)
        with self.assertRaises(ValueError):
            stats.combine([])

    def test_by_layer_folds_kernel_and_bias(self):
        k = stats.from_vectors(VECTORS, LABELS, 3)
        b = stats.from_vectors(VECTORS[:, :1], LABELS, 3)
        folded = stats.by_layer({'hidden/kernel': k, 'hidden/bias': b, 'logits/kernel': k})
        self.assertEqual(list(folded), ['hidden', 'logits'])
        self.assertAllClose(folded['hidden'].sq_norms, [2, 4, 3, 18])
        self.assertEqual(stats.layer_of('block/fc/bias'), 'block/fc')
        self.assertEqual(stats.layer_of('scalar'), 'scalar')

    @parameterized.parameters((0, None), (3, [3]), (3, [-1]), (3, []))
    def test_class_spec_rejects_bad_classes(self, num_classes, classes):
        with self.assertRaises(ValueError):
            stats.ClassSpec.make(num_classes, classes)


if __name__ == '__main__':
    tf.test.main()
