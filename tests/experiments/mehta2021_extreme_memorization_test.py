"""Tests for extreme_mem/experiments/mehta2021_extreme_memorization.py: sweep expansion, gin
hand-off to the runs, and the report built from results.json records (no training here)."""

import json
import math
import os
from unittest import mock

import numpy as np
from absl.testing import absltest, parameterized
from scipy import stats

from extreme_mem import config, registry
from extreme_mem.experiments import mehta2021_extreme_memorization as em
from extreme_mem.experiments import sweep
from extreme_mem.summaries import report as report_lib
from tests import testing

SIGMAS = (0.001, 0.01, 0.1, 1.0, 10.0)


def sin_test_acc(sigma: float) -> float:
    return 0.95 if sigma < 0.1 else 0.1 + 0.01 * (sigma < 5)


def relu_test_acc(sigma: float) -> float:
    return 0.95 - 0.05 * math.log10(sigma / 0.01) / 3


def rank_correlation(x, y) -> float:
    """Reference Spearman ρ: Pearson correlation of average ranks (ties share their mean rank)."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def fake_record(test_acc: float, omega: float, steps: int = 300, logged=('grad', 'rep', 'norm')) -> dict:
    """A results.json record whose test accuracy rises to `test_acc` and alignment decays to `omega`."""
    history = []
    for step in range(0, steps + 1, 100):
        frac = step / steps
        entry = {'step': step, 'train/accuracy': 0.1 + 0.9 * frac, 'test/accuracy': 0.1 + (test_acc - 0.1) * frac,
                 'train/loss': 2.3 * (1 - frac), 'test/loss': 2.3}
        if 'grad' in logged:
            entry.update({'train/grad_alignment/hidden': omega + (1 - frac) * 0.1,
                          'train/grad_alignment/logits': omega, 'train/grad_alignment/logits_grad': 0.5})
        if 'rep' in logged:
            entry['train/rep_alignment/hidden'] = omega * 0.9
        if 'norm' in logged:
            entry['train/relative_grad_norm/hidden'] = 1e-3
        history.append(entry)
    final = {k: history[-1][k] for k in ('train/accuracy', 'test/accuracy', 'train/loss', 'test/loss')}
    return {'experiment': 'single_run', 'config': {}, 'status': 'done', 'final': final, 'history': history,
            'final_step': steps}


def write_fake_sweep(workdir: str, variants=('sin', 'relu'), sigmas=SIGMAS) -> list:
    """Writes `runs/<name>/results.json` for a sin/relu σ sweep shaped like Fig. 1a; returns [(spec, record)]."""
    specs = sweep.make_specs({'INIT_SCALE': list(sigmas)}, {v: {} for v in variants})
    results = []
    for spec in specs:
        sigma = spec.values['INIT_SCALE']
        if spec.values['variant'] == 'sin':
            record = fake_record(sin_test_acc(sigma), 0.6 / (1 + 100 * sigma))
        else:
            record = fake_record(relu_test_acc(sigma), 0.5 / (1 + sigma))
        directory = sweep.run_dir(workdir, spec)
        directory.mkdir(parents=True)
        (directory / 'results.json').write_text(json.dumps(record))
        results.append((spec, record))
    sweep.aggregate(results, workdir)
    return results


class ExpandAxesTest(parameterized.TestCase):

    def test_grid_and_zipped_axes(self):
        points = sweep.expand_axes({'INIT_SCALE, losses.hinge.margin': [(0.001, 1.0), (0.01, 10.0)],
                                 'models.mlp.width': [8, 16]})
        self.assertEqual(points, [
            {'INIT_SCALE': 0.001, 'losses.hinge.margin': 1.0, 'models.mlp.width': 8},
            {'INIT_SCALE': 0.001, 'losses.hinge.margin': 1.0, 'models.mlp.width': 16},
            {'INIT_SCALE': 0.01, 'losses.hinge.margin': 10.0, 'models.mlp.width': 8},
            {'INIT_SCALE': 0.01, 'losses.hinge.margin': 10.0, 'models.mlp.width': 16},
        ])
        self.assertEqual(sweep.expand_axes(None), [{}])

    @parameterized.parameters(({'A': []},), ({'A, B': [(1, 2, 3)]},), ({'A, B': [1]},))
    def test_bad_axes(self, axes):
        with self.assertRaises(ValueError):
            sweep.expand_axes(axes)

    def test_specs_names_values_and_binding_order(self):
        specs = sweep.make_specs({'INIT_SCALE': [0.01, 1.0]},
                              {'sin': {}, 'relu': {'models.mlp.activation': 'relu', 'INIT_SCALE': 5.0}})
        self.assertEqual([s.name for s in specs],
                         ['sin,INIT_SCALE=0.01', 'sin,INIT_SCALE=1', 'relu,INIT_SCALE=0.01', 'relu,INIT_SCALE=1'])
        self.assertEqual(specs[2].values, {'variant': 'relu', 'INIT_SCALE': 0.01})
        # Sweep values come after (and so override) variant bindings.
        self.assertEqual(specs[2].bindings, ("models.mlp.activation = 'relu'", 'INIT_SCALE = 0.01'))

    def test_without_variants_names_match_launch_sweep(self):
        specs = sweep.make_specs({'INIT_SCALE': [0.001, 10.0]})
        self.assertEqual([s.name for s in specs], [s.name for s in sweep.grid({'INIT_SCALE': [0.001, 10.0]})])
        self.assertEqual(sweep.make_specs(None, {'a b/c': {'X': 1}})[0].name, 'a_b_c')


class GinHandOffTest(testing.GinCleanMixin, absltest.TestCase):

    def test_registered_and_configurable(self):
        self.assertIs(registry.EXPERIMENTS.get('extreme_memorization'), em.ExtremeMemorization)
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'], finalize=False)
        experiment = em.ExtremeMemorization(workdir=self.create_tempdir().full_path)
        self.assertLen(experiment.specs(), 10)
        self.assertEqual(experiment.specs()[-1].bindings, ("models.mlp.activation = 'relu'", 'INIT_SCALE = 10.0'))


class ReportTest(testing.GinCleanMixin, absltest.TestCase):

    def _experiment(self, workdir, **kwargs):
        kwargs.setdefault('sweep', {'INIT_SCALE': list(SIGMAS)})
        kwargs.setdefault('variants', {'sin': {}, 'relu': {'models.mlp.activation': 'relu'}})
        return em.ExtremeMemorization(workdir=workdir, figure='Fig. 1a (fake)', **kwargs)

    def test_report_tables_correlations_and_figures(self):
        workdir = self.create_tempdir().full_path
        results = write_fake_sweep(workdir)
        with mock.patch.object(report_lib, 'plot_curves', wraps=report_lib.plot_curves) as curves:
            summary = self._experiment(workdir).write_report(results)
        text = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('| sin,INIT_SCALE=10 | sin | 10 | done | 300 |', text)
        rho = summary['spearman']['grad_alignment_hidden']['sin']
        self.assertEqual(rho['n'], 5)
        # Best test accuracy vs final Ω of the sin runs, from the fake records' own formulas.
        grad_omegas = [0.6 / (1 + 100 * s) for s in SIGMAS]  # the final train/grad_alignment/hidden
        self.assertAlmostEqual(rho['rho'], rank_correlation([sin_test_acc(s) for s in SIGMAS], grad_omegas))
        self.assertIn(f'`grad_alignment_hidden`, sin: Spearman ρ = {rho["rho"]:.3f}', text)
        self.assertIn('`grad_alignment_hidden`, all runs: Spearman ρ =', text)
        # Final test accuracy vs σ: one line per variant through the runs' final test accuracies.
        (groups, path), kwargs = curves.call_args
        self.assertEqual(sorted(groups), ['relu', 'sin'])
        for variant, acc in (('sin', sin_test_acc), ('relu', relu_test_acc)):
            xs, ys = zip(*sorted(groups[variant]))
            self.assertEqual(xs, SIGMAS)
            np.testing.assert_allclose(ys, [acc(s) for s in SIGMAS])
        self.assertEqual(os.path.basename(path), 'final_test_accuracy_vs_sigma.png')
        self.assertTrue(kwargs['logx'])
        self.assertIn('σ', kwargs['xlabel'])
        self.assertIn('](figures/final_test_accuracy_vs_sigma.png)', text)
        self.assertNotIn('Ω^r', text)
        self.assertIn('Hidden layer activations: in-class alignment Ωʳ', text)
        self.assertIn('**relu** loses far less test accuracy than **sin**', text)
        self.assertIn('| σ | test acc: sin | test acc: relu |', text)
        figures = sorted(os.listdir(os.path.join(workdir, 'figures')))
        self.assertIn('test_accuracy_sin.png', figures)
        self.assertIn('rep_alignment_hidden_relu.png', figures)
        self.assertIn('best_test_accuracy_vs_grad_alignment_hidden.png', figures)
        self.assertIn('](figures/test_accuracy_sin.png)', text)
        with open(os.path.join(workdir, 'report.json')) as f:  # strict JSON: no NaN
            saved = json.load(f, parse_constant=lambda c: self.fail(f'non-JSON constant {c}'))
        self.assertLen(saved['runs'], 10)

    def test_missing_tags_and_runs_are_notes_not_errors(self):
        workdir = self.create_tempdir().full_path
        specs = sweep.make_specs({'INIT_SCALE': [0.01, 1.0, 10.0]})
        results = [(specs[0], fake_record(0.9, 0.5, logged=())), (specs[1], None),
                   (specs[2], {'status': 'failed', 'final': {}, 'history': []})]
        experiment = self._experiment(workdir, sweep={'INIT_SCALE': [0.01, 1.0, 10.0]}, variants=None)
        summary = experiment.write_report(results)
        text = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('Panel `grad_alignment_hidden` skipped: no run logged `train/grad_alignment/hidden`', text)
        self.assertIn('`grad_alignment_hidden`, all runs: too few runs (n = 0 with both values; '
                      'ρ is reported from n = 5)', text)
        self.assertEqual([r['status'] for r in summary['runs']], ['done', 'missing', 'failed'])
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'test_accuracy.png')))

    def test_spearman_needs_five_runs(self):
        workdir = self.create_tempdir().full_path
        results = write_fake_sweep(workdir, sigmas=(0.01, 1.0, 10.0))
        summary = self._experiment(workdir, sweep={'INIT_SCALE': [0.01, 1.0, 10.0]}).write_report(results)
        text = open(os.path.join(workdir, 'report.md')).read()
        self.assertIsNone(summary['spearman']['grad_alignment_hidden']['sin'])
        self.assertEqual(summary['spearman_n']['grad_alignment_hidden']['sin'], 3)
        self.assertIn('`grad_alignment_hidden`, sin: too few runs (n = 3 with both values; '
                      'ρ is reported from n = 5).', text)
        self.assertNotIn('sin: Spearman ρ', text)
        all_runs = summary['spearman']['grad_alignment_hidden']['all runs']  # 6 runs: reported
        self.assertEqual(all_runs['n'], 6)
        self.assertIn(f'all runs: Spearman ρ = {all_runs["rho"]:.3f}', text)

    def test_alternative_tags_share_a_panel(self):
        workdir = self.create_tempdir().full_path
        specs = sweep.make_specs(None, {'mlp': {}, 'convnet': {}})
        conv = fake_record(0.98, 0.7, logged=())
        for h in conv['history']:
            h['train/rep_alignment/fc'] = 0.7
        results = [(specs[0], fake_record(0.9, 0.5)), (specs[1], conv)]
        last_hidden = ['train/rep_alignment/hidden', 'train/rep_alignment/fc']
        summary = self._experiment(workdir, sweep=None, variants={'mlp': {}, 'convnet': {}},
                                   panels={'rep': last_hidden}, omegas={'rep': last_hidden}).write_report(results)
        self.assertEqual([r['final rep'] for r in summary['runs']], [0.45, 0.7])
        self.assertEqual(summary['figures'], [os.path.join(workdir, 'figures', 'rep.png'),
                                              os.path.join(workdir, 'figures', 'best_test_accuracy_vs_rep.png')])


if __name__ == '__main__':
    absltest.main()
