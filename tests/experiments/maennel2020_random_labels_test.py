"""Tests for the random_label_transfer experiment: specs, the `transferred` model, the summary.

`write_fake_results` (also used by the colab test) writes a tiny fake sweep: results.json files
with known accuracy curves and misalignment / f(σ) values, so every number of the summary has a
closed-form or numpy oracle here.
"""

import json
import os
import pathlib

import gin
import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import absltest

from extreme_mem import config
from extreme_mem import registry_imports  # noqa: F401  (registers every plugin)
from extreme_mem.experiments import maennel2020_random_labels as maennel
from extreme_mem.experiments import sweep as sweep_lib
from extreme_mem.models import simple_cnn, transfer

REPO = pathlib.Path(__file__).resolve().parents[2]
ARMS = list(transfer.ARMS)
AUC_CURVES = {  # arm -> accuracy at steps 0, 10, 20 (AUC = trapezoid / 20)
    'scratch': [0.1, 0.5, 0.7], 'pretrained_conv': [0.1, 0.6, 0.8], 'pretrained_conv_dense': [0.1, 0.4, 0.6],
    'no_rescale': [0.1, 0.7, 0.9], 'covariance_init': [0.1, 0.55, 0.75]}


def make_experiment(workdir: str) -> maennel.RandomLabelTransfer:
    return maennel.RandomLabelTransfer(workdir=workdir, seeds=[0, 1], table1_layers=[0, 2],
                                       table1_iterations=[10, 20], fsigma_widths=[8], fsigma_seeds=[0, 1],
                                       in_process=True)


def _record(history, status='done'):
    final = {}
    for h in history:
        final.update({k: v for k, v in h.items() if k != 'step'})
    return {'status': status, 'final': final, 'final_step': history[-1]['step'], 'history': history}


def write_fake_results(workdir: str) -> maennel.RandomLabelTransfer:
    """Fake results.json for every spec of `make_experiment`; writes the report; returns the experiment."""
    gin.clear_config()
    exp = make_experiment(workdir)
    results = []
    for spec in exp._specs:  # pylint: disable=protected-access
        role, seed = spec.values['role'], spec.values['seed']
        steps = [0, 10, 20]
        if role == 'downstream':
            acc = np.array(AUC_CURVES[spec.values['arm']]) + 0.01 * seed
            history = [{'step': s, 'train/accuracy': a, 'test/accuracy': a / 2} for s, a in zip(steps, acc)]
            if spec.values['arm'] == 'scratch':
                for h, m in zip(history, (0.1, 0.09, 0.08)):
                    h.update({'eval/misalignment/data/conv1': m, 'eval/misalignment/random_mean/conv1': 0.15 + 0.2 * h['step'] / 20,
                              'eval/misalignment/random_std/conv1': 0.01})
        elif role == 'upstream':
            history = [{'step': s, 'train/accuracy': 0.1 + 0.04 * s, 'eval/misalignment/data/conv1': 0.1 - 0.001 * s,
                        'eval/misalignment/random_mean/conv1': 0.15 + 0.02 * s,
                        'eval/misalignment/random_std/conv1': 0.01 + 0.001 * s,
                        'eval/dead_fraction/fc': 0.01 * s, 'eval/inactive_fraction/fc': 0.5 + 0.01 * s}
                       for s in steps]
            history[-1].update({'eval/transfer_sigma/conv1/0': 2.0, 'eval/transfer_sigma/conv1/1': 1.0,
                                'eval/transfer_tau/conv1/0': 0.3 + 0.1 * seed, 'eval/transfer_tau/conv1/1': 0.5})
        elif role == 'table1':
            k = spec.values['sampled_layers']
            history = [{'step': s, 'train/accuracy': 0.1 + 0.01 * s + 0.05 * k, 'test/accuracy': 0.1 + 0.01 * s + 0.04 * k}
                       for s in steps]
        else:  # fsigma: σ = (3, 2, 1), τ = (1, 2, 0.5) + 0.1 * seed
            tau = np.array([1.0, 2.0, 0.5]) + 0.1 * seed
            final = {**{f'eval/transfer_sigma/hidden1/{i}': v for i, v in enumerate([3.0, 2.0, 1.0])},
                     **{f'eval/transfer_tau/hidden1/{i}': v for i, v in enumerate(tau)}}
            history = [{'step': 0, 'train/accuracy': 0.1}, {'step': 20, 'train/accuracy': 0.9, **final}]
        record = _record(history)
        directory = sweep_lib.run_dir(workdir, spec)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / 'results.json').write_text(json.dumps(record))
        results.append((spec, record))
    sweep_lib.aggregate(results, workdir)
    exp.write_report(results)
    return exp


class SpecsTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        gin.clear_config()

    def test_groups_roles_and_bindings(self):
        exp = make_experiment(self.create_tempdir().full_path)
        names = [s.name for s in exp._specs]  # pylint: disable=protected-access
        self.assertLen(names, 2 * (1 + 5) + 2 * 2 + 2)
        self.assertIn('downstream,arm=covariance_init,seed=1', names)
        self.assertIn('table1,layers=2,seed=0', names)
        self.assertIn('fsigma,width=8,seed=1', names)
        down = next(s for s in exp._specs if s.name == 'downstream,arm=no_rescale,seed=1')  # pylint: disable=protected-access
        self.assertIn("models.transferred.arm = 'no_rescale'", down.bindings)
        self.assertIn('data.ArraySource.train_part = 1', down.bindings)
        up_dir = str(sweep_lib.run_dir(exp.workdir, next(s for s in exp._specs if s.name == 'upstream,seed=1')))  # pylint: disable=protected-access
        self.assertIn(f'models.transferred.upstream_dir = {up_dir!r}', down.bindings)

    def test_bad_knobs(self):
        with self.assertRaisesRegex(ValueError, "Unknown transfer arm 'finetune'"):
            maennel.RandomLabelTransfer(workdir=self.create_tempdir().full_path, arms=['finetune'])
        with self.assertRaisesRegex(ValueError, 'has no runs'):
            maennel.RandomLabelTransfer(workdir=self.create_tempdir().full_path, arms=[])


class TransferredModelTest(tf.test.TestCase):

    def test_pretrained_conv_from_a_trainer_style_checkpoint(self):
        updir = self.create_tempdir().full_path
        kwargs = dict(num_conv_layers=1, num_filters=6, num_units=5)
        with gin.unlock_config():
            gin.clear_config()
            gin.bind_parameter('models.simple_cnn.num_filters', 6)
            gin.bind_parameter('models.simple_cnn.num_units', 5)
        try:
            upstream = simple_cnn.simple_cnn((5, 5, 1), 7, seed=3, **kwargs)
            init_kernel = upstream.get_layer('conv1').get_weights()[0].copy()
            rng = np.random.default_rng(0)
            trained = [rng.normal(scale=2.0, size=w.shape).astype(np.float32) for w in upstream.get_weights()]
            upstream.set_weights(trained)
            optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
            optimizer.build(upstream.trainable_variables)  # the trainer's checkpoint layout
            tf.train.Checkpoint(model=upstream, optimizer=optimizer).save(os.path.join(updir, 'checkpoints', 'ckpt'))
            model = maennel.transferred((5, 5, 1), 4, arm='pretrained_conv', upstream_dir=updir, upstream_outputs=7,
                                        upstream_seed=3, seed=0)
        finally:
            gin.clear_config()
        got = model.get_layer('conv1').get_weights()
        factor = np.linalg.norm(init_kernel) / np.sqrt(np.sum(trained[0] ** 2) + np.sum(trained[1] ** 2))
        self.assertAllClose(got[0], trained[0] * factor, rtol=1e-5)
        self.assertAllClose(got[1], trained[1] * factor, rtol=1e-5)
        self.assertEqual(model.output_shape, (None, 4))
        variables = maennel.checkpoint_variables(updir)
        self.assertAllEqual(variables[0], trained[0])
        with self.assertRaisesRegex(FileNotFoundError, 'run the upstream'):
            maennel.transferred((5, 5, 1), 4, arm='pretrained_conv', upstream_dir=self.create_tempdir().full_path,
                                upstream_outputs=7)
        with self.assertRaisesRegex(ValueError, "Unknown arm 'finetune'"):
            maennel.transferred((5, 5, 1), 4, arm='finetune')


class SummaryTest(absltest.TestCase):

    def test_report_json_numbers(self):
        workdir = self.create_tempdir().full_path
        write_fake_results(workdir)
        report = json.loads(pathlib.Path(workdir, 'report.json').read_text())
        # transfer rows: {arm, seed, auc} with AUC = trapezoid / 20 of the fake curve.
        self.assertLen(report['transfer'], 10)
        for row in report['transfer']:
            acc = np.array(AUC_CURVES[row['arm']]) + 0.01 * row['seed']
            want = ((acc[0] + acc[1]) / 2 * 10 + (acc[1] + acc[2]) / 2 * 10) / 20
            self.assertAlmostEqual(row['auc'], want, places=6)
        self.assertEqual({r['arm'] for r in report['transfer']}, set(ARMS))
        # misalignment rows per run and layer: data/random_mean/random_std/init.
        rows = {(r['labels'], r['seed']): r for r in report['misalignment']}
        self.assertEqual(set(rows), {('random', 0), ('random', 1), ('real', 0), ('real', 1)})
        self.assertAlmostEqual(rows[('random', 0)]['data'], 0.08)
        self.assertAlmostEqual(rows[('random', 0)]['init'], 0.1)
        self.assertAlmostEqual(rows[('random', 0)]['random_mean'], 0.55)
        self.assertAlmostEqual(rows[('random', 0)]['random_std'], 0.03)
        self.assertEqual(rows[('real', 1)]['layer'], 'conv1')
        # table1 rows at iterations 10 and 20.
        t = {(r['sampled_layers'], r['iterations'], r['seed']): r for r in report['table1']}
        self.assertAlmostEqual(t[(2, 10, 0)]['train_acc'], 0.1 + 0.1 + 0.1)
        self.assertAlmostEqual(t[(2, 20, 1)]['test_acc'], 0.1 + 0.2 + 0.08)
        # f(σ) pooled over seeds: sqrt(mean τ²).
        fs = report['fsigma']['8']
        want = np.sqrt((np.array([1.0, 2.0, 0.5]) ** 2 + (np.array([1.0, 2.0, 0.5]) + 0.1) ** 2) / 2)
        np.testing.assert_allclose(fs['tau'], want)
        self.assertEqual(fs['peak_sigma'], 2.0)
        # f(σ) of the upstream filters (Fig. 4 centre): pooled over the two seeds.
        fd = report['fsigma_data']['random/conv1']
        np.testing.assert_allclose(fd['tau'], [np.sqrt((0.3**2 + 0.4**2) / 2), 0.5])
        self.assertEqual(fd['num_runs'], 2)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'fig2_misalignment.png')))
        self.assertTrue(os.path.exists(os.path.join(workdir, 'figures', 'fig4_fsigma_synthetic.png')))
        text = pathlib.Path(workdir, 'report.md').read_text()
        self.assertIn('Table 1', text)
        self.assertIn('appendix A.6 subtracts 1', text)


@pytest.mark.slow
class QuickGinTest(absltest.TestCase):

    def test_quick_gin_runs_end_to_end_tiny(self):
        workdir = self.create_tempdir().full_path
        gin.clear_config()
        config.parse_gin([str(REPO / 'gin/maennel2020/quick.gin')], [
            'train.Trainer.num_steps = 3', 'experiments.RandomLabelTransfer.in_process = True',
            'experiments.RandomLabelTransfer.seeds = [0]', 'experiments.RandomLabelTransfer.fsigma_seeds = [0]',
            'experiments.RandomLabelTransfer.table1_layers = [0, 1]', 'NUM_EXAMPLES_UPSTREAM = 200',
            'NUM_EXAMPLES_DOWNSTREAM = 200', 'data.GaussianCovariance.num_train = 300'])
        try:
            summary = maennel.RandomLabelTransfer(workdir=workdir).run()
        finally:
            gin.clear_config()
        self.assertTrue(summary['ok'], summary['status_line'])
        report = json.loads(pathlib.Path(workdir, 'report.json').read_text())
        self.assertEqual({r['arm'] for r in report['transfer']}, set(ARMS))
        self.assertTrue(all(np.isfinite(r['auc']) for r in report['transfer']))
        self.assertGreaterEqual(len(report['misalignment']), 2)
        self.assertEqual({r['sampled_layers'] for r in report['table1']}, {0, 1})
        self.assertEqual(report['fsigma']['2048']['num_runs'], 1)
        self.assertLen(report['fsigma']['256']['tau'], 30)


if __name__ == '__main__':
    absltest.main()
