"""Tests for extreme_mem/train/trainer.py against numpy SGD and uninterrupted runs."""

import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.data import base as data_base
from extreme_mem.models import mlp
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


if __name__ == '__main__':
    tf.test.main()
