"""Every gin file in gin/mehta2021/: it parses with every run's bindings (fast), and its sweep
trains for 2 steps and writes a report (slow; a `ci` subset runs in `make test`).

The 2-step runs use the bundled digits (the CIFAR/SVHN files bind tfds datasets that are not
prepared here), a tiny split, one point per sweep axis, and run in this process
(`ExtremeMemorization.in_process`) to avoid a TF start-up per run. `test_command_line_report`
runs `launch/train.py` itself, as a user would.
"""

import glob
import json
import os
import subprocess
import sys

import gin
import pytest
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import config
from extreme_mem.experiments import mehta2021_extreme_memorization as em
from tests import testing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIN_FILES = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'gin', 'mehta2021', '*.gin')))
NAMED_FILES = [(os.path.splitext(os.path.basename(p))[0], p) for p in GIN_FILES]
CITATION = '# Mehta, Cutkosky & Neyshabur (ICLR 2021), "Extreme Memorization via Scale of Initialization".'
APPLICATIONS = ('resnet50', 'densenet121')
SMOKE = [
    'train.Trainer.num_steps = 2',
    'train.Trainer.eval_every = 1',
    'train.Trainer.log_every = 1',
    'train.Trainer.checkpoint_every = 2',
    'train.Trainer.batch_size = 32',
    'METRIC_EVERY = 1',
    "experiments.Experiment.dataset = 'digits'",
    'data.Digits.train_size = 64',
    'data.Digits.test_size = 32',
    'experiments.ExtremeMemorization.in_process = True',
]


def _param(value) -> str:
    return repr(value)


def smoke_bindings(path: str, max_variants=None) -> list:
    """Bindings that shrink `path`'s sweep to a 2-step digits smoke run (gin must be clear)."""
    config.parse_gin([path], finalize=False)
    experiment = em.ExtremeMemorization(workdir='unused')
    sweep = {k: [v[0]] for k, v in experiment._sweep.items()}  # pylint: disable=protected-access
    kept = list(experiment._variants.items())[:max_variants]  # pylint: disable=protected-access
    variants = {name: {k: v for k, v in bindings.items() if k != 'experiments.Experiment.dataset'}
                for name, bindings in kept}
    models = {gin.query_parameter('experiments.Experiment.model')}
    models |= {b.get('experiments.Experiment.model') for b in variants.values()}
    gin.clear_config()
    bindings = SMOKE + [f'experiments.ExtremeMemorization.sweep = {_param(sweep or None)}',
                        f'experiments.ExtremeMemorization.variants = {_param(variants or None)}']
    if models & set(APPLICATIONS):
        bindings.append('data.Digits.image_size = 32')  # keras.applications need >= 32x32
    return bindings


class GinFilesParseTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):

    def test_every_file_is_listed(self):
        self.assertIn('gin/mehta2021/base.gin', GIN_FILES)
        self.assertIn('gin/mehta2021/fig1a_sin_digits.gin', GIN_FILES)
        self.assertGreaterEqual(len(GIN_FILES), 40)

    @parameterized.named_parameters(*NAMED_FILES)
    def test_parses_with_every_run_binding(self, path):
        with open(os.path.join(REPO, path)) as f:
            self.assertEqual(f.readline().rstrip('\n'), CITATION)
        config.parse_gin([path], finalize=False)
        experiment = em.ExtremeMemorization(workdir=self.create_tempdir().full_path)
        self.assertTrue(experiment.specs)
        gin.clear_config()
        for spec in experiment.specs:  # a misspelled binding key or value fails here, not after hours
            config.parse_gin([path], spec.bindings, finalize=False)
            gin.clear_config()


def _run_smoke(test, path, max_variants=None):
    workdir = test.create_tempdir().full_path
    config.parse_gin([path], smoke_bindings(path, max_variants), finalize=False)
    summary = em.ExtremeMemorization(workdir=workdir, seed=0).run()
    test.assertNotEmpty(summary['runs'])
    test.assertEqual({r['status'] for r in summary['runs']}, {'done'}, summary['runs'])
    test.assertTrue(os.path.exists(os.path.join(workdir, 'report.md')))
    figures = os.listdir(os.path.join(workdir, 'figures'))
    test.assertTrue(any(f.startswith('test_accuracy') for f in figures), figures)
    return summary


@pytest.mark.slow
@pytest.mark.ci
class GinFilesSmokeTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):
    """Every file, every variant, first point of every sweep axis, 2 steps (also in `make test`)."""

    @parameterized.named_parameters(*NAMED_FILES)
    def test_two_steps(self, path):
        _run_smoke(self, path)


@pytest.mark.slow
@pytest.mark.ci
class GinCommandLineTest(testing.GinCleanMixin, tf.test.TestCase):
    """The command line of the README, end to end."""

    def test_command_line_report(self):
        workdir = self.create_tempdir().full_path
        path = 'gin/mehta2021/fig1a_sin_digits.gin'
        bindings = [b for b in smoke_bindings(path, max_variants=1) if 'in_process' not in b]
        cmd = [sys.executable, os.path.join(REPO, 'launch', 'train.py'), '--experiment=extreme_memorization',
               f'--gin_file={path}', f'--workdir={workdir}'] + [f'--gin_param={b}' for b in bindings]
        env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        report = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('| sin,INIT_SCALE=0.001 | sin | 0.001 | done | 2 |', report)
        self.assertIn('figures/test_accuracy.png', report)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'grad_alignment_hidden.png')))
        run = os.path.join(workdir, 'runs', 'sin,INIT_SCALE=0.001')
        with open(os.path.join(run, 'results.json')) as f:
            record = json.load(f)
        self.assertEqual(record['experiment'], 'single_run')  # runs never recurse into the sweep
        self.assertIn('train/rep_alignment/hidden', record['history'][0])


if __name__ == '__main__':
    tf.test.main()
