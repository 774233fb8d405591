"""Tests for extreme_mem/data/digits.py against scikit-learn's own copy of the data."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn import datasets

from extreme_mem import registry
from extreme_mem.data import base
from extreme_mem.data import digits

_SK = datasets.load_digits()


def _rows(images):
    """Sorted rows of flattened images (a multiset of examples)."""
    flat = np.round(np.reshape(images, (len(images), -1))).astype(np.int64)
    return flat[np.lexsort(flat.T[::-1])]


class DigitsTest(tf.test.TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = digits.Digits().load(seed=0)

    def test_shapes_ranges_sizes(self):
        data = self.data
        self.assertIsInstance(data, base.Data)
        self.assertEqual(data.info, base.DatasetInfo('digits', 10, (8, 8, 1)))
        self.assertEqual(data.train.images.shape, (1200, 8, 8, 1))
        self.assertEqual(data.test.images.shape, (597, 8, 8, 1))
        for split in (data.train, data.test):
            self.assertEqual(split.images.dtype, np.float32)
            self.assertEqual(split.labels.dtype, np.int32)
            self.assertEqual(split.index.dtype, np.int64)
            self.assertBetween(float(split.images.min()), 0.0, 0.0)
            self.assertBetween(float(split.images.max()), 1.0, 1.0)
            self.assertAllEqual(split.labels, split.true_labels)
            self.assertAllEqual(split.index, np.arange(split.num_examples))

    def test_splits_partition_the_bundled_set(self):
        # Independent oracle: train + test is exactly scikit-learn's 1,797 images (as a multiset),
        # with matching labels.
        both = np.concatenate([self.data.train.images, self.data.test.images]) * 16.0
        self.assertAllEqual(_rows(both), _rows(_SK.images))
        labels = np.concatenate([self.data.train.labels, self.data.test.labels])
        self.assertAllEqual(np.bincount(labels), np.bincount(_SK.target))

    def test_stratified_split_positions_are_disjoint_and_cover(self):
        train, test = digits.stratified_split(_SK.target, 1200, None, seed=0)
        self.assertEmpty(np.intersect1d(train, test))
        self.assertAllEqual(np.sort(np.concatenate([train, test])), np.arange(1797))

    @parameterized.parameters((1200, None), (1000, 500), (300, 100))
    def test_stratified(self, train_size, test_size):
        train, test = digits.stratified_split(_SK.target, train_size, test_size, seed=5)
        test_size = 1797 - train_size if test_size is None else test_size
        self.assertLen(train, train_size)
        self.assertLen(test, test_size)
        counts = np.bincount(_SK.target)
        for positions, size in ((train, train_size), (test, test_size)):
            got = np.bincount(_SK.target[positions], minlength=10)
            self.assertLessEqual(np.max(np.abs(got - counts * size / 1797)), 1.0)

    def test_deterministic_and_independent_of_run_seed(self):
        other = digits.Digits().load(seed=123)
        self.assertAllEqual(other.train.images, self.data.train.images)
        self.assertAllEqual(other.test.labels, self.data.test.labels)
        reshuffled = digits.Digits(split_seed=1).load(seed=0)
        self.assertNotAllEqual(reshuffled.train.labels, self.data.train.labels)

    def test_configurable_sizes(self):
        data = digits.Digits(train_size=100, test_size=50).load()
        self.assertEqual((data.train.num_examples, data.test.num_examples), (100, 50))
        with self.assertRaisesRegex(base.DataError, 'train_size'):
            digits.Digits(train_size=1797).load()

    @parameterized.parameters((28, None, (28, 28, 1)), (32, 3, (32, 32, 3)), (None, 3, (8, 8, 3)))
    def test_resize_and_channels(self, size, channels, shape):
        data = digits.Digits(image_size=size, channels=channels, train_size=200, test_size=100).load()
        self.assertEqual(data.info.input_shape, shape)
        self.assertEqual(data.train.images.shape, (200, *shape))
        self.assertGreaterEqual(float(data.train.images.min()), 0.0)
        self.assertLessEqual(float(data.train.images.max()), 1.0 + 1e-6)
        if shape[-1] == 3:
            self.assertAllEqual(data.train.images[..., 0], data.train.images[..., 2])

    def test_flatten_and_label_noise(self):
        data = digits.Digits(flatten=True, label_noise=0.25).load(seed=1)
        self.assertEqual(data.info.input_shape, (64,))
        self.assertEqual(int(data.train.relabeled.sum()), 300)
        self.assertAllEqual(data.train.true_labels, self.data.train.labels)
        self.assertAllEqual(data.test.labels, self.data.test.labels)  # the test split stays clean

    def test_is_registered(self):
        self.assertIs(registry.DATASETS.get('digits'), digits.Digits)

    # Data validation at load (issue probes "empty test split; 1-class dataset").

    def test_class_absent_from_the_data_empties_both_splits(self):
        with self.assertRaisesRegex(base.DataError, r"dataset 'digits': the train split is empty after the subset "
                                                    r"options classes=\[12\]"):
            digits.Digits(classes=[12]).load()

    def test_one_remapped_class_is_refused(self):
        with self.assertRaisesRegex(base.DataError, "dataset 'digits': num_classes is 1; classification needs at "
                                                    "least 2 classes"):
            digits.Digits(classes=[3]).load()

    def test_single_training_example_is_a_warning(self):
        # Zhang et al. (2020) "Identity Crisis": one training example, all ten classes in the test split.
        with self.assertLogs('absl', 'WARNING') as logs:
            data = digits.Digits(num_train_examples=1, subset_seed=0).load()
        label = int(data.train.labels[0])
        self.assertEqual(data.train.num_examples, 1)
        unseen = int(np.sum(self.data.test.labels != label))  # the test split is the default one
        self.assertTrue(any(f'every training label is class {label} (1 examples, 10 classes)' in line
                            for line in logs.output), logs.output)
        self.assertTrue(any(f'{unseen} of 597 test examples have labels never seen in training' in line
                            for line in logs.output), logs.output)

    def test_too_large_num_train_examples(self):
        with self.assertRaisesRegex(base.DataError, 'Cannot take 5000 examples from a split of 1200'):
            digits.Digits(num_train_examples=5000).load()


if __name__ == '__main__':
    tf.test.main()
