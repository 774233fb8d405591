"""Tests for extreme_mem/data/npz.py: round trip, validation messages and gin bindings."""

import os

import gin
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.data import npz


def _arrays(n_train=12, n_test=5, shape=(6, 7), dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        'x_train': rng.integers(0, 256, size=(n_train, *shape)).astype(dtype),
        'y_train': rng.integers(0, 4, size=(n_train,)),
        'x_test': rng.integers(0, 256, size=(n_test, *shape)).astype(dtype),
        'y_test': rng.integers(0, 4, size=(n_test, 1)),  # keras.datasets.cifar10 layout: [n, 1]
    }


class NpzTest(tf.test.TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        gin.clear_config()
        self.dir = self.create_tempdir().full_path

    def tearDown(self):
        gin.clear_config()
        super().tearDown()

    def _write(self, arrays, name='data.npz'):
        path = os.path.join(self.dir, name)
        np.savez(path, **arrays)
        return path

    def test_round_trip_uint8_hw(self):
        a = _arrays()
        path = self._write(a)
        data = npz.Npz(path=path, preprocess='none').load(seed=0)
        self.assertEqual(data.info.name, 'npz')
        self.assertEqual(data.info.input_shape, (6, 7, 1))
        self.assertEqual(data.info.num_classes, int(max(a['y_train'].max(), a['y_test'].max())) + 1)
        self.assertAllEqual(data.train.images, a['x_train'][..., None].astype(np.float32))
        self.assertAllEqual(data.test.images, a['x_test'][..., None].astype(np.float32))
        self.assertAllEqual(data.train.labels, a['y_train'])
        self.assertAllEqual(data.test.labels, a['y_test'][:, 0])
        unit = npz.Npz(path=path).load()
        self.assertAllClose(unit.train.images, a['x_train'][..., None] / 255.0)

    def test_round_trip_float_hwc(self):
        a = _arrays(shape=(4, 4, 3), dtype=np.float32)
        a['x_train'] /= 255.0
        a['x_test'] /= 255.0
        data = npz.Npz(path=self._write(a), num_classes=7).load()
        self.assertEqual(data.info.num_classes, 7)
        self.assertAllClose(data.train.images, a['x_train'])  # float images: max_value 1.0
        self.assertEqual(data.train.images.dtype, np.float32)

    def test_missing_file(self):
        missing = os.path.join(self.dir, 'nope.npz')
        with self.assertRaisesRegex(FileNotFoundError, 'nope.npz'):
            npz.Npz(path=missing).load()

    def test_missing_keys_are_named(self):
        a = _arrays()
        del a['y_test']
        with self.assertRaisesRegex(ValueError, r"missing key\(s\) \['y_test'\]"):
            npz.Npz(path=self._write(a)).load()

    def test_mismatched_lengths_are_named(self):
        a = _arrays()
        a['y_train'] = a['y_train'][:-1]
        with self.assertRaisesRegex(ValueError, 'x_train has 12 examples but y_train has 11'):
            npz.Npz(path=self._write(a)).load()

    def test_mismatched_image_shapes(self):
        a = _arrays()
        a['x_test'] = a['x_test'][:, :5]
        with self.assertRaisesRegex(ValueError, 'x_test examples have shape'):
            npz.Npz(path=self._write(a)).load()

    def test_non_integer_labels(self):
        a = _arrays()
        a['y_train'] = a['y_train'] + 0.5
        with self.assertRaisesRegex(ValueError, 'integer class ids'):
            npz.Npz(path=self._write(a)).load()

    def test_gin_bindings_select_and_configure(self):
        path = self._write(_arrays(n_train=40))
        gin.parse_config([f"data.Npz.path = '{path}'", 'data.Npz.label_noise = 0.5', "data.Npz.noise_kind = 'permute'"])
        data = registry.DATASETS.get('npz')().load(seed=2)
        self.assertEqual(int(data.train.relabeled.sum()), 20)

    def test_path_is_required(self):
        with self.assertRaisesRegex(Exception, 'path'):
            registry.DATASETS.get('npz')()


if __name__ == '__main__':
    tf.test.main()
