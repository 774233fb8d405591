"""Tests for extreme_mem/experiments/sweep_experiment.py: a toy paper experiment in a few lines
runs a 2-point sweep (in this process) and writes its report through the hooks."""

import json
import os

import gin
import tensorflow as tf

from extreme_mem import config, registry
from extreme_mem.experiments import sweep_experiment
from tests import testing

TINY = ['experiments.Experiment.dataset = "digits"', 'data.Digits.train_size = 60', 'data.Digits.test_size = 30',
        'models.mlp.width = 8', 'train.Trainer.num_steps = 4', 'train.Trainer.eval_every = 2',
        'train.Trainer.batch_size = 20', 'train.Trainer.log_every = 2']


# The whole toy paper experiment: 20 lines.
@gin.configurable(module='experiments', denylist=['workdir', 'seed', 'overwrite'])
class ToyWidthSweep(sweep_experiment.SweepExperiment):
    """Test accuracy against MLP width."""

    name = 'toy_width_sweep'
    paper = 'a toy paper'
    default_quantities = {'test_loss': ['test/loss']}
    axis_labels = {'models.mlp.width': 'width'}

    def run_row(self, spec, record):
        return {'twice width': 2 * spec.values['models.mlp.width']}

    def summarize(self, results):
        summary = super().summarize(results)
        summary['widest'] = max(r['width'] for r in summary['runs'])
        return summary

    def report_sections(self, summary):
        return ['## Toy', '', f'Widest: {summary["widest"]}.']


class SweepExperimentTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_toy_paper_experiment_runs_and_reports(self):
        workdir = self.create_tempdir().full_path
        config.parse_gin([], TINY, finalize=False)
        experiment = ToyWidthSweep(workdir=workdir, figure='Toy figure', sweep={'models.mlp.width': [4, 16]},
                                   in_process=True)
        summary = experiment.run()
        self.assertEqual(gin.query_parameter('models.mlp.width'), 8)  # the sweep's own config is back
        self.assertEqual(config.parsed_files_and_bindings(), ((), tuple(TINY)))
        self.assertTrue(summary['ok'])
        self.assertEqual(summary['status_line'], '2 done, 0 failed, 0 diverged')
        rows = json.load(open(os.path.join(workdir, 'report.json')))['runs']
        self.assertEqual([(r['width'], r['twice width'], r['status']) for r in rows], [(4, 8, 'done'), (16, 32, 'done')])
        for row, name in zip(rows, ('models.mlp.width=4', 'models.mlp.width=16')):
            record = json.load(open(os.path.join(workdir, 'runs', name.split('.')[-1], 'results.json')))
            self.assertEqual(row['final test_loss'], record['final']['test/loss'])  # table = the runs' own files
            self.assertEqual(record['config']['mlp.width'], name.split('=')[-1])
        text = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('Widest: 16.', text)
        self.assertIn('](figures/test_accuracy.png)', text)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'train_accuracy.png')))

    def test_runs_are_launched_with_the_parsed_files_and_bindings(self):
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'], ['INIT_SCALE = 3.0'], finalize=False)
        files, bindings = config.parsed_files_and_bindings()
        self.assertEqual(files, (str(config.REPO_ROOT / 'gin/mehta2021/fig1a_sin_digits.gin'),))
        self.assertEqual(bindings, ('INIT_SCALE = 3.0',))

    def test_bad_knobs_fail_naming_them(self):
        with self.assertRaisesRegex(config.ConfigError, 'parallel must be an integer >= 1, got 0'):
            ToyWidthSweep(workdir=self.create_tempdir().full_path, parallel=0)
        with self.assertRaisesRegex(ValueError, 'needs a binding key and at least one value'):
            ToyWidthSweep(workdir=self.create_tempdir().full_path, sweep={'A': []})
        self.assertNotIn('toy_width_sweep', registry.EXPERIMENTS)


if __name__ == '__main__':
    tf.test.main()
