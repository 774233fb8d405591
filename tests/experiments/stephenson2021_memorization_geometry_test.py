"""Tests for extreme_mem/experiments/stephenson2021_memorization_geometry.py.

The end-to-end test trains two tiny sphere runs in this process and checks report.json against the
runs' own results.json files (an independent record: the trainer's evaluations), e.g. rewinding
any layer to the final epoch must reproduce the final train and test accuracy the trainer logged.
`write_fake_results` makes a small results directory for the colab test without training.
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from extreme_mem import config, registry
from extreme_mem import registry_imports  # noqa: F401  pylint: disable=unused-import
from extreme_mem.analysis import memorization
from extreme_mem.experiments import stephenson2021_memorization_geometry as smg
from extreme_mem.experiments import sweep_experiment
from tests import testing

GIN = 'gin/stephenson2021/spheres_quick.gin'
TINY = list(smg.MemorizationGeometry.smoke_bindings) + [
    'train.Trainer.num_steps = 12', 'train.Trainer.eval_every = 3', 'train.Trainer.checkpoint_every = 3',
    'train.Trainer.log_every = 3', 'train.Trainer.batch_size = 50', 'train.Trainer.learning_rate = 0.05',
    'STEPS_PER_EPOCH = 3', 'experiments.MemorizationGeometry.steps_per_epoch = 3', 'models.mlp.width = 32',
    'experiments.MemorizationGeometry.seeds = [0, 1]', 'experiments.MemorizationGeometry.in_process = True',
    "experiments.Experiment.writers = []"]
LAYERS = ['hidden1', 'hidden2', 'hidden3', 'hidden4', 'hidden5']


def write_fake_results(workdir: str) -> None:
    """A results directory in the layout the experiment writes: report.json, sweep.json, runs/*/results.json."""
    rng = np.random.default_rng(0)
    runs = []
    for seed in (0, 1, 2):
        history = []
        for epoch in range(9):
            entry = {'step': 10 * epoch, 'train/accuracy': min(1.0, 0.1 + 0.12 * epoch),
                     'test/accuracy': 0.3 - 0.01 * abs(epoch - 2),
                     'train/accuracy/unpermuted': min(1.0, 0.2 + 0.15 * epoch),
                     'train/accuracy/permuted': min(1.0, 0.1 + 0.1 * max(epoch - 3, 0) ** 1.5),
                     'train/accuracy/restored': 0.25 - 0.02 * epoch}
            for layer in LAYERS + ['logits']:
                for subset in ('all', 'unpermuted', 'permuted'):
                    for part in ('grad_norm', 'grad_norm_dep', 'grad_norm_ind'):
                        entry[f'train/{part}/{subset}/{layer}'] = float(rng.uniform(0.1, 1.0))
            history.append(entry)
        record = {'status': 'done', 'final': dict(history[-1]), 'history': history, 'final_step': 80}
        record['final'].pop('step')
        os.makedirs(os.path.join(workdir, 'runs', f'seed={seed}'), exist_ok=True)
        with open(os.path.join(workdir, 'runs', f'seed={seed}', 'results.json'), 'w') as f:
            json.dump(record, f)
        geo = {st: {s: {l: {'capacity': float(rng.uniform(0.04, 0.3)), 'radius': 1.0, 'dimension': 5.0,
                            'center_correlation': 0.2} for l in LAYERS} for s in memorization.SUBSETS}
               for st in memorization.STAGES}
        runs.append({'layers': LAYERS, 'epochs': {'init': 0, 'best': 2, 'final': 8},
                     'subset_accuracy': {st: {s: float(rng.uniform()) for s in memorization.SUBSETS}
                                         for st in memorization.STAGES},
                     'mftma': geo, 'rewinding': [{'layer': l, 'epoch': e, 'train_acc': 0.5, 'test_acc': 0.2,
                                                  'unpermuted_acc': 0.6, 'permuted_acc': 0.4, 'restored_acc': 0.1}
                                                 for l in LAYERS + ['logits'] for e in range(0, 9, 2)]})
    summary = {'figure': 'fake spheres', 'runs': [{'run': f'seed={s}', 'seed': s, 'status': 'done'} for s in range(3)],
               **memorization.aggregate(runs, examples_per_class=50), 'steps_per_epoch': 10, 'figures': [],
               'notes': []}
    with open(os.path.join(workdir, 'report.json'), 'w') as f:
        json.dump(sweep_experiment.jsonable(summary), f)
    with open(os.path.join(workdir, 'sweep.json'), 'w') as f:
        json.dump([{'run': f'seed={s}', 'seed': s, 'status': 'done'} for s in range(3)], f)


class KnobsTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_bad_knob_names_the_value(self):
        config.parse_gin([GIN], finalize=False)
        with self.assertRaisesRegex(config.ConfigError, 'steps_per_epoch must be an integer >= 1, got 0'):
            smg.MemorizationGeometry(workdir=self.create_tempdir().full_path, steps_per_epoch=0)

    def test_registered_and_specs_are_the_seeds(self):
        config.parse_gin([GIN], finalize=False)
        self.assertIs(registry.EXPERIMENTS.get('memorization_geometry'), smg.MemorizationGeometry)
        exp = smg.MemorizationGeometry(workdir=self.create_tempdir().full_path)
        self.assertEqual([s.seed for s in exp.specs()], [0, 1, 2])


@pytest.mark.slow
class EndToEndTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_tiny_sphere_runs(self):
        workdir = self.create_tempdir().full_path
        config.parse_gin([GIN], TINY, finalize=False)
        registry.EXPERIMENTS.get('memorization_geometry')(workdir=workdir, seed=0).run()
        report = json.load(open(os.path.join(workdir, 'report.json')))
        for key in ('layers', 'best_epoch', 'lower_bound', 'subset_accuracy', 'mftma', 'rewinding'):
            self.assertIn(key, report)
        self.assertEqual(report['layers'], LAYERS)
        self.assertAllClose(report['lower_bound'], 2 / 4)  # M = 4 in the tiny setting
        records = [json.load(open(os.path.join(workdir, 'runs', f'seed={s}', 'results.json'))) for s in (0, 1)]
        # Best epoch: the earliest maximum of the logged test accuracy (every evaluation has a checkpoint).
        best = []
        for r in records:
            steps, acc = memorization.series(r, 'test/accuracy')
            best.append(steps[int(np.argmax(acc))] / 3)
        self.assertEqual(report['best_epochs'], best)
        final_test = np.mean([memorization.series(r, 'test/accuracy')[1][-1] for r in records])
        self.assertAllClose(report['subset_accuracy']['final']['test'], final_test)
        for stage in memorization.STAGES:
            self.assertEqual(set(report['mftma'][stage]), set(memorization.SUBSETS))
            cell = report['mftma'][stage]['test']['hidden5']  # smoke bindings: MFTMA on the last layer only
            self.assertEqual(set(cell), {'capacity', 'radius', 'dimension', 'center_correlation', 'capacity_ci99'})
            self.assertGreater(cell['capacity'], 0.0)
            self.assertTrue(math.isfinite(cell['capacity_ci99']))
        # Rewinding (first seed): any layer put back to its final-epoch weights is the final model.
        final_epoch = records[0]['final_step'] // 3
        rows = [r for r in report['rewinding'] if r['epoch'] == final_epoch]
        self.assertLen(rows, 6)
        for row in rows:
            self.assertEqual(set(row), {'layer', 'epoch', 'train_acc', 'test_acc'})
            self.assertAllClose(row['train_acc'], records[0]['final']['train/accuracy'], atol=1e-6)
            self.assertAllClose(row['test_acc'], records[0]['final']['test/accuracy'], atol=1e-6)
        figures = {os.path.basename(p) for p in report['figures']}
        self.assertContainsSubset({'subset_accuracy.png', 'mftma_best.png', 'mftma_final.png', 'rewinding.png',
                                   'gradients.png', 'embedding.png'}, figures)


if __name__ == '__main__':
    tf.test.main()
