"""Tests for extreme_mem/data/preprocessing.py against direct numpy formulas."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.data import preprocessing


def _images(n, seed, channels=3, low=0, high=256):
    return np.random.default_rng(seed).integers(low, high, size=(n, 4, 5, channels)).astype(np.uint8)


class PreprocessTest(tf.test.TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.train = _images(50, 0)
        self.test = _images(20, 1, high=128)  # a different distribution: statistics must come from train

    @parameterized.parameters(
        ('none', lambda x: x.astype(np.float64)),
        ('unit', lambda x: x / 255.0),
        ('symmetric', lambda x: x / 127.5 - 1.0),
        ('mnist', lambda x: (x / 255.0 - 0.1307) / 0.3081),
    )
    def test_fixed_formulas(self, method, formula):
        train, test = preprocessing.preprocess(self.train, self.test, method, max_value=255)
        self.assertEqual(train.dtype, np.float32)
        self.assertEqual(test.dtype, np.float32)
        self.assertAllClose(train, formula(self.train), atol=1e-5)
        self.assertAllClose(test, formula(self.test), atol=1e-5)

    def test_unit_and_symmetric_ranges_with_other_max_value(self):
        x = np.arange(17, dtype=np.float64).reshape(1, 17, 1, 1)  # digits: 0..16
        unit, _ = preprocessing.preprocess(x, x, 'unit', max_value=16)
        sym, _ = preprocessing.preprocess(x, x, 'symmetric', max_value=16)
        self.assertAllClose([unit.min(), unit.max()], [0.0, 1.0])
        self.assertAllClose([sym.min(), sym.max()], [-1.0, 1.0])

    def test_standardize_uses_train_statistics_per_channel(self):
        train, test = preprocessing.preprocess(self.train, self.test, 'standardize')
        x = self.train.astype(np.float64)
        mean, std = x.mean(axis=(0, 1, 2)), x.std(axis=(0, 1, 2))
        self.assertAllClose(train, (x - mean) / std, atol=1e-5)
        self.assertAllClose(test, (self.test - mean) / std, atol=1e-5)
        t = train.astype(np.float64)
        self.assertAllClose(t.mean(axis=(0, 1, 2)), np.zeros(3), atol=1e-6)
        self.assertAllClose(t.std(axis=(0, 1, 2)), np.ones(3), atol=1e-6)

    def test_standardize_constant_channel_is_only_centred(self):
        x = np.full((3, 2, 2, 1), 7.0)
        train, _ = preprocessing.preprocess(x, x, 'standardize')
        self.assertAllClose(train, np.zeros_like(x))

    def test_channel_stats_chunked_matches_numpy(self):
        x = np.random.default_rng(2).normal(3.0, 2.0, size=(101, 3, 3, 2)).astype(np.float32)
        mean, std = preprocessing.channel_stats(x, chunk=7)
        x64 = x.astype(np.float64)
        self.assertAllClose(mean, x64.mean(axis=(0, 1, 2)), atol=1e-10)
        self.assertAllClose(std, x64.std(axis=(0, 1, 2)), atol=1e-10)

    def test_standardize_flat_features_use_one_statistic(self):
        x = np.random.default_rng(3).normal(size=(30, 6))
        train, _ = preprocessing.preprocess(x, x, 'standardize')
        self.assertAllClose(train, (x - x.mean()) / x.std(), atol=1e-5)

    def test_unknown_method_lists_valid_ones(self):
        with self.assertRaisesRegex(ValueError, 'bogus') as cm:
            preprocessing.preprocess(self.train, self.test, 'bogus')
        for method in preprocessing.METHODS:
            self.assertIn(repr(method), str(cm.exception))

    def test_flatten(self):
        flat = preprocessing.flatten(self.train)
        self.assertEqual(flat.shape, (50, 4 * 5 * 3))
        self.assertAllEqual(flat[7], self.train[7].reshape(-1))


if __name__ == '__main__':
    tf.test.main()
