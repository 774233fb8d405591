"""Tests for extreme_mem/experiments/base.py: the run directory contract (DESIGN.md section 3)."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from extreme_mem import config, registry
from extreme_mem.experiments import base
from tests import testing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ['models.mlp.width = 32', 'train.Trainer.num_steps = 6', 'train.Trainer.eval_every = 3',
         'train.Trainer.batch_size = 64', 'train.Trainer.log_every = 3']


class SingleRunTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_run_directory_contract(self):
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'], SMALL, finalize=False)
        workdir = self.create_tempdir().full_path
        record = base.SingleRun(workdir=workdir, seed=0).run()
        self.assertEqual(record['status'], 'done')
        with open(os.path.join(workdir, 'results.json')) as f:
            saved = json.load(f)
        self.assertEqual(saved['experiment'], 'single_run')
        self.assertEqual(saved['status'], 'done')
        for tag in ('train/accuracy', 'test/accuracy', 'train/loss', 'test/loss'):
            self.assertIn(tag, saved['final'])
        self.assertEqual([h['step'] for h in saved['history']], [0, 3, 6])
        self.assertEqual(saved['final']['test/accuracy'], saved['history'][-1]['test/accuracy'])
        self.assertEqual(saved['config']['mlp.width'], '32')
        operative = open(os.path.join(workdir, 'operative_config.gin')).read()
        self.assertIn('mlp.width = 32', operative)
        self.assertIn('Trainer.learning_rate = 0.01', operative)
        for split in ('train', 'test'):
            self.assertNotEmpty(glob.glob(os.path.join(workdir, 'tensorboard', split, 'events.*')))
        self.assertTrue(os.path.exists(os.path.join(workdir, 'checkpoints', 'ckpt-6.index')))

    def test_divergence_sets_status(self):
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'],
                         SMALL + ["models.mlp.activation = 'relu'", 'INIT_SCALE = 1e3',
                                  'train.Trainer.learning_rate = 1e12'], finalize=False)
        workdir = self.create_tempdir().full_path
        record = base.SingleRun(workdir=workdir, seed=0).run()
        self.assertEqual(record['status'], 'diverged')
        self.assertEqual(json.load(open(os.path.join(workdir, 'results.json')))['status'], 'diverged')

    def test_unknown_names_fail_before_training(self):
        with self.assertRaisesRegex(LookupError, "Unknown dataset 'digitz'.*Did you mean 'digits'"):
            base.SingleRun(workdir=self.create_tempdir().full_path, dataset='digitz')
        with self.assertRaisesRegex(LookupError, "Unknown metric 'acuracy'"):
            base.SingleRun(workdir=self.create_tempdir().full_path, metrics=['acuracy'])

    def test_registered(self):
        self.assertIs(registry.EXPERIMENTS.get('single_run'), base.SingleRun)


def _train_cmd(workdir, steps):
    return [sys.executable, os.path.join(REPO, 'launch', 'train.py'), f'--workdir={workdir}',
            '--gin_file=gin/mehta2021/fig1a_sin_digits.gin', '--gin_param=train.Trainer.stop_accuracy = None',
            f'--gin_param=train.Trainer.num_steps = {steps}', '--gin_param=train.Trainer.checkpoint_every = 100',
            '--gin_param=train.Trainer.eval_every = 100', '--gin_param=INIT_SCALE = 0.1']


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.timeout(300)
def test_resume_after_kill_equals_uninterrupted(tmp_path):
    """A run killed with SIGKILL mid-training and restarted ends with the uninterrupted run's numbers."""
    steps = 3000
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
    whole, killed = tmp_path / 'whole', tmp_path / 'killed'
    subprocess.run(_train_cmd(whole, steps), check=True, env=env, capture_output=True, timeout=240)
    proc = subprocess.Popen(_train_cmd(killed, steps), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not glob.glob(str(killed / 'checkpoints' / 'ckpt-*.index')) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = json.load(open(killed / 'results.json'))
    assert partial['status'] == 'running', 'the run finished before it could be killed; raise `steps`'
    subprocess.run(_train_cmd(killed, steps), check=True, env=env, capture_output=True, timeout=240)
    a, b = json.load(open(whole / 'results.json')), json.load(open(killed / 'results.json'))
    assert b['status'] == 'done'
    assert a['final'] == b['final']
    assert [h['step'] for h in a['history']] == [h['step'] for h in b['history']]
    assert a['history'] == b['history']


if __name__ == '__main__':
    tf.test.main()
