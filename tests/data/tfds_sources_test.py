"""Tests for extreme_mem/data/tfds_sources.py under `tfds.testing.mock_data` (no network here)."""

import os
import time
from unittest import mock

import gin
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.data import base
from extreme_mem.data import tfds_sources
from tests import testing

_EXPECTED = {  # name: (class, image shape, classes)
    'cifar10': (tfds_sources.Cifar10, (32, 32, 3), 10),
    'cifar100': (tfds_sources.Cifar100, (32, 32, 3), 100),
    'svhn_cropped': (tfds_sources.SvhnCropped, (32, 32, 3), 10),
    'mnist': (tfds_sources.Mnist, (28, 28, 1), 10),
    'fashion_mnist': (tfds_sources.FashionMnist, (28, 28, 1), 10),
}


class TfdsSourcesTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(*_EXPECTED)
    def test_mocked_load(self, name):
        cls, shape, num_classes = _EXPECTED[name]
        self.assertIs(registry.DATASETS.get(name), cls)
        with tfds.testing.mock_data(num_examples=6):
            data = cls().load(seed=0)
        self.assertEqual(data.info.name, name)
        self.assertEqual(data.info.num_classes, num_classes)
        self.assertEqual(data.info.input_shape, shape)
        for split in (data.train, data.test):
            self.assertEqual(split.images.shape, (6, *shape))
            self.assertEqual(split.images.dtype, np.float32)
            self.assertEqual(split.labels.dtype, np.int32)
            self.assertGreaterEqual(float(split.images.min()), 0.0)
            self.assertLessEqual(float(split.images.max()), 1.0)
            self.assertTrue(np.all((split.labels >= 0) & (split.labels < num_classes)))

    def test_preprocessing_and_noise_apply(self):
        with tfds.testing.mock_data(num_examples=10):
            raw = tfds_sources.Mnist(preprocess='none').load()
            sym = tfds_sources.Mnist(preprocess='symmetric', label_noise=0.5).load(seed=1)
        self.assertAllClose(sym.train.images, raw.train.images / 127.5 - 1.0, atol=1e-6)
        self.assertGreater(float(raw.train.images.max()), 1.0)  # raw uint8 values
        self.assertEqual(int(sym.train.relabeled.sum()), 5)
        self.assertAllEqual(sym.train.true_labels, raw.train.labels)

    def test_data_dir_and_splits_are_passed_to_tfds(self):
        with tfds.testing.mock_data(num_examples=4):
            with mock.patch.object(tfds, 'builder', wraps=tfds.builder) as builder:
                tfds_sources.Cifar10(data_dir='/data/tfds', train_split='train[:50%]').load()
        builder.assert_called_once_with('cifar10', data_dir='/data/tfds')

    def test_missing_dataset_fails_fast_with_instructions(self):
        data_dir = self.create_tempdir().full_path
        start = time.monotonic()
        with self.assertRaises(tfds_sources.DatasetNotPreparedError) as cm:
            tfds_sources.Cifar10(data_dir=data_dir).load()
        self.assertLess(time.monotonic() - start, 10.0)
        message = str(cm.exception)
        self.assertIsInstance(cm.exception, FileNotFoundError)
        self.assertIsInstance(cm.exception, base.DataError)
        self.assertIn("tfds.builder('cifar10', data_dir='/path/to/tensorflow_datasets').download_and_prepare()", message)
        self.assertIn(data_dir, message)
        self.assertIn("data.TfdsSource.data_dir=", message)
        self.assertIn("data.Cifar10.data_dir=", message)

    # Data validation at load: the tfds reader keeps labels as stored (int64), so none can wrap.

    def _load_with_labels(self, train_labels, test_labels):
        """Cifar10 under mock_data whose reader returns these labels for the train and test splits."""
        read = tfds_sources.TfdsSource._read

        def fake_read(source, builder, split):
            images, _ = read(source, builder, split)
            labels = np.asarray(train_labels if split == 'train' else test_labels, dtype=np.int64)
            return images[: len(labels)], labels

        with tfds.testing.mock_data(num_examples=6), mock.patch.object(tfds_sources.TfdsSource, '_read', fake_read):
            return tfds_sources.Cifar10().load()

    def test_mocked_reader_labels_as_stored(self):
        data = self._load_with_labels([0, 1, 2, 3, 4, 9], [9, 0, 1])
        self.assertAllEqual(data.train.labels, [0, 1, 2, 3, 4, 9])
        self.assertAllEqual(data.test.labels, [9, 0, 1])

    def test_label_beyond_int32_is_refused_not_wrapped(self):
        with self.assertRaisesRegex(base.DataError, r"tfds dataset 'cifar10' \(the default data_dir\): "
                                                    r"y_train\[2\] = 4294967297 does not fit a 32-bit class id"):
            self._load_with_labels([0, 1, 2**32 + 1, 3], [0, 1])  # int32(2**32 + 1) == 1

    def test_label_beyond_the_declared_classes(self):
        with self.assertRaisesRegex(base.DataError, r"y_test\[1\] = 10 is outside range\(10\)"):
            self._load_with_labels([0, 1, 2, 3], [0, 10])

    def test_empty_split_names_the_split_string(self):
        with tfds.testing.mock_data(num_examples=0):
            with self.assertRaisesRegex(base.DataError, "tfds dataset 'mnist' .*the tfds split 'train' is empty"):
                tfds_sources.Mnist().load()

    def test_gin_data_dir_for_all_and_per_source(self):
        shared, own = self.create_tempdir().full_path, self.create_tempdir().full_path
        gin.parse_config([f"data.TfdsSource.data_dir = '{shared}'", f"data.Mnist.data_dir = '{own}'"])
        for name, expected in (('fashion_mnist', shared), ('mnist', own)):
            with self.assertRaisesRegex(tfds_sources.DatasetNotPreparedError, os.path.join(expected, name)):
                registry.DATASETS.get(name)().load()


if __name__ == '__main__':
    tf.test.main()
