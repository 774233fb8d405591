"""Tests for extreme_mem/experiments/zhang2020_identity_crisis.py: run specs, report on fake records.

`write_fake_sweep` (also used by the colab test) writes results.json files of a small fake sweep
and its report, without training.
"""

import json
import os

import gin
import numpy as np
import tensorflow as tf

from extreme_mem import config, registry
from extreme_mem.experiments import zhang2020_identity_crisis as zc
from extreme_mem.metrics import identity_correlation as ic
from tests import testing

FAKE_ARCHITECTURES = {'linear': [1], 'cnn': [1, 3], 'fcn': [2]}


def _fake_record(arch: str, depth: int) -> dict:
    """A finished run whose identity correlation falls with depth (CNNs) and constant rises (FCNs)."""
    final = {'train/loss': 0.01 * depth, 'test/loss': 0.1}
    for rho in ic.RHOS:
        ident = (1.0 / depth if arch == 'cnn' else 0.0) * (1 - rho) + rho
        const = (0.9 if arch == 'fcn' else 0.0) * (1 - rho) + rho
        final[f'eval/identity_correlation/{ic.rho_key(rho)}'] = ident
        final[f'eval/constant_correlation/{ic.rho_key(rho)}'] = const
    if arch == 'linear':
        final['eval/theorem1_relative_error'] = 2e-4
    history = [{'step': 0, 'train/loss': 1.0}, {'step': 10, **final}]
    return {'status': 'done', 'final': final, 'history': history, 'final_step': 10}


def write_fake_sweep(workdir: str) -> dict:
    """Fake results.json per run of `FAKE_ARCHITECTURES` and the experiment's report; returns report.json."""
    gin.clear_config()
    experiment = zc.IdentityCrisis(workdir=workdir, architectures=FAKE_ARCHITECTURES)
    results = []
    for spec in experiment.specs():
        record = _fake_record(spec.values['architecture'], spec.values['depth'])
        os.makedirs(experiment.run_dir(spec), exist_ok=True)
        with open(experiment.run_dir(spec) / 'results.json', 'w') as f:
            json.dump(record, f)
        results.append((spec, record))
    experiment.write_report(results)
    with open(os.path.join(workdir, 'report.json')) as f:
        return json.load(f)


class IdentityCrisisTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_specs_per_architecture_and_depth(self):
        experiment = zc.IdentityCrisis(workdir=self.create_tempdir().full_path, train_class=7, train_index=3,
                                       architectures={'linear': [1], 'cnn': [1, 10]}, budgets={'cnn': {10: 0.25}})
        specs = experiment.specs()
        self.assertEqual([s.name for s in specs], ['linear,depth=1', 'cnn,depth=1', 'cnn,depth=10'])
        self.assertEqual(specs[2].values, {'architecture': 'cnn', 'depth': 10})
        bindings = specs[2].bindings
        self.assertIn("experiments.Experiment.dataset = 'identity_image'", bindings)
        self.assertIn("data.IdentityImage.source = 'sample_photos'", bindings)
        self.assertIn('data.IdentityImage.train_class = 7', bindings)
        self.assertIn('data.IdentityImage.train_index = 3', bindings)
        self.assertIn("experiments.Experiment.model = 'identity_cnn'", bindings)
        self.assertIn('models.identity_cnn.depth = 10', bindings)
        self.assertIn("experiments.Experiment.loss = 'mse'", bindings)
        self.assertIn('train.Trainer.num_steps = 2500', bindings)  # 0.25 of the trainer's default 10,000
        self.assertNotIn('train.Trainer.num_steps = 2500', specs[1].bindings)
        self.assertIn("experiments.Experiment.metrics = ['identity_correlation', 'theorem1_error']",
                      specs[0].bindings)

    def test_configured_dataset_becomes_the_source(self):
        config.parse_gin([], ["experiments.Experiment.dataset = 'npz'", 'NUM = 400',
                              'train.Trainer.num_steps = %NUM'], finalize=False)
        experiment = zc.IdentityCrisis(workdir=self.create_tempdir().full_path, architectures={'fcn': [3]},
                                       budgets={'fcn': 0.5})
        spec = experiment.specs()[0]
        self.assertIn("data.IdentityImage.source = 'npz'", spec.bindings)
        self.assertIn('train.Trainer.num_steps = 200', spec.bindings)

    def test_variants_cross_architectures(self):
        experiment = zc.IdentityCrisis(workdir=self.create_tempdir().full_path, architectures={'cnn': [5]},
                                       variants={'k5': {'models.identity_cnn.kernel_size': 5},
                                                 'k13': {'models.identity_cnn.kernel_size': 13}})
        specs = experiment.specs()
        self.assertEqual([s.name for s in specs], ['cnn,depth=5,k5', 'cnn,depth=5,k13'])
        self.assertEqual(specs[1].bindings[-1], 'models.identity_cnn.kernel_size = 13')  # variant binding last
        self.assertEqual(specs[1].values['variant'], 'k13')

    def test_depth_cap(self):
        experiment = zc.IdentityCrisis(workdir=self.create_tempdir().full_path, depth_cap=2,
                                       architectures={'cnn': [1, 3, 5], 'fcn': [6]})
        self.assertEqual([s.name for s in experiment.specs()], ['cnn,depth=1', 'cnn,depth=2', 'fcn,depth=2'])

    def test_unknown_architecture(self):
        with self.assertRaisesRegex(config.ConfigError, r"Unknown architectures \['resnet'\]; valid"):
            zc.IdentityCrisis(workdir=self.create_tempdir().full_path, architectures={'resnet': [1]})

    def test_report_json_rows(self):
        workdir = self.create_tempdir().full_path
        report = write_fake_sweep(workdir)
        rows = report['runs']
        self.assertLen(rows, 4)
        keys = [f'{r:g}' for r in np.linspace(0, 1, 11).round(1)]
        for row in rows:
            for key in ('architecture', 'depth', 'status', 'identity_correlation', 'constant_correlation'):
                self.assertIn(key, row)
            self.assertEqual(list(row['identity_correlation']), keys)
            self.assertEqual(row['status'], 'done')
        cnn3 = next(r for r in rows if r['architecture'] == 'cnn' and r['depth'] == 3)
        self.assertAllClose(cnn3['identity_correlation']['0'], 1 / 3)
        self.assertAllClose(cnn3['identity_correlation']['1'], 1.0)
        self.assertEqual(rows[0]['theorem1_relative_error'], 2e-4)
        self.assertEqual(report['training_image'], {'dataset': 'sample_photos', 'class': 0, 'index': 0})
        text = open(os.path.join(workdir, 'report.md')).read()
        self.assertIn('## Fig. 4: correlation with the identity function', text)
        self.assertIn('| cnn,depth=3 | 0.3333 | 0.4 |', text)  # Fig. 4 identity table
        self.assertIn('| cnn,depth=3 | cnn | 3 | done | 10 | 0.03 | 0.33 0.40 0.47', text)  # runs table
        for name in ('fig4_cnn.png', 'fig4_fcn.png', 'fig8_mean_vs_depth.png'):
            self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', name)), name)

    def test_registered(self):
        self.assertIs(registry.EXPERIMENTS.get('identity_crisis'), zc.IdentityCrisis)


if __name__ == '__main__':
    tf.test.main()
