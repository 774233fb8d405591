"""Tests for extreme_mem/train/schedules.py: the papers' stagewise values, cosine and warm-up
against their closed forms and Keras, and each schedule driving SGD on a tiny model vs numpy."""

import math
import tempfile

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.train import schedules, trainer
from tests import testing
from tests.train import optimizers_test


def numpy_rate(name, lr, num_steps, t, warmup_steps=0, boundaries=(0.3, 0.6, 0.8), factor=0.2, alpha=0.0):
    """The rate of update t (0-based) from each schedule's closed form."""
    if name == 'constant':
        rate = lr
    elif name == 'stagewise':
        rate = lr * factor ** sum(t > round(b * num_steps) for b in boundaries)
    else:
        rate = lr * (alpha + (1 - alpha) * 0.5 * (1 + math.cos(math.pi * min(t, num_steps) / num_steps)))
    return rate * min(1.0, (t + 1) / warmup_steps) if warmup_steps else rate


class SchedulesTest(tf.test.TestCase, parameterized.TestCase):

    def test_geometry_paper_decay(self):
        # 0.2x at 30/60/80% of 1000 steps.
        s = schedules.stagewise(learning_rate=0.1, num_steps=1000, boundaries=(0.3, 0.6, 0.8), factor=0.2)
        expected = {0: 0.1, 300: 0.1, 301: 0.02, 600: 0.02, 601: 0.004, 800: 0.004, 801: 0.0008, 999: 0.0008}
        for step, value in expected.items():
            self.assertAllClose(float(s(step)), value, rtol=1e-6, msg=f'step {step}')

    def test_random_labels_paper_decay(self):
        # ÷3 at 1/3 and 2/3 of 900 steps.
        s = schedules.stagewise(learning_rate=0.9, num_steps=900, boundaries=(1 / 3, 2 / 3), factor=1 / 3)
        self.assertAllClose([float(s(t)) for t in (0, 300, 301, 600, 601, 899)], [0.9, 0.9, 0.3, 0.3, 0.1, 0.1],
                            rtol=1e-6)

    def test_constant(self):
        self.assertEqual(schedules.constant(0.05, num_steps=10), 0.05)

    @parameterized.parameters(((0.6, 0.3),), ((0.0, 0.5),), ((0.5, 1.0),))
    def test_bad_boundaries(self, boundaries):
        with self.assertRaisesRegex(ValueError, 'boundaries'):
            schedules.stagewise(0.1, num_steps=10, boundaries=boundaries)

    @parameterized.parameters(0.0, 0.1)
    def test_cosine_matches_closed_form_and_keras(self, alpha):
        s = schedules.cosine(learning_rate=0.5, num_steps=40, alpha=alpha)
        ref = keras.optimizers.schedules.CosineDecay(0.5, 40, alpha=alpha)
        for t in (0, 1, 13, 20, 39, 40, 55):
            self.assertAllClose(float(s(t)), numpy_rate('cosine', 0.5, 40, t, alpha=alpha), rtol=1e-6)
            self.assertAllClose(float(s(t)), float(ref(t)), rtol=1e-6)

    @parameterized.parameters('constant', 'stagewise', 'cosine')
    def test_warmup_composes(self, name):
        s = schedules.make(name, 0.3, num_steps=20, warmup_steps=4)
        for t in range(25):
            self.assertAllClose(float(s(t)), numpy_rate(name, 0.3, 20, t, warmup_steps=4), rtol=1e-6, msg=f'{t}')

    @parameterized.named_parameters(
        ('constant', 'constant', 0), ('stagewise', 'stagewise', 0), ('cosine', 'cosine', 0),
        ('warmup_constant', 'constant', 3), ('warmup_cosine', 'cosine', 2))
    def test_drives_sgd_like_numpy(self, name, warmup_steps):
        data = testing.blobs(num_train=24)
        model = optimizers_test.linear_model()
        w0 = model.get_weights()[0].astype(np.float64)
        steps = 8
        trainer.Trainer(model, losses.cross_entropy, 3, learning_rate=0.5, schedule=name, warmup_steps=warmup_steps,
                        momentum=0.5, batch_size=64, num_steps=steps, eval_every=100, log_every=100,
                        checkpoint_every=100).fit(data, tempfile.mkdtemp(), 0)
        want = optimizers_test.numpy_train(
            w0, data.train.images.astype(np.float64), data.train.labels, 'sgd',
            lambda t: numpy_rate(name, 0.5, steps, t, warmup_steps), steps, momentum=0.5)
        self.assertAllClose(model.get_weights()[0], want, rtol=1e-4, atol=1e-5)

    def test_unknown_name_lists_valid_ones(self):
        with self.assertRaisesRegex(ValueError, r"Unknown learning-rate schedule 'cosin'; valid: \['constant', "
                                                r"'cosine', 'stagewise'\]"):
            schedules.make('cosin', 0.1, 10)

    def test_bad_warmup(self):
        with self.assertRaisesRegex(ValueError, 'warmup_steps must be an integer >= 0'):
            schedules.make('constant', 0.1, 10, warmup_steps=-1)

    def test_bad_rate(self):
        with self.assertRaisesRegex(ValueError, 'learning_rate must be > 0'):
            schedules.constant(-1.0)


if __name__ == '__main__':
    tf.test.main()
