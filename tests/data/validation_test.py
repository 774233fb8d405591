"""Tests for extreme_mem/data/validation.py: every check on literal arrays with known bad entries."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.data import base
from extreme_mem.data import validation


def _split(labels, images=None):
    labels = np.asarray(labels)
    images = np.zeros((len(labels), 2), np.float32) if images is None else images
    return base.Split(images, labels, labels.copy(), np.arange(len(labels), dtype=np.int64))


def _data(train_labels, test_labels, num_classes=3, train_images=None, test_images=None):
    return base.Data(_split(train_labels, train_images), _split(test_labels, test_images),
                     base.DatasetInfo('literal', num_classes, (2,)))


class ClassIdsTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(np.int64, np.uint64, np.float64, np.int32, np.uint8)
    def test_valid_labels_are_cast_to_int32_unchanged(self, dtype):
        y = np.array([0, 2, 1, 2], dtype=dtype)
        out = validation.class_ids(y, 'y', 3)
        self.assertEqual(out.dtype, np.int32)
        self.assertAllEqual(out, [0, 2, 1, 2])

    @parameterized.parameters(
        # labels, num_classes, expected message
        ([0, 1, 2**40, 2**40 + 1], None, r'y\[2\] = 1099511627776 does not fit a 32-bit class id'),
        ([0, 2**31], None, r'y\[1\] = 2147483648 does not fit'),
        ([0, 1, 2, 3, 50], 3, r'y\[3\] = 3 is outside range\(3\) of the 3 classes'),
        ([0, -4, -1], None, r'y\[1\] = -4 is negative'),
        ([0.0, 1.0, 0.5], None, r'y\[2\] = 0.5 is not an integer class id'),
        ([0.0, np.nan], None, r'y\[1\] = nan is not an integer class id'),
        ([0.0, np.inf], None, r'y\[1\] = inf is not an integer class id'),
    )
    def test_bad_labels_name_first_index_and_value(self, labels, num_classes, message):
        dtype = np.float64 if any(isinstance(v, float) for v in labels) else np.int64
        with self.assertRaisesRegex(base.DataError, message):
            validation.class_ids(np.array(labels, dtype=dtype), 'y', num_classes)

    def test_largest_int32_fits(self):
        self.assertEqual(int(validation.class_ids(np.array([2**31 - 1], np.int64), 'y')[0]), 2**31 - 1)

    def test_hint_is_appended(self):
        with self.assertRaisesRegex(base.DataError, r'outside range\(2\) of the 2 classes \(set K\)'):
            validation.class_ids(np.array([2]), 'y', 2, hint='set K')

    @parameterized.parameters((np.zeros((3, 2), np.int64), 'shape'), (np.array([True, False]), 'dtype bool'),
                              (np.array(['a', 'b']), 'dtype <U1'))
    def test_wrong_shape_or_dtype(self, y, message):
        with self.assertRaisesRegex(base.DataError, message):
            validation.class_ids(y, 'y')


class CheckFiniteTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(np.float32, np.float64, np.float16)
    def test_first_bad_example_and_value(self, dtype):
        x = np.zeros((10, 3, 3), dtype)
        x[7, 2, 1] = np.nan
        x[4, 0, 2] = -np.inf
        with self.assertRaisesRegex(base.DataError, 'x: non-finite input in the test split: example 4 holds -inf'):
            validation.check_finite(x, 'x', 'test')

    def test_bad_example_in_a_later_chunk(self):
        x = np.zeros((validation._CHUNK + 5, 2), np.float32)
        x[validation._CHUNK + 3, 1] = np.inf
        with self.assertRaisesRegex(base.DataError, f'example {validation._CHUNK + 3} holds inf'):
            validation.check_finite(x, 'x', 'train')

    def test_finite_and_integer_arrays_pass(self):
        validation.check_finite(np.ones((4, 2), np.float32), 'x', 'train')
        validation.check_finite(np.full((4, 2), 255, np.uint8), 'x', 'train')
        validation.check_finite(np.zeros((0, 2), np.float32), 'x', 'train')


class CheckDataTest(tf.test.TestCase):

    def test_clean_data_passes_without_warnings(self):
        data = _data([0, 1, 2, 0], [2, 1])
        with self.assertNoLogs('absl', 'WARNING'):
            validation.check_data(data, 'src')

    def test_empty_splits(self):
        with self.assertRaisesRegex(base.DataError, 'src: the train split is empty after classes=.9.'):
            validation.check_data(_data([], [0, 1]), 'src', 'after classes=[9]')
        with self.assertRaisesRegex(base.DataError, 'src: the test split is empty'):
            validation.check_data(_data([0, 1], []), 'src')

    def test_fewer_than_two_classes(self):
        with self.assertRaisesRegex(base.DataError, 'src: num_classes is 1; classification needs at least 2'):
            validation.check_data(_data([0, 0], [0], num_classes=1), 'src')

    def test_labels_out_of_range(self):
        with self.assertRaisesRegex(base.DataError, r'src: test labels\[1\] = 3 is outside range\(3\)'):
            validation.check_data(_data([0, 1, 2], [1, 3]), 'src')

    def test_non_finite_images(self):
        images = np.zeros((3, 2), np.float32)
        images[1, 0] = np.nan
        with self.assertRaisesRegex(base.DataError, 'src: train images after preprocessing: non-finite input in the '
                                                    'train split: example 1 holds nan'):
            validation.check_data(_data([0, 1, 2], [0], train_images=images), 'src')

    def test_single_training_class_is_a_warning(self):
        with self.assertLogs('absl', 'WARNING') as logs:
            validation.check_data(_data([1, 1, 1], [1, 1]), 'src')
        self.assertLen(logs.output, 1)
        self.assertIn('src: every training label is class 1 (3 examples, 3 classes)', logs.output[0])

    def test_unseen_test_labels_are_a_warning_with_counts(self):
        with self.assertLogs('absl', 'WARNING') as logs:
            validation.check_data(_data([0, 1, 0, 1], [2, 0, 2, 1, 2], num_classes=4), 'src')
        self.assertLen(logs.output, 1)
        self.assertIn('3 of 5 test examples have labels never seen in training (classes 2)', logs.output[0])

    def test_regression_targets_are_only_checked_for_finiteness(self):
        targets = np.array([[0.5, -1.5], [2.25, 0.0]], np.float32)
        data = base.Data(_split(targets), _split(targets), base.DatasetInfo('r', 2, (2,)))
        validation.check_data(data, 'src')
        targets[1, 1] = np.inf
        with self.assertRaisesRegex(base.DataError, 'src: train targets: non-finite input in the train split: example 1'):
            validation.check_data(base.Data(_split(targets), _split(targets[:1]), data.info), 'src')


if __name__ == '__main__':
    tf.test.main()
