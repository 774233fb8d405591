"""Tests for extreme_mem/metrics/gradient_alignment.py (fixture from the public code + literals)."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem import registry
from extreme_mem.metrics import gradient_alignment
from extreme_mem.metrics import representation_alignment
from extreme_mem.models import mlp
from extreme_mem.pergrad import engine
from tests import testing

FIXTURE = Path(__file__).resolve().parents[2].parent / 'shared' / 'fixtures' / 'alignment' / 'reference_alignment.json'


def _fixture() -> dict:
    if not FIXTURE.exists():
        pytest.skip(f'fixture {FIXTURE} not found')
    return json.loads(FIXTURE.read_text())


class AlignmentMathTest(tf.test.TestCase, parameterized.TestCase):

    def test_vector_cases_match_reference(self):
        for case in _fixture()['vector_cases']:
            self.assertAllClose(gradient_alignment.alignment(case['vectors']), case['alignment'], atol=1e-4)

    def test_identical_vectors_are_fully_aligned(self):
        self.assertAllClose(gradient_alignment.alignment(testing.identical(5, [1.0, -2.0, 0.5])), 1.0)

    def test_hand_computed(self):
        # v1 = (1, 0), v2 = (0, 2): <v1, v2> = 0 -> Ω = 0. v1 = (1, 0), v2 = (-1, 0): Ω = 2·(-2)/(1·4) = -1.
        self.assertAllClose(gradient_alignment.alignment([[1.0, 0.0], [0.0, 2.0]]), 0.0)
        self.assertAllClose(gradient_alignment.alignment([[1.0, 0.0], [-1.0, 0.0]]), -1.0)
        # (1, 0), (1, 0), (0, 1): Σ_{i≠j}<> = 2, Σ||v|| = 3 -> Ω = 3·2 / (2·9) = 1/3.
        self.assertAllClose(gradient_alignment.alignment([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 1 / 3)

    def test_class_alignment_skips_singletons_and_flags_vanishing(self):
        labels = np.array([0, 0, 1, 2, 2])
        vectors = np.array([[1.0, 0.0], [1.0, 0.0], [3.0, 3.0], [0.0, 0.0], [0.0, 0.0]])
        s = testing.grad_stats_from({'v': vectors}, labels, 3)['v']
        per_class = gradient_alignment.class_alignment(s.sq_norms, s.class_sum_sq_norms, labels)
        self.assertEqual(sorted(per_class), [0, 2])  # class 1 has one example
        self.assertAllClose(per_class[0], (1.0, False))
        self.assertEqual(per_class[2], (0.0, True))
        self.assertAllClose(gradient_alignment.in_class_alignment(per_class), 0.5)
        self.assertIsNone(gradient_alignment.in_class_alignment({}))
        with self.assertRaises(ValueError):
            gradient_alignment.alignment_from_sums(1, 1.0, 1.0, 1.0)

    def test_mlp_cases_match_reference(self):
        for case in _fixture()['mlp_cases']:
            with self.subTest(case=case['name']):
                x = np.asarray(case['x'], np.float32)
                y = np.asarray(case['y'])
                w1, w2 = np.asarray(case['W1'], np.float32), np.asarray(case['W2'], np.float32)
                num_classes = w2.shape[1]
                act = case['activation']
                model = mlp.mlp((x.shape[1],), num_classes, depth=1, width=w1.shape[1], activation=act, use_bias=False)
                model.set_weights([w1, w2])
                diag = engine.PerExampleGradients(model)(x, y, losses.get(case['loss']), num_classes)
                self.assertAllClose(diag.per_example_loss, case['per_example_loss'], atol=1e-4)
                got_stats = {
                    'W1': diag.grad_stats['hidden/kernel'],
                    'W2': diag.grad_stats['logits/kernel'],
                    'logits': diag.logit_stats,
                }
                for name, want in case['grad_alignment_per_class'].items():
                    s = got_stats[name]
                    got = gradient_alignment.class_alignment(s.sq_norms, s.class_sum_sq_norms, y)
                    self.assertEqual(sorted(got), sorted(int(c) for c in want))
                    for c, value in want.items():
                        self.assertAllClose(got[int(c)][0], value, atol=1e-4, msg=f'{name} class {c}')
                got_rep = representation_alignment.class_alignment(diag.representations['hidden'], y, num_classes)
                for c, value in case['rep_alignment_per_class'].items():
                    self.assertAllClose(got_rep[int(c)][0], value, atol=1e-4, msg=f'rep class {c}')

                # The plugin reports the same numbers under its tags.
                plugin = gradient_alignment.GradientAlignment()
                plugin.update(
                    testing.step_outputs(
                        y, num_classes, grad_stats=diag.grad_stats, logit_stats=diag.logit_stats, logits=diag.logits
                    )
                )
                result = plugin.result()
                want_w1 = case['grad_alignment_per_class']['W1']
                self.assertAllClose(result['train/grad_alignment/hidden'], np.mean(list(want_w1.values())), atol=1e-4)
                self.assertAllClose(result['train/grad_alignment/hidden/class_0'], want_w1['0'], atol=1e-4)
                want_logits = case['grad_alignment_per_class']['logits']
                self.assertAllClose(
                    result['train/grad_alignment/logits_grad'], np.mean(list(want_logits.values())), atol=1e-4
                )
                per_layer = case['grad_alignment_per_class']
                mean_layers = np.mean([np.mean(list(per_layer[k].values())) for k in ('W1', 'W2')])
                self.assertAllClose(result['train/grad_alignment'], mean_layers, atol=1e-4)


class GradientAlignmentPluginTest(tf.test.TestCase):

    def _outputs(self, labels, per_var, logit_vectors=None, num_classes=3):
        grad_stats = testing.grad_stats_from(per_var, labels, num_classes)
        logit_stats = None
        if logit_vectors is not None:
            logit_stats = testing.grad_stats_from({'z': logit_vectors}, labels, num_classes)['z']
        return testing.step_outputs(labels, num_classes, grad_stats=grad_stats, logit_stats=logit_stats)

    def test_identical_gradients_give_one(self):
        labels = [0, 0, 0, 1, 1]
        kernel, logit_grads = testing.identical(5, [1.0, 2.0]), testing.identical(5, [0.5, -0.5, 0.0])
        out = self._outputs(labels, {'hidden/kernel': kernel}, logit_grads)
        plugin = gradient_alignment.GradientAlignment()
        plugin.update(out)
        result = plugin.result()
        for tag in (
            'train/grad_alignment/hidden',
            'train/grad_alignment/hidden/class_0',
            'train/grad_alignment/hidden/class_1',
            'train/grad_alignment/logits_grad',
            'train/grad_alignment',
        ):
            self.assertAllClose(result[tag], 1.0, msg=tag)
        self.assertNotIn('train/grad_alignment/hidden/class_2', result)  # no examples
        self.assertEqual(result['train/grad_alignment_zero_classes/hidden'], 0.0)

    def test_singleton_class_skipped_and_vanishing_counted(self):
        labels = [0, 0, 1, 2, 2]
        kernel = np.array([[1.0, 0.0], [1.0, 0.0], [5.0, 5.0], [0.0, 0.0], [0.0, 0.0]])
        plugin = gradient_alignment.GradientAlignment()
        plugin.update(self._outputs(labels, {'hidden/kernel': kernel}))
        result = plugin.result()
        self.assertNotIn('train/grad_alignment/hidden/class_1', result)
        self.assertEqual(result['train/grad_alignment/hidden/class_2'], 0.0)
        self.assertAllClose(result['train/grad_alignment/hidden'], 0.5)
        self.assertEqual(result['train/grad_alignment_zero_classes/hidden'], 1.0)
        self.assertTrue(all(np.isfinite(v) for v in result.values()))

    def test_bias_is_folded_into_its_layer(self):
        labels = [0, 0, 1, 1]
        kernel = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
        bias = np.array([[1.0], [1.0], [-1.0], [1.0]])
        plugin = gradient_alignment.GradientAlignment()
        plugin.update(self._outputs(labels, {'hidden/kernel': kernel, 'hidden/bias': bias}))
        result = plugin.result()
        want_0 = gradient_alignment.alignment(np.concatenate([kernel, bias], axis=1)[:2])
        want_1 = gradient_alignment.alignment(np.concatenate([kernel, bias], axis=1)[2:])
        self.assertAllClose(result['train/grad_alignment/hidden/class_0'], want_0)
        self.assertAllClose(result['train/grad_alignment/hidden/class_1'], want_1)
        layers = {k.split('/')[2] for k in result if k.startswith('train/grad_alignment/')}
        self.assertEqual(layers, {'hidden'})

    def test_update_result_reset_and_mean_over_updates(self):
        labels = [0, 0]
        plugin = gradient_alignment.GradientAlignment(per_class=False, include_logits_grad=False)
        plugin.update(self._outputs(labels, {'w/kernel': np.array([[1.0, 0.0], [1.0, 0.0]])}))  # Ω = 1
        plugin.update(self._outputs(labels, {'w/kernel': np.array([[1.0, 0.0], [-1.0, 0.0]])}))  # Ω = -1
        self.assertEqual(
            plugin.result(),
            {'train/grad_alignment/w': 0.0, 'train/grad_alignment_zero_classes/w': 0.0, 'train/grad_alignment': 0.0},
        )
        plugin.reset()
        self.assertEqual(plugin.result(), {})

    def test_mismatched_labels_raise(self):
        out = self._outputs([0, 0, 1], {'w/kernel': np.ones((3, 2))})
        out = out._replace(labels=tf.constant([0, 1, 1]))
        with self.assertRaisesRegex(ValueError, 'class_counts'):
            gradient_alignment.GradientAlignment().update(out)

    def test_needs_and_registration(self):
        self.assertIs(registry.METRICS.get('gradient_alignment'), gradient_alignment.GradientAlignment)
        self.assertEqual(gradient_alignment.GradientAlignment.needs, frozenset({'grad_stats'}))
        self.assertFalse(gradient_alignment.GradientAlignment.wants_gram)
        with self.assertRaisesRegex(ValueError, 'grad_stats is None'):
            gradient_alignment.GradientAlignment().update(testing.step_outputs([0, 0]))


if __name__ == '__main__':
    tf.test.main()
