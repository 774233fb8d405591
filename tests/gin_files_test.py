"""Every gin file under gin/: it parses (with every run's bindings), and its experiment trains
each run for 2 steps and writes its report.

Files do not name their experiment: it is the registered experiment whose configurable the
file binds (e.g. `experiments.ExtremeMemorization.figure`), else `single_run`. The 2-step runs
keep one point per sweep axis, at most two variants and one seed, run in this process, and use
the bundled digits where a file binds a tfds dataset (not prepared here). An experiment shrinks
its own data further through its `smoke_bindings`.
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

from extreme_mem import config, registry
from extreme_mem.data import tfds_sources
from extreme_mem.experiments import sweep_experiment
from tests import testing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN_FILES = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'gin', '**', '*.gin'), recursive=True))
NAMED_FILES = [(os.path.splitext(p[len('gin/'):])[0].replace('/', '_'), p) for p in GIN_FILES]
SMOKE = [
    'train.Trainer.num_steps = 2',
    'train.Trainer.eval_every = 1',
    'train.Trainer.log_every = 1',
    'train.Trainer.checkpoint_every = 2',
    'train.Trainer.batch_size = 32',
    'train.Trainer.stop_accuracy = None',
]
DIGITS = ["experiments.Experiment.dataset = 'digits'", 'data.Digits.train_size = 64', 'data.Digits.test_size = 32']
CI_FILES = ('gin/mehta2021/fig1a_sin_digits.gin', 'gin/mehta2021/fig5_architectures_digits.gin',
            'gin/zhang2020/quick.gin', 'gin/stephenson2021/spheres_quick.gin', 'gin/maennel2020/quick.gin')
TFDS_NAMES = set(getattr(tfds_sources, 'TFDS_NAMES', ())) | {
    'cifar10', 'cifar100', 'svhn_cropped', 'mnist', 'fashion_mnist', 'imagenet2012', 'tiny_imagenet'}


def experiment_class(path: str):
    """The sweep experiment class `path` configures (gin must hold `path`'s config), or SingleRun."""
    bound = {key.rsplit('.', 1)[0].rsplit('/', 1)[-1] for key in config.config_dict() if '.' in key}
    for name in registry.EXPERIMENTS.names():
        cls = registry.EXPERIMENTS.get(name)
        if issubclass(cls, sweep_experiment.SweepExperiment) and cls.__name__ in bound:
            return cls
    return registry.EXPERIMENTS.get('single_run')


def _uses_tfds(bindings) -> bool:
    values = [str(v) for v in bindings.values()]
    try:
        values.append(str(gin.query_parameter('experiments.Experiment.dataset')))
    except ValueError:
        pass
    return any(v.strip('\'"') in TFDS_NAMES for v in values)


def smoke_bindings(path: str) -> tuple:
    """`(experiment class, bindings)` that shrink `path`'s experiment to 2-step runs (gin must be clear)."""
    config.parse_gin([path], finalize=False)
    cls = experiment_class(path)
    bindings = list(SMOKE)
    if issubclass(cls, sweep_experiment.SweepExperiment):
        exp = cls(workdir='unused')
        name = f'experiments.{cls.__name__}'
        variants = dict(list(exp.variants.items())[:2])
        tfds = _uses_tfds({k: v for b in variants.values() for k, v in b.items()})
        if tfds:
            variants = {n: {k: v for k, v in b.items() if k != 'experiments.Experiment.dataset'}
                        for n, b in variants.items()}
        bindings += [f'{name}.in_process = True', f'{name}.variants = {variants or None!r}',
                     f'{name}.seeds = {exp.seeds[:1] or None!r}']
        if exp.random_axes:
            bindings.append(f'{name}.num_samples = 1')
        else:
            bindings.append(f'{name}.sweep = {({k: list(v)[:1] for k, v in exp.sweep.items()}) or None!r}')
        bindings += list(getattr(cls, 'smoke_bindings', ()))
    else:
        tfds = _uses_tfds({})
    if tfds:
        bindings += DIGITS
    gin.clear_config()
    return cls, bindings


class GinFilesParseTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):

    def test_files_are_found(self):
        self.assertIn('gin/mehta2021/fig1a_sin_digits.gin', GIN_FILES)

    @parameterized.named_parameters(*NAMED_FILES)
    def test_parses_with_every_run_binding(self, path):
        config.parse_gin([path], finalize=False)
        cls = experiment_class(path)
        if not issubclass(cls, sweep_experiment.SweepExperiment):
            return
        specs = cls(workdir=self.create_tempdir().full_path).specs()
        self.assertNotEmpty(specs)
        gin.clear_config()
        for spec in specs:  # a misspelled binding key or value fails here, not after hours
            config.parse_gin([path], spec.bindings, finalize=False)
            gin.clear_config()


def _smoke(test, path):
    cls, bindings = smoke_bindings(path)
    workdir = test.create_tempdir().full_path
    config.parse_gin([path], bindings, finalize=False)
    result = cls(workdir=workdir, seed=0).run()
    if issubclass(cls, sweep_experiment.SweepExperiment):
        test.assertTrue(result['ok'], result.get('status_line'))
        test.assertTrue(os.path.exists(os.path.join(workdir, 'report.md')))
        with open(os.path.join(workdir, 'report.json')) as f:
            json.load(f, parse_constant=lambda c: test.fail(f'non-JSON constant {c}'))
    else:
        test.assertEqual(result['status'], 'done')


@pytest.mark.slow
class GinFilesSmokeTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):
    """Every file: its experiment's runs train 2 steps and it writes its report (`make test-all`)."""

    @parameterized.named_parameters(*NAMED_FILES)
    def test_two_steps(self, path):
        _smoke(self, path)


@pytest.mark.slow
@pytest.mark.ci
class QuickFilesSmokeTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):
    """Each paper's quick file, 2 steps (the subset of `GinFilesSmokeTest` that `make test` runs)."""

    @parameterized.named_parameters(*[(n, p) for n, p in NAMED_FILES if p in CI_FILES])
    def test_two_steps(self, path):
        _smoke(self, path)


@pytest.mark.slow
@pytest.mark.ci
class CommandLineTest(testing.GinCleanMixin, tf.test.TestCase):
    """The README's command line, end to end, with runs in their own processes."""

    def test_sweep_report_and_rerun(self):
        workdir = self.create_tempdir().full_path
        path = 'gin/mehta2021/fig1a_sin_digits.gin'
        _, bindings = smoke_bindings(path)
        bindings = [b for b in bindings if 'in_process' not in b and '.variants' not in b]
        bindings.append("experiments.ExtremeMemorization.variants = {'sin': {}}")
        cmd = [sys.executable, os.path.join(REPO, 'launch', 'train.py'), '--experiment=extreme_memorization',
               f'--gin_file={path}', f'--workdir={workdir}'] + [f'--gin_param={b}' for b in bindings]
        env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        report = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('| sin,INIT_SCALE=0.001 | sin | 0.001 | done | 2 |', report)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'grad_alignment_hidden.png')))
        run = os.path.join(workdir, 'runs', 'sin,INIT_SCALE=0.001')
        with open(os.path.join(run, 'results.json')) as f:
            record = json.load(f)
        self.assertEqual(record['experiment'], 'single_run')  # runs never recurse into the sweep
        self.assertIn('train/rep_alignment/hidden', record['history'][0])
        mtime = os.path.getmtime(os.path.join(run, 'results.json'))
        # Another step budget: the finished run belongs to another configuration and is refused.
        proc = subprocess.run(cmd + ['--gin_param=train.Trainer.num_steps = 3'], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr[-3000:])
        self.assertIn('0 done, 1 failed, 0 diverged', proc.stderr)
        log = open(os.path.join(run, 'log.txt')).read()
        self.assertIn('Trainer.num_steps: 2 -> 3', log)
        self.assertEqual(os.path.getmtime(os.path.join(run, 'results.json')), mtime)


if __name__ == '__main__':
    tf.test.main()
