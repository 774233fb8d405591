"""Tests for extreme_mem/train/optimizers.py: each optimizer, trained by the Trainer on a linear
softmax model, against a float64 numpy implementation of its definition (Keras's update rules)."""

import tempfile

import gin
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.models import mlp
from extreme_mem.train import optimizers, trainer
from tests import testing

STEPS = 4


def linear_model(seed=0):
    return mlp.mlp((5,), 3, depth=0, initializer='glorot_uniform', init_scale=1.0, seed=seed)


def ce_grad(w, x, y):
    """Gradient of the mean softmax cross-entropy of logits `x @ w`."""
    z = x @ w
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return x.T @ p / len(y)


def numpy_train(w, x, y, name, lr, steps, weight_decay=0.0, momentum=0.0, nesterov=False, beta_1=0.9,
                beta_2=0.999, rho=0.9, eps=1e-7, initial_accumulator_value=0.1):
    """Full-batch training of `w` by optimizer `name`, as Keras defines each update; `lr(t)` per step."""
    a = np.zeros_like(w) + (initial_accumulator_value if name == 'adagrad' else 0.0)
    b = np.zeros_like(w)
    for t in range(steps):
        g = ce_grad(w, x, y)
        rate = lr(t)
        w = w - rate * weight_decay * w  # decoupled decay, before the update
        if name == 'sgd':
            if momentum:
                a = momentum * a - rate * g
                w = w + (momentum * a - rate * g if nesterov else a)
            else:
                w = w - rate * g
        elif name == 'adam':
            a += (g - a) * (1 - beta_1)
            b += (g * g - b) * (1 - beta_2)
            alpha = rate * np.sqrt(1 - beta_2 ** (t + 1)) / (1 - beta_1 ** (t + 1))
            w = w - a * alpha / (np.sqrt(b) + eps)
        elif name == 'rmsprop':
            a = rho * a + (1 - rho) * g * g
            step = rate * g / np.sqrt(a + eps)
            if momentum:
                b = momentum * b + step
                step = b
            w = w - step
        elif name == 'adagrad':
            a = a + g * g
            w = w - rate * g / np.sqrt(a + eps)
    return w


def fit(model, data, **kwargs):
    t = trainer.Trainer(model, losses.cross_entropy, data.info.num_classes, batch_size=64, num_steps=STEPS,
                        eval_every=100, log_every=100, checkpoint_every=100, **kwargs)
    t.fit(data, tempfile.mkdtemp(), 0)
    return t


class OptimizersTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ('sgd', 'sgd', {}, {}),
        ('momentum', 'sgd', {'momentum': 0.9}, {}),
        ('nesterov', 'sgd', {'momentum': 0.9, 'nesterov': True}, {}),
        ('sgd_weight_decay', 'sgd', {'momentum': 0.9, 'weight_decay': 0.05}, {}),
        ('adam', 'adam', {}, {}),
        ('adam_gin_betas', 'adam', {}, {'beta_1': 0.5, 'beta_2': 0.99}),
        ('adamw', 'adam', {'weight_decay': 0.1}, {}),
        ('rmsprop', 'rmsprop', {}, {}),
        ('rmsprop_momentum', 'rmsprop', {'momentum': 0.5}, {'rho': 0.8}),
        ('adagrad', 'adagrad', {}, {'initial_accumulator_value': 0.3}),
    )
    def test_matches_numpy_definition(self, name, trainer_kwargs, gin_kwargs):
        for key, value in gin_kwargs.items():
            gin.bind_parameter(f'train.{name}.{key}', value)
        data = testing.blobs(num_train=24)
        model = linear_model()
        w0 = model.get_weights()[0].astype(np.float64)
        lr = 0.1
        fit(model, data, optimizer=name, learning_rate=lr, **trainer_kwargs)
        # Batch >= n: every step sees the whole training set.
        want = numpy_train(w0, data.train.images.astype(np.float64), data.train.labels, name, lambda t: lr, STEPS,
                           **trainer_kwargs, **gin_kwargs)
        self.assertAllClose(model.get_weights()[0], want, rtol=1e-4, atol=1e-5)

    def test_adam_layer_multiplier_is_a_learning_rate(self):
        # Scaling the gradient would not change an Adam step; a per-layer rate must.
        data = testing.blobs(num_train=24)

        def two_layer():
            return mlp.mlp((5,), 3, width=4, activation='tanh', initializer='glorot_uniform', init_scale=1.0,
                           seed=0)

        scaled, fast, slow = two_layer(), two_layer(), two_layer()
        kwargs = dict(optimizer='adam', num_steps=1)
        for model, extra in ((scaled, {'learning_rate': 0.01, 'lr_multipliers': {'hidden': 3.0}}),
                             (fast, {'learning_rate': 0.03}), (slow, {'learning_rate': 0.01})):
            trainer.Trainer(model, losses.cross_entropy, 3, batch_size=64, eval_every=10, **kwargs,
                            **extra).fit(data, tempfile.mkdtemp(), 0)
        # One step: each layer's update depends only on the initial weights and its own rate.
        self.assertAllClose(scaled.get_layer('hidden').kernel, fast.get_layer('hidden').kernel, rtol=1e-5)
        self.assertAllClose(scaled.get_layer('logits').kernel, slow.get_layer('logits').kernel, rtol=1e-5)
        self.assertNotAllClose(fast.get_layer('logits').kernel, slow.get_layer('logits').kernel)

    def test_unknown_name_lists_valid_ones(self):
        with self.assertRaisesRegex(ValueError, r"Unknown optimizer 'adamw'; valid: \['adagrad', 'adam', 'rmsprop', "
                                                r"'sgd'\]"):
            trainer.Trainer(linear_model(), losses.cross_entropy, 3, optimizer='adamw')

    def test_momentum_where_it_does_not_apply(self):
        with self.assertRaisesRegex(ValueError, "momentum=0.9 applies to.*not 'adam'"):
            optimizers.make('adam', 0.1, momentum=0.9)
        with self.assertRaisesRegex(ValueError, 'nesterov applies to sgd only'):
            optimizers.make('rmsprop', 0.1, nesterov=True)

    def test_trainer_owned_arguments_cannot_be_bound(self):
        with self.assertRaisesRegex(ValueError, "'train.adam' has denylisted kwarg 'learning_rate'"):
            gin.parse_config('train.adam.learning_rate = 0.5')


if __name__ == '__main__':
    tf.test.main()
