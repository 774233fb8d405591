"""Tests for extreme_mem/config.py: gin parsing errors name the file and gin's message."""

import os
import pathlib

import gin
from absl.testing import absltest

from extreme_mem import config
from tests import testing


class ConfigTest(testing.GinCleanMixin, absltest.TestCase):

    def _write(self, text, name='x.gin'):
        path = pathlib.Path(self.create_tempdir().full_path) / name
        path.write_text(text)
        return str(path)

    def test_unknown_configurable_names_file(self):
        path = self._write("train.Trainer.num_steps = 2\nmodels.mlpp.width = 3\n")
        with self.assertRaises(config.ConfigError) as cm:
            config.parse_gin([path], finalize=False)
        msg = str(cm.exception)
        self.assertIn(path, msg)
        self.assertIn('mlpp', msg)

    def test_misspelled_parameter_names_file(self):
        path = self._write('models.mlp.widht = 3\n')
        with self.assertRaises(config.ConfigError) as cm:
            config.parse_gin([path], finalize=False)
        self.assertIn(path, str(cm.exception))
        self.assertIn('widht', str(cm.exception))

    def test_bad_binding_names_binding(self):
        with self.assertRaisesRegex(config.ConfigError, "In --gin_param 'train.Trainer.num_stepz = 2'"):
            config.parse_gin([], ['train.Trainer.num_stepz = 2'], finalize=False)

    def test_missing_file(self):
        with self.assertRaisesRegex(config.ConfigError, "Gin file 'no/such.gin' not found"):
            config.parse_gin(['no/such.gin'], finalize=False)

    def test_repo_relative_file_and_include(self):
        inc = self._write("include 'gin/mehta2021/fig1a_sin_digits.gin'\nINIT_SCALE = 3.0\n")
        cwd = os.getcwd()
        try:
            os.chdir(self.create_tempdir().full_path)  # repo paths must not depend on the cwd
            config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin', inc], ['models.mlp.width = 7'], finalize=False)
        finally:
            os.chdir(cwd)
        self.assertEqual(gin.query_parameter('models.mlp.width'), 7)
        self.assertEqual(gin.query_parameter('%INIT_SCALE'), 3.0)

    def test_write_atomic_replaces_whole_file(self):
        path = pathlib.Path(self.create_tempdir().full_path) / 'r.json'
        config.write_atomic(path, 'a' * 1000)
        config.write_atomic(path, 'b')
        self.assertEqual(path.read_text(), 'b')
        self.assertEqual([p.name for p in path.parent.iterdir()], ['r.json'])  # no temp files left


if __name__ == '__main__':
    absltest.main()
