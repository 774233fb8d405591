"""Tests for extreme_mem/metrics/common.py against numpy statistics of literal per-example gradients."""

from typing import Optional

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.metrics import base
from extreme_mem.metrics import common
from extreme_mem.pergrad import stats
from tests import testing

LABELS = np.array([0, 1, 1, 2, 0])
NUM_CLASSES = 3


def _gradients(seed=0):
    """Per-example gradients [5, ...] of a 'hidden' layer (kernel + bias), an 'out' layer and the logits."""
    rng = np.random.default_rng(seed)
    return {
        'hidden/kernel': rng.normal(size=(5, 4)).astype(np.float32),
        'hidden/bias': rng.normal(size=(5, 2)).astype(np.float32),
        'out/kernel': rng.normal(size=(5, 3)).astype(np.float32),
    }, rng.normal(size=(5, NUM_CLASSES)).astype(np.float32)


def _oracle(vectors: np.ndarray, labels=LABELS, num_classes=NUM_CLASSES) -> dict:
    """The statistics of per-example vectors [n, d], computed directly in float64 numpy."""
    v = vectors.astype(np.float64)
    class_sums = np.stack([v[labels == c].sum(axis=0) for c in range(num_classes)])
    return {
        'sq_norms': np.sum(v**2, axis=1),
        'class_sum_sq_norms': np.sum(class_sums**2, axis=1),
        'class_counts': np.bincount(labels, minlength=num_classes),
        'total_sum_sq_norm': np.sum(v.sum(axis=0) ** 2),
        'gram': v @ v.T,
    }


def _outputs(grads, logit_grads, compute_gram=True, labels=LABELS):
    grad_stats = testing.grad_stats_from(grads, labels, NUM_CLASSES, compute_gram)
    logit_stats = None
    if logit_grads is not None:
        logit_stats = testing.grad_stats_from({'z': logit_grads}, labels, NUM_CLASSES, compute_gram)['z']
    return testing.step_outputs(labels, NUM_CLASSES, grad_stats=grad_stats, logit_stats=logit_stats)


class TagMeansTest(tf.test.TestCase):

    def test_mean_per_tag_and_reset(self):
        means = common.TagMeans()
        self.assertEqual(means.result(), {})
        means.add('a', 1.0)
        means.add('b', np.float32(5.0))
        means.add('a', 2.5)
        means.add('a', -0.5)
        self.assertEqual(means.result(), {'a': 1.0, 'b': 5.0})  # (1 + 2.5 - 0.5) / 3
        self.assertIsInstance(means.result()['b'], float)
        means.reset()
        self.assertEqual(means.result(), {})
        means.add('c', 4.0)
        self.assertEqual(means.result(), {'c': 4.0})


class ToNumpyTest(tf.test.TestCase):

    def test_float64_arrays_and_missing_gram(self):
        s = stats.GradStats(tf.constant([1.5, 2.0]), tf.constant([3.0]), tf.constant([2.0]), tf.constant(0.25))
        out = common.to_numpy(s)
        for field, expected in zip(out[:4], ([1.5, 2.0], [3.0], [2.0], 0.25)):
            self.assertIsInstance(field, np.ndarray)
            self.assertEqual(field.dtype, np.float64)
            self.assertAllEqual(field, expected)
        self.assertIsNone(out.gram)


class LayerStatsTest(tf.test.TestCase, parameterized.TestCase):

    def test_kernel_and_bias_fold_into_one_layer(self):
        grads, logit_grads = _gradients()
        per_layer = common.layer_stats(_outputs(grads, logit_grads))
        self.assertEqual(list(per_layer), ['hidden', 'out', common.LOGITS_GRAD])
        expected = {
            'hidden': _oracle(np.concatenate([grads['hidden/kernel'], grads['hidden/bias']], axis=1)),
            'out': _oracle(grads['out/kernel']),
            common.LOGITS_GRAD: _oracle(logit_grads),
        }
        for layer, oracle in expected.items():
            s = per_layer[layer]
            for field, value in oracle.items():
                self.assertEqual(getattr(s, field).dtype, np.float64)
                self.assertAllClose(getattr(s, field), value, rtol=1e-5, atol=1e-5, msg=f'{layer}.{field}')

    def test_layer_filter_and_logits_switch(self):
        grads, logit_grads = _gradients()
        outputs = _outputs(grads, logit_grads)
        self.assertEqual(list(common.layer_stats(outputs, layers=['out'])), ['out', common.LOGITS_GRAD])
        self.assertEqual(list(common.layer_stats(outputs, include_logits_grad=False)), ['hidden', 'out'])
        self.assertEqual(list(common.layer_stats(_outputs(grads, None))), ['hidden', 'out'])
        self.assertEqual(list(common.layer_stats(outputs, layers=['missing'], include_logits_grad=False)), [])

    def test_no_grad_stats(self):
        with self.assertRaisesRegex(ValueError, 'grad_stats is None'):
            common.layer_stats(testing.step_outputs(LABELS, NUM_CLASSES))


class CheckLabelsTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(
        ([0, 1, 1, 2, 0], [2, 2, 1]),
        ([0, 1, 1, 2, 0], [2, 2, 0]),  # class 2 outside the engine's subset: not checked
        ([], [0, 0, 0]),
    )
    def test_consistent(self, labels, counts):
        common.check_labels(np.asarray(labels, np.int64), np.asarray(counts, np.float64))

    @parameterized.parameters(([0, 0, 1, 2, 0], [2, 2, 1]), ([1, 1, 1, 2, 0], [2, 2, 0]))
    def test_inconsistent(self, labels, counts):
        with self.assertRaisesRegex(ValueError, 'labels do not match GradStats.class_counts'):
            common.check_labels(np.asarray(labels), np.asarray(counts, np.float64))


class _MeanSqNorm(common.LayerGradStatsPlugin):
    """Mean per-example squared norm per layer, plus a quantity that is never available."""

    def layer_values(self, s: stats.GradStats, labels: np.ndarray) -> dict[str, Optional[float]]:
        return {'mean_sq_norm': float(np.mean(s.sq_norms)), 'never': None}


class _GramSum(common.LayerGradStatsPlugin):

    needs = frozenset({base.Need.GRAM})

    def layer_values(self, s: stats.GradStats, labels: np.ndarray) -> dict[str, Optional[float]]:
        return {'gram_sum': float(np.sum(s.gram))}


class LayerGradStatsPluginTest(tf.test.TestCase):

    def test_tags_average_over_updates_and_reset(self):
        (g1, z1), (g2, z2) = _gradients(1), _gradients(2)
        plugin = _MeanSqNorm(every_n_steps=10, split='eval')
        self.assertEqual(plugin.needs, frozenset({base.Need.GRAD_STATS}))
        self.assertFalse(plugin.wants_gram)
        plugin.update(_outputs(g1, z1, compute_gram=False))
        plugin.update(_outputs(g2, z2, compute_gram=False))

        def mean_sq(vectors):
            return np.mean(np.sum(vectors.astype(np.float64) ** 2, axis=1))

        def hidden(g):
            return np.concatenate([g['hidden/kernel'], g['hidden/bias']], axis=1)

        expected = {
            'eval/mean_sq_norm/hidden': (mean_sq(hidden(g1)) + mean_sq(hidden(g2))) / 2,
            'eval/mean_sq_norm/out': (mean_sq(g1['out/kernel']) + mean_sq(g2['out/kernel'])) / 2,
            'eval/mean_sq_norm/logits_grad': (mean_sq(z1) + mean_sq(z2)) / 2,
        }
        result = plugin.result()
        self.assertEqual(sorted(result), sorted(expected))  # the None quantity is skipped
        for tag, value in expected.items():
            self.assertAllClose(result[tag], value, rtol=1e-5)
        plugin.reset()
        self.assertEqual(plugin.result(), {})

    def test_layers_and_logits_options(self):
        g, z = _gradients()
        plugin = _MeanSqNorm(layers=['hidden'], include_logits_grad=False)
        plugin.update(_outputs(g, z))
        self.assertEqual(list(plugin.result()), ['train/mean_sq_norm/hidden'])

    def test_layer_items_labels(self):
        g, z = _gradients()
        labels, per_layer = _MeanSqNorm().layer_items(_outputs(g, z, labels=LABELS.astype(np.int32)))
        self.assertEqual(labels.dtype, np.int64)
        self.assertAllEqual(labels, LABELS)
        self.assertEqual(sorted(per_layer), ['hidden', 'logits_grad', 'out'])

    def test_gram_plugin_needs_gram_matrices(self):
        g, z = _gradients()
        plugin = _GramSum()
        self.assertTrue(plugin.wants_gram)
        self.assertIn(base.Need.GRAD_STATS, plugin.needs)  # GRAM implies GRAD_STATS
        with self.assertRaisesRegex(ValueError, "No Gram matrix for 'hidden'.*Need.GRAM"):
            plugin.update(_outputs(g, z, compute_gram=False))
        plugin.update(_outputs(g, z, compute_gram=True))
        out = g['out/kernel'].astype(np.float64)
        self.assertAllClose(plugin.result()['train/gram_sum/out'], np.sum(out @ out.T), rtol=1e-5)

    def test_layer_values_is_abstract(self):
        g, z = _gradients()
        with self.assertRaises(NotImplementedError):
            common.LayerGradStatsPlugin().update(_outputs(g, z))


if __name__ == '__main__':
    tf.test.main()
