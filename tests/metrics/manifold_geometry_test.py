"""Tests for extreme_mem/metrics/manifold_geometry.py: sampling and the plumbing to MFTMA."""

import numpy as np
from absl.testing import absltest

from extreme_mem import registry
from extreme_mem.data import base as data_base
from extreme_mem.data import transforms
from extreme_mem.geometry import mftma
from extreme_mem.metrics import base, manifold_geometry
from extreme_mem.models import mlp
from tests import testing


class SamplingTest(absltest.TestCase):

    def test_each_class_gets_m_distinct_examples_of_its_label(self):
        labels = np.repeat(np.arange(5), 20)
        np.random.default_rng(0).shuffle(labels)
        groups = manifold_geometry.sample_manifold_positions(labels, 4, 7, seed=3)
        self.assertLen(groups, 4)
        for c, g in enumerate(groups):
            self.assertLen(set(g), 7)
            self.assertTrue(np.all(labels[g] == c))
        again = manifold_geometry.sample_manifold_positions(labels, 4, 7, seed=3)
        for a, b in zip(groups, again):
            np.testing.assert_array_equal(a, b)

    def test_too_few_classes(self):
        with self.assertRaisesRegex(ValueError, '>= 2 classes'):
            manifold_geometry.sample_manifold_positions(np.array([0, 0, 1]), 5, 3, seed=0)

    def test_bad_subset(self):
        with self.assertRaisesRegex(ValueError, "Unknown MFTMA subset 'shuffled'"):
            manifold_geometry.ManifoldGeometryMetric(subsets=['shuffled'])


class EvaluateTest(absltest.TestCase):

    def test_matches_manifold_analysis_of_numpy_forward_pass(self):
        data = testing.blobs(num_train=60, num_test=60, num_classes=3, dim=6)
        train = transforms.uniform_labels(data.train, 3, fraction=0.5, seed=1)
        data = data_base.Data(train, data.test, data.info)
        model = mlp.mlp((6,), 3, width=12, activation='sin', seed=0)
        metric = manifold_geometry.ManifoldGeometryMetric(num_classes=3, examples_per_class=8,
                                                          subsets=['restored', 'test'], n_t=50, seed=2)
        out = metric.evaluate(base.EvalContext(step=0, model=model, data=data, evals={}))
        w1 = model.get_layer('hidden').kernel.numpy().astype(np.float64)
        restored = transforms.restored(train)
        for subset, split in (('restored', restored), ('test', data.test)):
            groups = manifold_geometry.sample_manifold_positions(np.asarray(split.labels), 3, 8, seed=2)
            manifolds = [np.sin(split.images[g].astype(np.float64) @ w1) for g in groups]
            expected = mftma.manifold_analysis(manifolds, n_t=50, seed=2)
            for q in manifold_geometry.QUANTITIES:
                self.assertAlmostEqual(out[f'eval/mftma/{q}/{subset}/hidden'], getattr(expected, q), places=4,
                                       msg=f'{q} {subset}')
        self.assertIn(('test', 'hidden'), metric.arrays)

    def test_at_steps_and_registered(self):
        metric = manifold_geometry.ManifoldGeometryMetric(at_steps=[5])
        self.assertEqual(metric.evaluate(base.EvalContext(step=4, model=None, data=None, evals={})), {})
        self.assertIs(registry.METRICS.get('mftma'), manifold_geometry.ManifoldGeometryMetric)


if __name__ == '__main__':
    absltest.main()
