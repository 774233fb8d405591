"""End to end (slow, ~3 min on 2 cores): gin/mehta2021/fig1a_sin_digits.gin at σ ∈ {1e-2, 1, 10}
for sin and ReLU reproduces the shape of Mehta et al. (ICLR 2021) Figures 1a and 4 on digits."""

import os

import pytest
import tensorflow as tf

from extreme_mem import config
from extreme_mem.experiments import mehta2021_extreme_memorization as em
from tests import testing

SIGMAS = (0.01, 1.0, 10.0)


@pytest.mark.slow
class Fig1aDigitsTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_paper_shape(self):
        workdir = self.create_tempdir().full_path
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'],
                         [f'experiments.ExtremeMemorization.sweep = {{"INIT_SCALE": {list(SIGMAS)}}}',
                          'experiments.ExtremeMemorization.in_process = True'], finalize=False)
        summary = em.ExtremeMemorization(workdir=workdir, seed=0).run()
        runs = {(r['variant'], r['σ']): r for r in summary['runs']}
        self.assertEqual({r['status'] for r in runs.values()}, {'done'})
        for sigma in SIGMAS:
            sin = runs['sin', sigma]
            if sigma >= 1:  # extreme memorization: fits the training set, chance on the test set
                self.assertGreaterEqual(sin['train acc'], 0.99, sin)
                self.assertLessEqual(sin['test acc'], 0.2, sin)
            else:
                self.assertGreaterEqual(sin['test acc'], 0.9, sin)
        drops = summary['test_accuracy_drop']
        self.assertLess(drops['relu']['drop'], 0.5 * drops['sin']['drop'])  # ReLU loses far less
        # 3 σ per variant are too few for a rank correlation (n >= 5); pooled over both variants n = 6.
        self.assertGreater(summary['spearman']['rep_alignment_hidden']['all runs']['rho'], 0)
        report = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('`rep_alignment_hidden`, all runs: Spearman ρ =', report)
        self.assertIn('`grad_alignment_hidden`, sin: too few runs', report)
        self.assertIn('**relu** loses far less test accuracy than **sin**', report)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'test_accuracy_sin.png')))


if __name__ == '__main__':
    tf.test.main()
