"""Tests for extreme_mem/data/npz.py: round trip, validation messages, gin bindings, the command line."""

import os
import pickle
import subprocess
import sys

import gin
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.data import base
from extreme_mem.data import npz

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _arrays(n_train=12, n_test=5, shape=(6, 7), dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        'x_train': rng.integers(0, 256, size=(n_train, *shape)).astype(dtype),
        'y_train': np.arange(n_train) % 4,  # every class 0..3 in training
        'x_test': rng.integers(0, 256, size=(n_test, *shape)).astype(dtype),
        'y_test': (np.arange(n_test) % 4)[:, None],  # keras.datasets.cifar10 layout: [n, 1]
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

    def _write_bytes(self, content: bytes, name='data.npz'):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.write(content)
        return path

    # ---- valid files ----------------------------------------------------------------------------

    def test_round_trip_uint8_hw(self):
        a = _arrays()
        path = self._write(a)
        data = npz.Npz(path=path, preprocess='none').load(seed=0)
        self.assertEqual(data.info.name, 'npz')
        self.assertEqual(data.info.input_shape, (6, 7, 1))
        self.assertEqual(data.info.num_classes, 4)  # 1 + the largest training label, 3
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

    def test_gin_bindings_select_and_configure(self):
        path = self._write(_arrays(n_train=40))
        gin.parse_config([f"data.Npz.path = '{path}'", 'data.Npz.label_noise = 0.5', "data.Npz.noise_kind = 'permute'"])
        data = registry.DATASETS.get('npz')().load(seed=2)
        self.assertEqual(int(data.train.relabeled.sum()), 20)

    def test_path_is_required(self):
        with self.assertRaisesRegex(Exception, 'path'):
            registry.DATASETS.get('npz')()

    # ---- structure errors -----------------------------------------------------------------------

    def test_missing_file(self):
        missing = os.path.join(self.dir, 'nope.npz')
        with self.assertRaisesRegex(base.DataError, 'not found.*nope.npz'):
            npz.Npz(path=missing).load()

    def test_missing_keys_are_named(self):
        a = _arrays()
        del a['y_test']
        with self.assertRaisesRegex(base.DataError, r"missing key\(s\) \['y_test'\]"):
            npz.Npz(path=self._write(a)).load()

    def test_mismatched_lengths_are_named(self):
        a = _arrays()
        a['y_train'] = a['y_train'][:-1]
        with self.assertRaisesRegex(base.DataError, 'x_train has 12 examples but y_train has 11'):
            npz.Npz(path=self._write(a)).load()

    def test_mismatched_image_shapes(self):
        a = _arrays()
        a['x_test'] = a['x_test'][:, :5]
        with self.assertRaisesRegex(base.DataError, 'x_test examples have shape'):
            npz.Npz(path=self._write(a)).load()

    def test_non_integer_labels_name_index_and_value(self):
        a = _arrays()
        a['y_train'] = a['y_train'].astype(np.float64)
        a['y_train'][5] = 1.5
        with self.assertRaisesRegex(base.DataError, r'y_train\[5\] = 1.5 is not an integer class id'):
            npz.Npz(path=self._write(a)).load()

    def test_string_images_are_refused(self):
        a = _arrays()
        a['x_train'] = np.full((12, 6, 7), 'a')
        with self.assertRaisesRegex(base.DataError, 'x_train must hold real numbers.*<U1'):
            npz.Npz(path=self._write(a)).load()

    # ---- issue probe: npz label 2**40 (silently wrapped to class 0 by an int32 cast) --------------

    def test_label_beyond_int32_is_refused_not_wrapped(self):
        a = _arrays()
        a['y_train'] = a['y_train'].astype(np.int64)
        a['y_train'][3] = 2**40  # int32(2**40) == 0: the old cast made it class 0
        self.assertEqual(int(np.int64(2**40).astype(np.int32)), 0)
        path = self._write(a)
        with self.assertRaises(base.DataError) as cm:
            npz.Npz(path=path).load()
        message = str(cm.exception)
        self.assertIn(path, message)
        self.assertIn('y_train[3] = 1099511627776', message)
        self.assertIn('32-bit', message)

    def test_negative_label_is_named(self):
        a = _arrays()
        a['y_test'][2, 0] = -1
        with self.assertRaisesRegex(base.DataError, r'y_test\[2\] = -1 is negative'):
            npz.Npz(path=self._write(a)).load()

    def test_declared_num_classes_too_small(self):
        with self.assertRaisesRegex(base.DataError, r'y_train\[3\] = 3 is outside range\(3\).*data.Npz.num_classes'):
            npz.Npz(path=self._write(_arrays()), num_classes=3).load()

    @parameterized.parameters(1, 0, True, 2.5)
    def test_bad_declared_num_classes(self, value):
        with self.assertRaisesRegex(base.DataError, f'num_classes must be an int >= 2 or None.*{value!r}'):
            npz.Npz(path='unused.npz', num_classes=value)

    # ---- issue probe: one test label 50 among 3 classes (a 51-class model, no warning) ------------

    def test_test_label_unseen_in_training_is_an_error_when_num_classes_is_inferred(self):
        a = _arrays(n_train=9)
        a['y_train'] = np.arange(9) % 3  # classes 0, 1, 2
        a['y_test'] = np.array([0, 1, 50, 2, 1])
        path = self._write(a)
        with self.assertRaises(base.DataError) as cm:
            npz.Npz(path=path).load()
        message = str(cm.exception)
        self.assertIn(path, message)
        self.assertIn('y_test[2] = 50 is outside range(3)', message)
        self.assertIn('data.Npz.num_classes', message)

    def test_test_label_unseen_in_training_is_a_warning_when_num_classes_is_declared(self):
        a = _arrays(n_train=9)
        a['y_train'] = np.arange(9) % 3
        a['y_test'] = np.array([0, 1, 50, 2, 50])
        with self.assertLogs('absl', 'WARNING') as logs:
            data = npz.Npz(path=self._write(a), num_classes=51).load()
        self.assertEqual(data.info.num_classes, 51)
        self.assertTrue(any('2 of 5 test examples have labels never seen in training (classes 50)' in line
                            for line in logs.output), logs.output)

    # ---- issue probe: NaN/Inf in x (not checked at load; blamed on the training loss) -------------

    @parameterized.parameters(('train', np.nan, 'nan'), ('test', np.inf, 'inf'), ('test', -np.inf, '-inf'))
    def test_non_finite_inputs_name_split_and_first_bad_index(self, split, value, shown):
        a = _arrays(shape=(3, 3), dtype=np.float32)
        for key in ('x_train', 'x_test'):
            a[key] /= 255.0
        a[f'x_{split}'][4, 1, 2] = value
        a[f'x_{split}'][2 if split == 'train' else 3, 0, 0] = value  # the first bad example is this one
        first = 2 if split == 'train' else 3
        path = self._write(a)
        with self.assertRaises(base.DataError) as cm:
            npz.Npz(path=path).load()
        message = str(cm.exception)
        self.assertIn(path, message)
        self.assertIn(f'non-finite input in the {split} split: example {first} holds {shown}', message)

    def test_values_that_overflow_float32_are_refused_after_preprocessing(self):
        a = _arrays(shape=(3, 3), dtype=np.float64)
        a['x_test'][1, 0, 0] = 1e300  # finite in float64, inf in float32
        with self.assertRaisesRegex(base.DataError, 'test images after preprocessing: non-finite input in the test '
                                                    'split: example 1 holds inf'), np.errstate(over='ignore'):
            npz.Npz(path=self._write(a), preprocess='none').load()

    # ---- issue probe: truncated / garbage / empty .npz (path never named); pickled data ----------

    def _assert_names_path_and_layout(self, path, what):
        with self.assertRaises(base.DataError) as cm:
            npz.Npz(path=path).load()
        message = str(cm.exception)
        self.assertIn(path, message)
        self.assertIn(what, message)
        self.assertIn('x_train, y_train, x_test, y_test', message)  # what a valid file looks like
        self.assertIn('np.savez', message)

    def test_truncated_file(self):
        path = self._write(_arrays())
        with open(path, 'rb') as f:
            content = f.read()
        self._assert_names_path_and_layout(self._write_bytes(content[: len(content) // 2]), 'not a readable .npz')

    def test_truncated_member(self):
        path = self._write(_arrays(n_train=400))
        with open(path, 'rb') as f:
            content = bytearray(f.read())
        content[200:260] = b'\0' * 60  # inside x_train's data: the zip CRC no longer matches
        self._assert_names_path_and_layout(self._write_bytes(bytes(content)), 'not a readable .npz')

    def test_garbage_file(self):
        self._assert_names_path_and_layout(self._write_bytes(b'this is not numpy data\n' * 20), 'pickled data')

    def test_empty_file(self):
        self._assert_names_path_and_layout(self._write_bytes(b''), 'is empty (0 bytes)')

    def test_pickle_file_is_never_loaded(self):
        self._assert_names_path_and_layout(self._write_bytes(pickle.dumps(_arrays())), 'pickled data')

    def test_object_array_is_never_unpickled(self):
        a = _arrays()
        a['y_train'] = np.array([{'label': i} for i in range(12)], dtype=object)
        self._assert_names_path_and_layout(self._write(a), 'pickled data')

    def test_single_npy_array(self):
        path = os.path.join(self.dir, 'data.npy')
        np.save(path, np.zeros((3, 2)))
        self._assert_names_path_and_layout(path, 'single .npy array')

    # ---- issue probe: empty test split; 1-class dataset ("done" with loss 0, accuracy 1) ----------

    @parameterized.parameters('train', 'test')
    def test_empty_split_is_refused(self, split):
        a = _arrays()
        a[f'x_{split}'] = a[f'x_{split}'][:0]
        a[f'y_{split}'] = a[f'y_{split}'][:0]
        path = self._write(a)
        with self.assertRaisesRegex(base.DataError, f'{path}.*the {split} split is empty'):
            npz.Npz(path=path).load()

    def test_single_class_dataset_is_refused(self):
        a = _arrays()
        a['y_train'] = np.zeros(12, np.int64)
        a['y_test'] = np.zeros(5, np.int64)
        path = self._write(a)
        with self.assertRaisesRegex(base.DataError, f'{path}.*num_classes is 1; classification needs at least 2'):
            npz.Npz(path=path).load()

    def test_single_class_training_set_with_declared_classes_is_a_warning(self):
        a = _arrays()
        a['y_train'] = np.full(12, 2)
        with self.assertLogs('absl', 'WARNING') as logs:
            data = npz.Npz(path=self._write(a), num_classes=4).load()
        self.assertAllEqual(data.train.labels, np.full(12, 2))
        self.assertTrue(any('every training label is class 2 (12 examples, 4 classes)' in line for line in logs.output))


class NpzCommandLineTest(tf.test.TestCase):
    """The probes through `launch/train.py`: a data error ends the run naming the bad path/value."""

    def _train(self, path):
        workdir = self.create_tempdir().full_path
        command = [sys.executable, os.path.join(_REPO, 'launch', 'train.py'),
                   "--gin_param=experiments.Experiment.dataset='npz'", f"--gin_param=data.Npz.path='{path}'",
                   f'--workdir={workdir}']
        pythonpath = os.pathsep.join(filter(None, [_REPO, os.environ.get('PYTHONPATH')]))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='', PYTHONPATH=pythonpath)
        return subprocess.run(command, cwd=_REPO, env=env, capture_output=True, text=True, timeout=300)

    @pytest.mark.slow
    def test_corrupt_file_and_bad_label_through_the_command_line(self):
        tmp = self.create_tempdir().full_path
        garbage = os.path.join(tmp, 'garbage.npz')
        with open(garbage, 'wb') as f:
            f.write(b'not an archive' * 10)
        result = self._train(garbage)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f'npz dataset file {garbage} holds pickled data', result.stderr)

        a = _arrays()
        a['y_train'] = a['y_train'].astype(np.int64)
        a['y_train'][7] = 2**40
        wrapped = os.path.join(tmp, 'wrapped.npz')
        np.savez(wrapped, **a)
        result = self._train(wrapped)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f'{wrapped}: y_train[7] = 1099511627776 does not fit a 32-bit class id', result.stderr)
        self.assertNotIn('Traceback', result.stderr)  # a data error is one message, not a traceback


if __name__ == '__main__':
    tf.test.main()
