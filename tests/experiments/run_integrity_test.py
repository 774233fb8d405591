"""Runs that never lie: config identity, one writer per directory, typed gin values, one-line
user errors, honest sweep exit codes and file modes (the workdir rows of issue "Runs that never
lie"; data, checkpoint and divergence rows are tested beside their modules)."""

import json
import os
import subprocess
import sys

import gin
import pytest
import tensorflow as tf

from extreme_mem import config
from extreme_mem.experiments import base, workdir_lock
from tests import testing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIN = 'gin/mehta2021/fig1a_sin_digits.gin'
SMALL = ['models.mlp.width = 32', 'train.Trainer.num_steps = 4', 'train.Trainer.eval_every = 2',
         'train.Trainer.batch_size = 64', 'train.Trainer.log_every = 2', 'METRIC_EVERY = 2']
ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'}


def _run(workdir, bindings=(), overwrite=False):
    gin.clear_config()
    config.parse_gin([GIN], SMALL + list(bindings), finalize=False)
    return base.SingleRun(workdir=workdir, seed=0, overwrite=overwrite).run()


def _snapshot(workdir):
    return {name: open(os.path.join(workdir, name), 'rb').read() for name in ('results.json', 'operative_config.gin')}


class ConfigIdentityTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_rerun_of_a_done_run_with_other_bindings_is_refused_and_rewrites_nothing(self):
        workdir = self.create_tempdir().full_path
        self.assertEqual(_run(workdir)['status'], 'done')
        before = _snapshot(workdir)
        with self.assertRaisesRegex(workdir_lock.WorkdirError, r'mlp\.width: 32 -> 7.*--overwrite'):
            _run(workdir, ['models.mlp.width = 7'])
        self.assertEqual(_snapshot(workdir), before)
        self.assertEqual(_run(workdir)['status'], 'done')  # same bindings: skipped, still untouched
        self.assertEqual(_snapshot(workdir), before)

    def test_resume_with_another_learning_rate_is_refused_until_overwrite(self):
        workdir = self.create_tempdir().full_path
        _run(workdir)
        path = os.path.join(workdir, 'results.json')
        record = json.load(open(path))
        record['status'] = 'running'  # as a killed run leaves it
        json.dump(record, open(path, 'w'))
        with self.assertRaisesRegex(workdir_lock.WorkdirError, r'Trainer\.learning_rate: 0\.01 -> 0\.5'):
            _run(workdir, ['train.Trainer.learning_rate = 0.5'])
        redone = _run(workdir, ['train.Trainer.learning_rate = 0.5'], overwrite=True)
        self.assertEqual(redone['status'], 'done')
        self.assertEqual(redone['config']['Trainer.learning_rate'], '0.5')
        self.assertEqual([h['step'] for h in redone['history']], [0, 2, 4])  # trained anew, not resumed

    def test_seed_is_part_of_the_identity(self):
        config.parse_gin([GIN], SMALL, finalize=False)
        a = base.SingleRun(workdir='unused', seed=0).identity()
        b = base.SingleRun(workdir='unused', seed=1).identity()
        self.assertNotEqual(a[0], b[0])
        self.assertEqual(config.describe_differences(a[1], b[1]), 'seed: 0 -> 1')

    def test_output_files_get_the_umask_mode(self):
        old = os.umask(0o022)
        try:
            workdir = self.create_tempdir().full_path
            _run(workdir)
        finally:
            os.umask(old)
        for name in ('results.json', 'operative_config.gin'):
            self.assertEqual(os.stat(os.path.join(workdir, name)).st_mode & 0o777, 0o644, name)


class WorkdirLockTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_second_writer_fails_naming_the_owner(self):
        workdir = self.create_tempdir().full_path
        owner = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
        try:
            with open(os.path.join(workdir, workdir_lock.LOCK_NAME), 'w') as f:
                json.dump({'pid': owner.pid, 'host': __import__('socket').gethostname()}, f)
            with self.assertRaisesRegex(workdir_lock.WorkdirError, f'in use by process {owner.pid}'):
                _run(workdir)
            self.assertFalse(os.path.exists(os.path.join(workdir, 'results.json')))
        finally:
            owner.kill()
            owner.wait()
        # The owner is gone: its stale lock is taken over and released after the run.
        self.assertEqual(_run(workdir)['status'], 'done')
        self.assertFalse(os.path.exists(os.path.join(workdir, workdir_lock.LOCK_NAME)))


class TypedConfigTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_wrong_types_fail_naming_the_binding(self):
        with self.assertRaisesRegex(config.ConfigError, r"Trainer\.learning_rate = 'abc': expected float, got str"):
            config.parse_gin([GIN], ["train.Trainer.learning_rate = 'abc'"], finalize=False)
        gin.clear_config()
        with self.assertRaisesRegex(config.ConfigError, r'Trainer\.num_steps = True: expected int, got bool'):
            config.parse_gin([GIN], ['train.Trainer.num_steps = True'], finalize=False)
        gin.clear_config()
        config.parse_gin([GIN], ['train.Trainer.learning_rate = 1', 'train.Trainer.stop_accuracy = None'],
                         finalize=False)  # an int for a float, None for an Optional: fine

    def test_syntax_errors_name_the_file_or_binding(self):
        with self.assertRaisesRegex(config.ConfigError, r"In --gin_param 'train.Trainer.learning_rate = \(\('"):
            config.parse_gin([], ['train.Trainer.learning_rate = (('], finalize=False)
        bad = self.create_tempfile('bad.gin', content='train.Trainer.num_steps = [1,\n')
        with self.assertRaisesRegex(config.ConfigError, f'In gin file {bad.full_path}'):
            config.parse_gin([bad.full_path], finalize=False)


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.timeout(600)
class CommandLineTest(tf.test.TestCase):

    def test_user_error_is_one_line_without_traceback(self):
        cmd = [sys.executable, 'launch/train.py', f'--gin_file={GIN}', "--gin_param=train.Trainer.learning_rate = 'abc'",
               f'--workdir={self.create_tempdir().full_path}']
        proc = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr[-2000:])
        lines = [l for l in proc.stderr.splitlines() if l.startswith(('error:', '(rerun', 'Traceback'))]
        self.assertEqual(lines, ["error: Trainer.learning_rate = 'abc': expected float, got str.",
                                 '(rerun with --verbose for the traceback)'])

    def test_sweep_whose_runs_all_fail_exits_non_zero_with_a_summary(self):
        workdir = self.create_tempdir().full_path
        cmd = [sys.executable, 'launch/sweep.py', f'--gin_file={GIN}', f'--workdir={workdir}',
               '--grid=data.Digits.train_size=-5,-6'] + [f'--gin_param={b}' for b in SMALL]
        proc = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=500, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr[-2000:])
        self.assertIn('sweep: 0 done, 2 failed, 0 diverged', proc.stderr)
        rows = json.load(open(os.path.join(workdir, 'sweep.json')))
        self.assertEqual([r['status'] for r in rows], ['failed', 'failed'])


if __name__ == '__main__':
    tf.test.main()
