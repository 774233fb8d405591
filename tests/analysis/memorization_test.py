"""Tests for extreme_mem/analysis/memorization.py (stage selection, CIs, aggregation, one real run)."""

import math
import os

import numpy as np
import pytest
import tensorflow as tf

from extreme_mem.analysis import memorization
from extreme_mem.analysis import rewinding
from extreme_mem.data import spheres
from extreme_mem.models import mlp


def _record(points):
    return {'history': [{'step': s, 'test/accuracy': a} for s, a in points]}


class StagesTest(tf.test.TestCase):

    def test_best_is_the_earliest_maximum_among_checkpointed_steps(self):
        record = _record([(0, 0.1), (10, 0.35), (15, 0.5), (20, 0.4), (30, 0.4), (40, 0.3)])
        # step 15 was evaluated but has no checkpoint; 20 and 30 tie: the earlier wins.
        self.assertEqual(memorization.stage_steps(record, [10, 20, 30, 40]), {'init': 0, 'best': 20, 'final': 40})
        with self.assertRaisesRegex(ValueError, 'no checkpoints'):
            memorization.stage_steps(record, [])

    def test_mean_ci_is_the_student_t_interval(self):
        mean, half = memorization.mean_ci([1.0, 2.0, 6.0], level=0.99)
        # t_{0.995, 2} = 9.9248 (tables); sample std = sqrt(7).
        self.assertAllClose(mean, 3.0)
        self.assertAllClose(half, 9.9248 * math.sqrt(7.0) / math.sqrt(3.0), rtol=1e-4)
        self.assertTrue(math.isnan(memorization.mean_ci([2.0])[1]))
        self.assertEqual(memorization.mean_ci([float('nan'), 4.0])[0], 4.0)

    def test_spaced_keeps_the_last(self):
        self.assertEqual(memorization.spaced(list('abcdef'), 1), ['f'])
        self.assertEqual(memorization.spaced(list('abcdef'), 2), ['a', 'f'])
        self.assertEqual(memorization.spaced(list('abc'), None), ['a', 'b', 'c'])

    def test_aggregate_layout_and_means(self):
        def run(cap, acc, epoch):
            geo = {s: {'l1': {'capacity': cap, 'radius': 1.0, 'dimension': 2.0, 'center_correlation': 0.1}}
                   for s in memorization.SUBSETS}
            return {'layers': ['l1'], 'epochs': {'init': 0, 'best': epoch, 'final': 9},
                    'subset_accuracy': {st: {s: acc for s in memorization.SUBSETS} for st in memorization.STAGES},
                    'mftma': {st: geo for st in memorization.STAGES},
                    'rewinding': [{'layer': 'l1', 'epoch': 0, 'train_acc': acc, 'test_acc': acc}]}

        out = memorization.aggregate([run(0.1, 0.5, 2), run(0.3, 0.7, 4)], examples_per_class=50)
        self.assertEqual(out['lower_bound'], 0.04)
        self.assertEqual(out['best_epoch'], 3.0)
        self.assertAllClose(out['subset_accuracy']['best']['restored'], 0.6)
        cell = out['mftma']['final']['permuted']['l1']
        self.assertEqual(set(cell), {'capacity', 'radius', 'dimension', 'center_correlation', 'capacity_ci99'})
        self.assertAllClose(cell['capacity'], 0.2)
        self.assertAllClose(cell['capacity_ci99'], 63.657 * 0.1 / 1.0, rtol=1e-3)  # t_{0.995,1} s / sqrt(2)
        self.assertEqual(out['rewinding'], [{'layer': 'l1', 'epoch': 0, 'train_acc': 0.6, 'test_acc': 0.6}])


@pytest.mark.slow  # 12 MFTMA analyses
class AnalyzeRunTest(tf.test.TestCase):

    def test_a_run_from_its_checkpoints(self):
        data = spheres.Spheres(ambient_dim=32, train_per_class=12, test_per_class=6, label_noise=0.5,
                               noise_kind='permute').load(seed=0)
        model = mlp.mlp((32,), 10, depth=2, width=16, activation='relu', initializer='glorot_uniform', init_scale=1.0,
                        use_bias=True,
                        seed=0)
        init = rewinding.snapshot(model)
        ckpt_dir = self.create_tempdir().full_path
        ckpt = tf.train.Checkpoint(model=model)
        manager = tf.train.CheckpointManager(ckpt, ckpt_dir, max_to_keep=10)
        rng = np.random.default_rng(0)
        for step in (5, 10):
            for v in model.weights:
                v.assign(v + rng.normal(scale=0.3, size=v.shape).astype(np.float32))
            manager.save(checkpoint_number=step)
        final = rewinding.snapshot(model)
        rewinding.assign(model, init)
        record = {'history': [{'step': 0, 'test/accuracy': 0.1, 'train/accuracy/permuted': 0.05},
                              {'step': 5, 'test/accuracy': 0.3, 'train/accuracy/permuted': 0.2},
                              {'step': 10, 'test/accuracy': 0.2, 'train/accuracy/permuted': 0.9}]}
        mftma = dict(num_classes=10, examples_per_class=4, n_t=8)
        out = memorization.analyze_run(model, data, record, ckpt_dir, 5, mftma,
                                       rewind=True, embed_examples=5, max_layers=1)
        self.assertEqual(out['steps'], {'init': 0, 'best': 5, 'final': 10})
        self.assertEqual(out['epochs'], {'init': 0.0, 'best': 1.0, 'final': 2.0})
        self.assertEqual(out['subset_accuracy']['final']['permuted'], 0.9)
        self.assertTrue(math.isnan(out['mftma']['best']['test']['hidden1']['capacity']))  # only the last layer
        self.assertGreater(out['mftma']['best']['test']['hidden2']['capacity'], 0.0)
        # Rewinding a layer to the final epoch is the final model: compare with a direct evaluation.
        rewinding.assign(model, final)
        direct = memorization.accuracy_evaluator(data)(model)
        rows = [r for r in out['rewinding'] if r['epoch'] == 2]
        self.assertLen(rows, 3)  # hidden1, hidden2, logits
        for r in rows:
            self.assertAllClose(r['test_acc'], direct['test_acc'])
            self.assertAllClose(r['train_acc'], direct['train_acc'])
        self.assertEqual(sorted({r['epoch'] for r in out['rewinding']}), [0, 1, 2])
        self.assertEqual(set(out['embedding']), {'init', 'best', 'final'})
        self.assertEqual(out['embedding']['best']['restored']['xy'].shape, (5, 2))


if __name__ == '__main__':
    tf.test.main()
