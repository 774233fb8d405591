"""Tests for extreme_mem/train/trainer.py against numpy SGD and uninterrupted runs."""

import os

import gin
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.data import base as data_base
from extreme_mem.models import mlp
from extreme_mem.train import outputs as outputs_lib
from extreme_mem.train import schedules, trainer
from tests import testing


def linear_model(dim=5, classes=3, seed=0, **kwargs):
    return mlp.mlp((dim,), classes, depth=0, initializer='glorot_uniform', init_scale=1.0, seed=seed, **kwargs)


def numpy_ce_grad(w, x, y):
    z = x @ w
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return x.T @ p / len(y)


class Crash(Exception):
    pass


class CrashAt(trainer.Observer):
    """Raises at an optimizer step, like a killed process (after the earlier checkpoints)."""

    def __init__(self, step):
        self._step = step

    def needs(self, step):
        if step == self._step:
            raise Crash()
        return frozenset()


class TrainerTest(tf.test.TestCase, parameterized.TestCase):

    def _fit(self, model, data, workdir, observer=None, seed=0, **kwargs):
        kwargs.setdefault('log_every', 1000)
        t = trainer.Trainer(model, losses.cross_entropy, data.info.num_classes, **kwargs)
        return t, t.fit(data, workdir, seed, observer)

    @parameterized.parameters(0.0, 0.9)
    def test_matches_numpy_sgd(self, momentum):
        data = testing.blobs(num_train=24)
        model = linear_model()
        w = model.get_weights()[0].astype(np.float64)
        self._fit(model, data, self.create_tempdir().full_path, learning_rate=0.1, momentum=momentum,
                  batch_size=64, num_steps=3, eval_every=10)
        # Batch >= n: every step sees the whole training set (order does not change the mean).
        v = np.zeros_like(w)
        for _ in range(3):
            g = numpy_ce_grad(w, data.train.images.astype(np.float64), data.train.labels)
            v = momentum * v - 0.1 * g
            w = w + v
        self.assertAllClose(model.get_weights()[0], w, rtol=1e-4, atol=1e-5)

    def test_learns_separable_blobs_and_stops_at_accuracy(self):
        data = testing.blobs(num_train=96, separation=4.0)
        model = linear_model()
        _, result = self._fit(model, data, self.create_tempdir().full_path, learning_rate=0.5, batch_size=32,
                              num_steps=2000, eval_every=5, stop_accuracy=1.0)
        self.assertEqual(result.status, 'done')
        self.assertEqual(result.final['train/accuracy'], 1.0)
        self.assertLess(result.step, 2000)
        self.assertEqual(result.step % 5, 0)

    def test_frozen_layer_and_lr_multiplier(self):
        data = testing.blobs(num_train=24)
        base_model = mlp.mlp((5,), 3, width=8, activation='linear', initializer='glorot_uniform', init_scale=1.0,
                             seed=0)
        frozen = mlp.mlp((5,), 3, width=8, activation='linear', initializer='glorot_uniform', init_scale=1.0, seed=0)
        doubled = mlp.mlp((5,), 3, width=8, activation='linear', initializer='glorot_uniform', init_scale=1.0,
                          seed=0)
        w0 = base_model.get_weights()
        common = dict(learning_rate=0.05, batch_size=64, num_steps=1, eval_every=10)
        self._fit(base_model, data, self.create_tempdir().full_path, **common)
        self._fit(frozen, data, self.create_tempdir().full_path, frozen_layers=['hidden'], **common)
        self._fit(doubled, data, self.create_tempdir().full_path, lr_multipliers={'hidden': 2.0}, **common)
        self.assertAllEqual(frozen.get_weights()[0], w0[0])
        self.assertAllClose(frozen.get_weights()[1], base_model.get_weights()[1], rtol=1e-6)
        # One SGD step: doubling the layer's rate doubles its update.
        self.assertAllClose(doubled.get_weights()[0] - w0[0], 2 * (base_model.get_weights()[0] - w0[0]),
                            rtol=1e-4, atol=1e-7)

    def test_unknown_layer_is_rejected(self):
        data = testing.blobs()
        with self.assertRaisesRegex(ValueError, "Unknown layer 'hiden'"):
            trainer.Trainer(linear_model(), losses.cross_entropy, 3, frozen_layers=['hiden'])
        with self.assertRaisesRegex(ValueError, 'batch_size must be a positive integer'):
            trainer.Trainer(linear_model(), losses.cross_entropy, 3, batch_size=0)
        del data

    def test_resume_after_crash_equals_uninterrupted(self):
        data = testing.blobs(num_train=50)
        kwargs = dict(learning_rate=0.1, momentum=0.9, batch_size=8, num_steps=30, eval_every=5,
                      checkpoint_every=10, schedule=schedules.stagewise)
        whole = linear_model(seed=3)
        _, uninterrupted = self._fit(whole, data, self.create_tempdir().full_path, **kwargs)

        workdir = self.create_tempdir().full_path
        with self.assertRaises(Crash):
            self._fit(linear_model(seed=3), data, workdir, observer=CrashAt(17), **kwargs)
        self.assertTrue(os.path.exists(os.path.join(workdir, 'checkpoints', 'ckpt-10.index')))
        resumed_model = linear_model(seed=99)  # different init: everything must come from the checkpoint
        _, resumed = self._fit(resumed_model, data, workdir, **kwargs)
        self.assertEqual(resumed.step, 30)
        self.assertEqual(resumed.final, uninterrupted.final)
        for a, b in zip(resumed_model.get_weights(), whole.get_weights()):
            self.assertAllEqual(a, b)

    def test_nan_weights_diverge_and_keep_last_checkpoint(self):
        data = testing.blobs()
        model = linear_model()
        workdir = self.create_tempdir().full_path
        t = trainer.Trainer(model, losses.cross_entropy, 3, num_steps=10, checkpoint_every=2, eval_every=2,
                            batch_size=8, log_every=100)

        class PoisonAt(trainer.Observer):
            """Writes NaN into the kernel after update 5 (observed, so it runs alone)."""

            def needs(self, step):
                return frozenset({'outputs'}) if step == 5 else frozenset()

            def on_step(self, step, outputs):
                kernel = model.get_layer('logits').kernel
                kernel.assign(tf.fill(kernel.shape, np.nan))

        result = t.fit(data, workdir, 0, PoisonAt())
        self.assertEqual(result.status, 'diverged')
        self.assertEqual(result.step, 6)
        self.assertEqual(tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints')).rsplit('-', 1)[-1], '4')

    def test_evaluate_is_full_split_accuracy(self):
        data = testing.blobs(num_train=10, num_test=7)
        model = linear_model()
        t = trainer.Trainer(model, losses.cross_entropy, 3, eval_batch_size=4)
        result = t.evaluate(data.test)
        logits = model(data.test.images).numpy()
        self.assertAllClose(result.accuracy, np.mean(logits.argmax(-1) == data.test.labels))
        self.assertAllClose(result.per_example_loss, losses.cross_entropy(data.test.labels, logits), rtol=1e-5)
        self.assertLen(result.predictions, 7)

    def test_observed_step_outputs(self):
        data = testing.blobs(num_train=16)
        model = mlp.mlp((5,), 3, width=6, seed=0)
        seen = {}

        class Watch(trainer.Observer):
            def needs(self, step):
                return frozenset({'representations', 'weights'}) if step == 1 else frozenset()

            def on_step(self, step, outputs):
                seen['step'], seen['outputs'] = step, outputs

        self._fit(model, data, self.create_tempdir().full_path, observer=Watch(), batch_size=8, num_steps=2,
                  eval_every=10)
        out = seen['outputs']
        self.assertEqual(seen['step'], 1)
        self.assertEqual(int(out.step), 1)
        self.assertEqual(out.representations['hidden'].shape, (8, 6))
        self.assertEqual(set(out.grads), {'hidden/kernel', 'logits/kernel'})
        # Weights are reported *before* the update: W_after = W_before - lr * grad.
        after = model.get_layer('logits').kernel.numpy()
        self.assertAllClose(after, out.weights['logits/kernel'] - 0.01 * out.grads['logits/kernel'], rtol=1e-5,
                            atol=1e-7)
        self.assertAllClose(out.per_example_loss, losses.cross_entropy(out.labels, out.logits))
        self.assertIsInstance(data, data_base.Data)


class Every(trainer.Observer):
    """Asks for `needs` on steps `steps`; records what it saw."""

    def __init__(self, steps, needs=frozenset({'outputs'})):
        self._steps, self._needs, self.seen = set(steps), frozenset(needs), {}

    def needs(self, step):
        return self._needs if step in self._steps else frozenset()

    def on_step(self, step, outputs):
        self.seen[step] = outputs


class MultiStepLoopTest(tf.test.TestCase, parameterized.TestCase):

    def _trainer(self, model, loop='multi_step', **kwargs):
        kwargs = {**dict(learning_rate=0.1, momentum=0.9, batch_size=8, num_steps=23, eval_every=10, log_every=5,
                         checkpoint_every=10, schedule='cosine'), **kwargs}
        return trainer.Trainer(model, losses.cross_entropy, 3, loop=loop, **kwargs)

    def test_same_weights_as_one_step_per_call(self):
        data = testing.blobs(num_train=50)
        multi = mlp.mlp((5,), 3, width=8, activation='tanh', initializer='glorot_uniform', init_scale=1.0, seed=1)
        single = mlp.mlp((5,), 3, width=8, activation='tanh', initializer='glorot_uniform', init_scale=1.0, seed=1)
        a = self._trainer(multi).fit(data, self.create_tempdir().full_path, 0, Every([3, 12]))
        b = self._trainer(single, loop='per_step').fit(data, self.create_tempdir().full_path, 0, Every([3, 12]))
        self.assertEqual((a.status, a.step), (b.status, b.step))
        for x, y in zip(multi.get_weights(), single.get_weights()):
            self.assertAllClose(x, y, rtol=1e-6, atol=1e-7)
        self.assertEqual(a.final, b.final)

    def test_calls_run_to_the_next_boundary(self):
        data = testing.blobs(num_train=50)
        t = self._trainer(linear_model(), num_steps=23, log_every=100, eval_every=10, checkpoint_every=100)
        sizes, loop = [], t._train_loop

        def spy(iterator, k):
            sizes.append(int(k))
            return loop(iterator, k)

        t._train_loop = spy
        result = t.fit(data, self.create_tempdir().full_path, 0, Every([3, 12]))
        self.assertEqual(result.step, 23)
        # Boundaries: observed steps 3 and 12 (run alone), evaluations at 10 and 20, the end at 23.
        self.assertEqual(sizes, [3, 6, 2, 7, 3])

    def test_non_finite_loss_stops_at_that_step_and_says_no_checkpoint(self):
        data = testing.blobs(num_train=50)
        steps = {}
        for loop in trainer.LOOPS:
            model = mlp.mlp((5,), 3, width=8, activation='relu', initializer='glorot_uniform', init_scale=30.0,
                            seed=0)
            t = trainer.Trainer(model, losses.cross_entropy, 3, learning_rate=1e18, batch_size=8, num_steps=40,
                                eval_every=20, log_every=20, checkpoint_every=20, loop=loop, divergence_factor=None)
            with self.assertLogs('absl', level='ERROR') as logs:
                result = t.fit(data, self.create_tempdir().full_path, 0)
            self.assertEqual(result.status, 'diverged')
            steps[loop] = result.step
            message = '\n'.join(logs.output)
            self.assertIn('no checkpoint was written', message)
            self.assertNotIn('kept checkpoint', message)
        self.assertLess(steps['multi_step'], 20)
        self.assertEqual(steps['multi_step'], steps['per_step'])

    def test_loss_explosion_ends_run_as_diverged(self):
        data = testing.blobs(num_train=24)
        model = linear_model()

        class Blowup(trainer.Observer):
            """Scales the kernel 1e4x after the evaluation at step 2 (finite, but the loss explodes)."""

            def on_eval(self, step, results, evals):
                if step == 2:
                    kernel = model.get_layer('logits').kernel
                    kernel.assign(kernel * 1e4)

        t = trainer.Trainer(model, losses.cross_entropy, 3, learning_rate=1e-6, batch_size=8, num_steps=20,
                            eval_every=2, checkpoint_every=2, log_every=100, divergence_factor=100.0,
                            divergence_patience=2)
        with self.assertLogs('absl', level='ERROR') as logs:
            result = t.fit(data, self.create_tempdir().full_path, 0, Blowup())
        self.assertEqual((result.status, result.step), ('diverged', 6))  # above 100x at evaluations 4 and 6
        self.assertTrue(np.isfinite(result.final['train/loss']))
        self.assertRegex('\n'.join(logs.output), r'above 100 x its initial value.*kept checkpoint .*ckpt-4 \(step 4\)')

    def test_issue_probe_lr_1e6_sin_mlp_on_digits_diverges(self):
        # Reported: `done` with loss ~1e6 (finite, so never flagged). The default rule ends it.
        from extreme_mem.data import digits
        data = digits.Digits().load(seed=0)
        model = mlp.mlp(data.info.input_shape, data.info.num_classes, width=64, activation='sin', seed=0)
        t = trainer.Trainer(model, losses.cross_entropy, data.info.num_classes, learning_rate=1e6, num_steps=60,
                            eval_every=5, log_every=100)
        result = t.fit(data, self.create_tempdir().full_path, 0)
        self.assertEqual(result.status, 'diverged')
        self.assertIn(result.step, range(15, 60, 5))  # at an evaluation, after at least 3 of them
        self.assertTrue(np.isfinite(result.final['train/loss']))

    def test_explosion_rule_off(self):
        data = testing.blobs(num_train=24)
        model = linear_model()

        class Blowup(trainer.Observer):
            def on_eval(self, step, results, evals):
                if step == 2:
                    model.get_layer('logits').kernel.assign(model.get_layer('logits').kernel * 1e4)

        t = trainer.Trainer(model, losses.cross_entropy, 3, learning_rate=1e-6, batch_size=8, num_steps=8,
                            eval_every=2, log_every=100, divergence_factor=None)
        self.assertEqual(t.fit(data, self.create_tempdir().full_path, 0, Blowup()).status, 'done')

    @parameterized.parameters(
        ('num_steps', True, 'num_steps must be a positive integer, got True'),
        ('learning_rate', 'abc', "learning_rate must be a number > 0.0, got 'abc'"),
        ('eval_every', 2.5, 'eval_every must be a positive integer'),
        ('loop', 'fast', r"Unknown train.Trainer.loop 'fast'; valid: \['multi_step', 'per_step'\]"),
        ('divergence_factor', 0.5, 'divergence_factor must be a number > 1.0'),
    )
    def test_bad_knobs_name_the_binding(self, name, value, message):
        with self.assertRaisesRegex(ValueError, message):
            trainer.Trainer(linear_model(), losses.cross_entropy, 3, **{name: value})

    def test_gram_only_on_steps_that_need_it(self):
        data = testing.blobs(num_train=16)
        model = linear_model()

        class GramAt2(trainer.Observer):
            def __init__(self):
                self.seen = {}

            def needs(self, step):
                return {1: {outputs_lib.Need.GRAD_STATS}, 2: {outputs_lib.Need.GRAM}}.get(step, frozenset())

            def on_step(self, step, outputs):
                self.seen[step] = outputs

        watch = GramAt2()
        trainer.Trainer(model, losses.cross_entropy, 3, batch_size=8, num_steps=3, eval_every=10).fit(
            data, self.create_tempdir().full_path, 0, watch)
        self.assertIsNone(watch.seen[1].grad_stats['logits/kernel'].gram)
        out = watch.seen[2]
        # Linear softmax model: g_i = x_i ⊗ (p_i − y_i), so <g_i, g_j> = (x_i·x_j)(δ_i·δ_j).
        x = data.train.images[out.index.numpy()]
        p = tf.nn.softmax(out.logits).numpy()
        delta = p - np.eye(3)[out.labels.numpy()]
        self.assertAllClose(out.grad_stats['logits/kernel'].gram, (x @ x.T) * (delta @ delta.T), rtol=1e-4,
                            atol=1e-5)

    def test_unknown_need_is_rejected(self):
        with self.assertRaisesRegex(ValueError, r"Observer.needs has unknown entries \['gramm'\]"):
            trainer.Trainer(linear_model(), losses.cross_entropy, 3, num_steps=2, eval_every=10).fit(
                testing.blobs(), self.create_tempdir().full_path, 0, Every([0], {'gramm'}))

    def test_on_eval_extra_values_reach_final_without_mutation(self):
        data = testing.blobs()
        seen = []

        class Extra(trainer.Observer):
            def on_eval(self, step, results, evals):
                seen.append(dict(results))
                results['train/loss'] = -1.0  # a copy: must not leak into the trainer's results
                return {'eval/extra': float(step)}

        result = trainer.Trainer(linear_model(), losses.cross_entropy, 3, num_steps=4, eval_every=2, batch_size=8
                                 ).fit(data, self.create_tempdir().full_path, 0, Extra())
        self.assertEqual(result.final['eval/extra'], 4.0)
        self.assertEqual(result.final['train/loss'], seen[-1]['train/loss'])
        self.assertGreater(result.final['train/loss'], 0)


class GinBindingsTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_pergrad_arguments_the_trainer_sets_cannot_be_bound(self):
        from extreme_mem.pergrad import engine  # noqa: F401  (registers the configurable)
        for binding in ("pergrad.PerExampleGradients.engines = {'hidden': 'loop'}",
                        'pergrad.PerExampleGradients.compute_gram = True'):
            with self.assertRaisesRegex(ValueError, 'denylisted'):
                gin.parse_config(binding)

    def test_grad_engines_knob_reaches_the_engine(self):
        gin.parse_config("train.Trainer.grad_engines = {'logits': 'loop'}")
        model = linear_model()
        t = trainer.Trainer(model, losses.cross_entropy, 3, num_steps=1, eval_every=10, batch_size=8)
        t.fit(testing.blobs(), self.create_tempdir().full_path, 0, Every([0], {'grad_stats'}))
        self.assertEqual(t._pergrad[False].engines, {'logits/kernel': 'loop'})


if __name__ == '__main__':
    tf.test.main()
