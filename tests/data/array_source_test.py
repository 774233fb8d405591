"""Tests for extreme_mem/data/array_source.py: the load(seed) order of operations and seeds."""

import gin
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.data import array_source
from extreme_mem.data import base
from extreme_mem.data import preprocessing


class _Fake(array_source.ArraySource):
    """100 train / 40 test random uint8 4x4 images, 5 classes, 20 train examples per class."""

    name = 'fake'

    def _load_raw(self):
        rng = np.random.default_rng(0)
        return array_source.RawData(
            rng.integers(0, 256, size=(100, 4, 4)).astype(np.uint8),
            np.repeat(np.arange(5), 20),
            rng.integers(0, 256, size=(40, 4, 4)).astype(np.uint8),
            np.repeat(np.arange(5), 8),
            5,
            255.0,
        )


class ArraySourceTest(tf.test.TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        gin.clear_config()
        self.raw = _Fake()._load_raw()

    def tearDown(self):
        gin.clear_config()
        super().tearDown()

    def test_default_load(self):
        data = _Fake().load()
        self.assertEqual(data.info, base.DatasetInfo('fake', 5, (4, 4, 1)))
        self.assertAllClose(data.train.images[..., 0], self.raw.x_train / 255.0)
        self.assertNotIsInstance(data.train, base.RelabeledSplit)

    def test_class_subset_with_and_without_remap(self):
        data = _Fake(classes=[4, 1]).load()
        self.assertEqual(data.info.num_classes, 2)
        self.assertEqual((data.train.num_examples, data.test.num_examples), (40, 16))
        self.assertAllEqual(data.train.labels, np.where(self.raw.y_train[data.train.index] == 4, 0, 1))
        kept = _Fake(classes=[4, 1], remap_classes=False).load()
        self.assertEqual(kept.info.num_classes, 5)
        self.assertAllEqual(np.unique(kept.test.labels), [1, 4])

    def test_standardize_statistics_come_from_the_full_train_split(self):
        data = _Fake(preprocess='standardize', classes=[0]).load()
        mean, std = preprocessing.channel_stats(self.raw.x_train[..., None].astype(np.float64))
        self.assertAllClose(data.train.images, (self.raw.x_train[:20, ..., None] - mean) / std, atol=1e-5)

    def test_train_parts_are_disjoint_for_the_same_seed(self):
        up = _Fake(train_parts=[30, 50], train_part=0).load(seed=7)
        down = _Fake(train_parts=[30, 50], train_part=1).load(seed=7)
        self.assertEqual((up.train.num_examples, down.train.num_examples), (30, 50))
        self.assertEmpty(np.intersect1d(up.train.index, down.train.index))
        self.assertAllEqual(up.test.index, np.arange(40))   # the test split is untouched
        other = _Fake(train_parts=[30, 50], train_part=0).load(seed=8)
        self.assertNotAllEqual(other.train.index, up.train.index)
        pinned = [_Fake(train_parts=[30, 50], subset_seed=1).load(seed=s).train.index for s in (7, 8)]
        self.assertAllEqual(pinned[0], pinned[1])

    def test_identity_crisis_single_example(self):
        data = _Fake(classes=[3], remap_classes=False, num_train_examples=1, subset_seed=0).load(seed=5)
        self.assertEqual(data.train.num_examples, 1)
        self.assertEqual(int(data.train.labels[0]), 3)
        self.assertEqual(data.info.num_classes, 5)
        self.assertAllClose(data.train.images[0, ..., 0], self.raw.x_train[data.train.index[0]] / 255.0)

    @parameterized.parameters('uniform', 'permute')
    def test_label_noise_uses_run_seed_unless_pinned(self, kind):
        a = _Fake(label_noise=0.3, noise_kind=kind).load(seed=1)
        b = _Fake(label_noise=0.3, noise_kind=kind).load(seed=1)
        c = _Fake(label_noise=0.3, noise_kind=kind).load(seed=2)
        self.assertEqual(int(a.train.relabeled.sum()), 30)
        self.assertAllEqual(a.train.labels, b.train.labels)
        self.assertNotAllEqual(a.train.relabeled, c.train.relabeled)
        self.assertAllEqual(a.train.true_labels, self.raw.y_train)
        self.assertAllEqual(a.test.labels, self.raw.y_test)
        pinned = [_Fake(label_noise=0.3, noise_kind=kind, noise_seed=9).load(seed=s).train for s in (1, 2)]
        self.assertAllEqual(pinned[0].relabeled, pinned[1].relabeled)

    def test_random_classes_relabel_train_and_test(self):
        data = _Fake(random_classes=3).load(seed=0)
        self.assertEqual(data.info.num_classes, 3)
        for split, true in ((data.train, self.raw.y_train), (data.test, self.raw.y_test)):
            self.assertAllEqual(np.unique(split.labels), [0, 1, 2])
            self.assertAllEqual(split.true_labels, true)
            self.assertTrue(np.all(split.relabeled))

    @parameterized.parameters(
        (dict(preprocess='zscore'), "'standardize'"),
        (dict(noise_kind='flip'), "'permute'"),
        (dict(label_noise=1.5), 'label_noise'),
        (dict(label_noise=0.2, random_classes=3), 'random_classes'),
        (dict(train_parts=[10], train_part=1), 'train_part'),
    )
    def test_invalid_options_fail_at_construction(self, kwargs, message):
        with self.assertRaisesRegex(ValueError, message):
            _Fake(**kwargs)

    def test_gin_binding_for_all_sources_and_override(self):
        gin.parse_config(['data.ArraySource.label_noise = 0.5'])
        self.assertEqual(int(_Fake().load().train.relabeled.sum()), 50)
        self.assertEqual(int(_Fake(label_noise=0.1).load().train.relabeled.sum()), 10)


if __name__ == '__main__':
    tf.test.main()
