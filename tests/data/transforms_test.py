"""Tests for extreme_mem/data/transforms.py: label transforms, subsets and provenance."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.data import base
from extreme_mem.data import transforms


def _split(n=1000, num_classes=10, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=n).astype(np.int32)
    images = rng.normal(size=(n, 2, 2, 1)).astype(np.float32)
    return base.Split(images, labels, labels.copy(), np.arange(n, dtype=np.int64))


class LabelNoiseTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.product(fraction=[0.0, 0.1, 0.25, 0.5, 1.0], kind=['uniform', 'permute'])
    def test_exactly_fraction_selected_and_provenance(self, fraction, kind):
        split = _split(n=999)
        noisy = transforms.label_noise(split, fraction, kind, num_classes=10, seed=3)
        self.assertIsInstance(noisy, base.RelabeledSplit)
        self.assertEqual(int(noisy.relabeled.sum()), int(round(fraction * 999)))
        self.assertAllEqual(noisy.true_labels, split.labels)                    # originals kept
        self.assertAllEqual(noisy.images, split.images)
        self.assertAllEqual(noisy.index, split.index)
        unselected = ~noisy.relabeled
        self.assertAllEqual(noisy.labels[unselected], split.labels[unselected])  # only selected change
        self.assertFalse(np.any(noisy.corrupted & ~noisy.relabeled))
        self.assertEqual(noisy.labels.dtype, np.int32)

    @parameterized.parameters((0.2, 10), (0.5, 10), (1.0, 10), (0.5, 2))
    def test_uniform_changed_fraction_is_binomial(self, fraction, num_classes):
        n = 20000
        split = _split(n=n, num_classes=num_classes)
        noisy = transforms.uniform_labels(split, num_classes, fraction, seed=11)
        m = int(round(fraction * n))
        p = 1.0 - 1.0 / num_classes                 # a re-drawn label keeps its class w.p. 1/C
        changed = int(noisy.corrupted.sum())
        self.assertLess(abs(changed - m * p), 5 * np.sqrt(m * p * (1 - p)))
        self.assertGreater(int((noisy.relabeled & ~noisy.corrupted).sum()), 0)  # some keep their class
        new = noisy.labels[noisy.relabeled]
        self.assertAllEqual(np.unique(new), np.arange(num_classes))

    def test_permute_keeps_histogram(self):
        split = _split(n=500)
        noisy = transforms.permute_labels(split, 0.6, seed=1)
        self.assertAllEqual(np.bincount(noisy.labels, minlength=10), np.bincount(split.labels, minlength=10))
        sel = noisy.relabeled
        self.assertAllEqual(np.sort(noisy.labels[sel]), np.sort(split.labels[sel]))
        self.assertGreater(int(noisy.corrupted.sum()), 0)

    def test_deterministic_given_seed(self):
        split = _split()
        a = transforms.uniform_labels(split, 10, 0.3, seed=[5, 3])
        b = transforms.uniform_labels(split, 10, 0.3, seed=[5, 3])
        c = transforms.uniform_labels(split, 10, 0.3, seed=[6, 3])
        self.assertAllEqual(a.labels, b.labels)
        self.assertAllEqual(a.relabeled, b.relabeled)
        self.assertNotAllEqual(a.relabeled, c.relabeled)

    def test_random_classes_uses_only_k_classes(self):
        split = _split(n=2000)
        for k in (3, 50):  # k may exceed the dataset's classes (Maennel et al. 2020: 50 on CIFAR-10)
            noisy = transforms.random_classes(split, k, seed=0)
            self.assertAllEqual(np.unique(noisy.labels), np.arange(k))
            self.assertTrue(np.all(noisy.relabeled))
            self.assertAllEqual(noisy.true_labels, split.labels)

    def test_noise_composes_with_prior_provenance(self):
        split = _split()
        once = transforms.uniform_labels(split, 10, 0.2, seed=0)
        twice = transforms.permute_labels(once, 0.2, seed=1)
        self.assertTrue(np.all(twice.relabeled[once.relabeled]))
        self.assertAllEqual(twice.true_labels, split.labels)

    def test_invalid_arguments(self):
        split = _split(n=10)
        with self.assertRaisesRegex(ValueError, 'fraction'):
            transforms.uniform_labels(split, 10, 1.5)
        with self.assertRaisesRegex(ValueError, "'uniform', 'permute'"):
            transforms.label_noise(split, 0.1, 'flip', 10)


class ProvenanceTest(tf.test.TestCase):

    def test_subsets_partition_and_restore(self):
        split = _split(n=300)
        noisy = transforms.uniform_labels(split, 10, 0.4, seed=2)
        perm, unperm = transforms.permuted_positions(noisy), transforms.unpermuted_positions(noisy)
        self.assertEmpty(np.intersect1d(perm, unperm))
        self.assertAllEqual(np.sort(np.concatenate([perm, unperm])), np.arange(300))
        self.assertLen(perm, 120)
        subsets = transforms.provenance_subsets(noisy)
        self.assertAllEqual(subsets['permuted'].index, subsets['restored'].index)
        self.assertAllEqual(subsets['permuted'].images, subsets['restored'].images)
        self.assertAllEqual(subsets['permuted'].labels, noisy.labels[perm])
        self.assertAllEqual(subsets['restored'].labels, split.labels[perm])           # true labels back
        self.assertAllEqual(subsets['unpermuted'].labels, split.labels[unperm])
        self.assertFalse(np.any(subsets['restored'].corrupted))

    def test_provenance_survives_take(self):
        noisy = transforms.uniform_labels(_split(n=100), 10, 0.5, seed=0)
        order = np.random.default_rng(0).permutation(100)
        shuffled = noisy.take(order)
        self.assertIsInstance(shuffled, base.RelabeledSplit)
        self.assertAllEqual(shuffled.relabeled, noisy.relabeled[order])
        self.assertAllEqual(shuffled.index, order)

    def test_plain_split_falls_back_to_corrupted(self):
        split = _split(n=20)
        self.assertEmpty(transforms.permuted_positions(split))
        flipped = split.with_labels((split.labels + 1) % 10)
        self.assertLen(transforms.permuted_positions(flipped), 20)


class SubsetTest(tf.test.TestCase, parameterized.TestCase):

    def test_disjoint_subsets_cover(self):
        split = _split(n=101)
        first, second = transforms.disjoint_subsets(split, [50, 51], seed=4)
        self.assertEmpty(np.intersect1d(first.index, second.index))
        self.assertAllEqual(np.sort(np.concatenate([first.index, second.index])), np.arange(101))
        self.assertAllEqual(first.images, split.images[first.index])
        again = transforms.disjoint_subsets(split, [50, 51], seed=4)[0]
        self.assertAllEqual(again.index, first.index)

    def test_disjoint_subsets_partial_and_errors(self):
        parts = transforms.disjoint_positions(100, [10, 20, 30], seed=0)
        self.assertEqual([len(p) for p in parts], [10, 20, 30])
        self.assertLen(np.unique(np.concatenate(parts)), 60)
        with self.assertRaisesRegex(ValueError, 'sum to at most'):
            transforms.disjoint_positions(10, [6, 5], seed=0)

    @parameterized.parameters(True, False)
    def test_class_subset(self, remap):
        split = _split(n=400)
        sub = transforms.class_subset(split, [7, 2], remap=remap)
        self.assertAllEqual(sub.index, np.flatnonzero((split.labels == 7) | (split.labels == 2)))
        expected = split.labels[sub.index]
        if remap:
            expected = np.where(expected == 7, 0, 1)
        self.assertAllEqual(sub.labels, expected)
        self.assertAllEqual(sub.true_labels, expected)

    def test_class_subset_rejects_bad_classes(self):
        with self.assertRaisesRegex(ValueError, 'distinct'):
            transforms.class_subset(_split(n=10), [1, 1])

    def test_take_examples(self):
        split = _split(n=50)
        self.assertAllEqual(transforms.take_examples(split, 5).index, np.arange(5))
        one = transforms.take_examples(split, 1, seed=3)
        self.assertEqual(one.num_examples, 1)
        self.assertAllEqual(one.images[0], split.images[one.index[0]])
        self.assertAllEqual(transforms.take_examples(split, 1, seed=3).index, one.index)
        with self.assertRaisesRegex(ValueError, 'Cannot take 51'):
            transforms.take_examples(split, 51)


if __name__ == '__main__':
    tf.test.main()
