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


class _Literal(array_source.ArraySource):
    """A source returning the `RawData` it was given (for the validation tests)."""

    name = 'literal'

    def __init__(self, raw, **kwargs):
        super().__init__(**kwargs)
        self._raw = raw

    def _load_raw(self):
        return self._raw


def _raw(**changes):
    """6 train / 4 test float 2x2 images in [0, 1], 3 classes, every class in both splits."""
    rng = np.random.default_rng(1)
    fields = dict(x_train=rng.uniform(size=(6, 2, 2)), y_train=np.arange(6) % 3, x_test=rng.uniform(size=(4, 2, 2)),
                  y_test=np.arange(4) % 3, num_classes=3, max_value=1.0)
    fields.update(changes)
    return array_source.RawData(**fields)


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
        data = _Fake(preprocess='standardize', classes=[0, 1]).load()
        mean, std = preprocessing.channel_stats(self.raw.x_train[..., None].astype(np.float64))
        self.assertAllClose(data.train.images, (self.raw.x_train[:40, ..., None] - mean) / std, atol=1e-5)

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

    # Data validation at load, for every array source (see data/validation.py).

    def test_literal_raw_data_round_trips(self):
        raw = _raw()
        data = _Literal(raw, preprocess='none').load()
        self.assertAllClose(data.train.images[..., 0], raw.x_train)
        self.assertAllEqual(data.test.labels, raw.y_test)

    def test_label_beyond_int32_is_refused_not_wrapped(self):
        y = np.arange(6, dtype=np.int64) % 3
        y[4] = 2**40 + 1  # int32 cast: 1, a valid class
        with self.assertRaisesRegex(base.DataError, r"dataset 'literal': y_train\[4\] = 1099511627777 does not fit"):
            _Literal(_raw(y_train=y)).load()

    def test_label_beyond_num_classes_is_named(self):
        with self.assertRaisesRegex(base.DataError, r"dataset 'literal': y_test\[3\] = 50 is outside range\(3\)"):
            _Literal(_raw(y_test=np.array([0, 1, 2, 50]))).load()

    @parameterized.parameters(('train', 'x_train', 3, np.nan, 'nan'), ('test', 'x_test', 2, -np.inf, '-inf'))
    def test_non_finite_input_names_split_and_first_index(self, split, key, index, value, shown):
        x = _raw().__getattribute__(key).copy()
        x[index, 1, 0] = value
        x[index + 1, 0, 0] = value
        with self.assertRaisesRegex(base.DataError, f"dataset 'literal': {key}: non-finite input in the {split} split: "
                                                    f"example {index} holds {shown}"):
            _Literal(_raw(**{key: x})).load()

    @parameterized.parameters('train', 'test')
    def test_empty_raw_split(self, split):
        empty = {f'x_{split}': np.zeros((0, 2, 2)), f'y_{split}': np.zeros(0, np.int64)}
        with self.assertRaisesRegex(base.DataError, f"dataset 'literal': the {split} split is empty"):
            _Literal(_raw(**empty)).load()

    def test_test_split_emptied_by_the_class_subset(self):
        raw = _raw(y_test=np.array([0, 1, 0, 1]))
        with self.assertRaisesRegex(base.DataError, r"the test split is empty after the subset options classes=\[2\]"):
            _Literal(raw, classes=[2], remap_classes=False).load()
        with self.assertRaisesRegex(base.DataError, 'num_classes is 1'):
            _Literal(_raw(), classes=[2]).load()

    def test_mismatched_lengths_and_bad_num_classes(self):
        with self.assertRaisesRegex(base.DataError, 'x_test has 4 examples but y_test has 3'):
            _Literal(_raw(y_test=np.arange(3))).load()
        with self.assertRaisesRegex(base.DataError, 'num_classes must be a positive int, got 0'):
            _Literal(_raw(num_classes=0)).load()

    def test_random_classes_needs_two(self):
        with self.assertRaisesRegex(base.DataError, 'random_classes must be >= 2'):
            _Fake(random_classes=1)

    def test_gin_binding_for_all_sources_and_override(self):
        gin.parse_config(['data.ArraySource.label_noise = 0.5'])
        self.assertEqual(int(_Fake().load().train.relabeled.sum()), 50)
        self.assertEqual(int(_Fake(label_noise=0.1).load().train.relabeled.sum()), 10)


if __name__ == '__main__':
    tf.test.main()
