"""Every gin file in gin/zhang2020/: parses, and its sweep trains 2 steps and writes a report.

The 2-step runs shrink what makes the paper's files expensive on a CPU with the experiment's own
`smoke_bindings` (depths capped at 2, 4 CNN channels, 16 FCN units, a few test inputs), keep the
first variant, and run in this process (`IdentityCrisis.in_process`). `quick.gin` runs in
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
    'train.Trainer.num_steps = 2',
    'train.Trainer.eval_every = 1',
    'train.Trainer.log_every = 1',
    'train.Trainer.checkpoint_every = 2',
    'experiments.IdentityCrisis.in_process = True',
]


def smoke_bindings(path: str) -> list:
    """Bindings that shrink `path`'s sweep to tiny 2-step runs (gin must be clear)."""
    config.parse_gin([path], finalize=False)
    variants = dict(list(zc.IdentityCrisis(workdir='unused').variants.items())[:1])
    gin.clear_config()
    return SMOKE + list(zc.IdentityCrisis.smoke_bindings) + [
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

    @parameterized.parameters(*[p for p in FIGURE_FILES if not p.endswith('quick.gin')])
    @pytest.mark.slow
    def test_figure_runs_two_steps(self, path):
        self._run(path)


if __name__ == '__main__':
    tf.test.main()
