"""Every gin file in gin/zhang2020/: parses, and its sweep trains 2 steps and writes a report.

The 2-step runs shrink what makes the paper's files expensive on a CPU: one depth per
architecture (at most 2 hidden layers), the first variant, 4 CNN channels, 16 FCN units, a few
test inputs, and run in this process (`IdentityCrisis.in_process`). `quick.gin` runs in
`make test` (`ci`); the others are `slow`.
"""

import glob
import json
import os

import gin
import pytest
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import config
from extreme_mem.experiments import zhang2020_identity_crisis as zc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIN_FILES = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'gin', 'zhang2020', '*.gin')))
FIGURE_FILES = [p for p in GIN_FILES if not p.endswith('base.gin')]
CITATION = '# Zhang, Bengio, Hardt, Mozer & Singer (ICLR 2020), "Identity Crisis'
SMOKE = [
    'NUM_STEPS = 2',
    'CHANNELS = 4',
    'models.identity_fcn.width = 16',
    'train.Trainer.eval_every = 1',
    'train.Trainer.log_every = 1',
    'train.Trainer.checkpoint_every = 2',
    'metrics.IdentityCorrelation.num_per_rho = 2',
    'experiments.IdentityCrisis.info_examples = (6, 6)',
    'experiments.IdentityCrisis.sizes = (7, 14)',
    'experiments.IdentityCrisis.vis_images = 2',
    'experiments.IdentityCrisis.in_process = True',
]


def smoke_bindings(path: str) -> list:
    """Bindings that shrink `path`'s sweep to a tiny 2-step run (gin must be clear)."""
    config.parse_gin([path], finalize=False)
    experiment = zc.IdentityCrisis(workdir='unused')
    architectures = {a: [min(int(d[0]), 2)] for a, d in experiment.architectures.items()}
    variants = dict(list(experiment.variants.items())[:1])
    variants = {k: {b: (4 if b.endswith('channels') else v) for b, v in bs.items()} for k, bs in variants.items()}
    gin.clear_config()
    return SMOKE + [f'experiments.IdentityCrisis.architectures = {architectures!r}',
                    f'experiments.IdentityCrisis.variants = {variants or None!r}']


class GinFilesTest(tf.test.TestCase, parameterized.TestCase):

    def tearDown(self):
        gin.clear_config()
        super().tearDown()

    @parameterized.parameters(*GIN_FILES)
    def test_parses_and_cites_the_paper(self, path):
        gin.clear_config()
        with open(os.path.join(REPO, path)) as f:
            self.assertTrue(f.readline().startswith(CITATION), path)
        config.parse_gin([path], finalize=False)
        experiment = zc.IdentityCrisis(workdir=self.create_tempdir().full_path)
        self.assertNotEmpty(experiment.specs())

    def _run(self, path):
        gin.clear_config()
        bindings = smoke_bindings(path)
        config.parse_gin([path], bindings)
        workdir = self.create_tempdir().full_path
        zc.IdentityCrisis(workdir=workdir).run()
        with open(os.path.join(workdir, 'report.json')) as f:
            report = json.load(f)
        self.assertNotEmpty(report['runs'])
        for row in report['runs']:
            self.assertEqual(row['status'], 'done', row['run'])
            self.assertIsNotNone(row['identity_correlation']['0'])
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'fig8_mean_vs_depth.png')))

    @pytest.mark.ci
    @pytest.mark.slow
    def test_quick_runs_two_steps(self):
        self._run(os.path.join('gin', 'zhang2020', 'quick.gin'))

    @pytest.mark.slow
    @parameterized.parameters(*[p for p in FIGURE_FILES if not p.endswith('quick.gin')])
    def test_figure_runs_two_steps(self, path):
        self._run(path)


if __name__ == '__main__':
    tf.test.main()
