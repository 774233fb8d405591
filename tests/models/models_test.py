"""Tests for extreme_mem/models: shapes, probe naming, init scale statistics."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.models import base, convnet, initializers, mlp


class MlpTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters('sin', 'relu', 'sigmoid', 'linear', 'tanh')
    def test_activation_matches_numpy(self, activation):
        model = mlp.mlp((3,), 2, width=4, activation=activation, seed=0)
        x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
        w1, w2 = model.get_weights()
        f = {'sin': np.sin, 'relu': lambda z: np.maximum(z, 0), 'sigmoid': lambda z: 1 / (1 + np.exp(-z)),
             'linear': lambda z: z, 'tanh': np.tanh}[activation]
        self.assertAllClose(model(x), f(x @ w1) @ w2, rtol=1e-5, atol=1e-5)

    @parameterized.parameters(1e-3, 1.0, 10.0)
    def test_normal_init_scale_is_stddev(self, sigma):
        model = mlp.mlp((784,), 10, width=512, init_scale=[sigma, 1.0], seed=1)
        w1 = model.get_layer('hidden').kernel.numpy()
        self.assertAllClose(w1.std(), sigma, rtol=0.02)
        self.assertAllClose(w1.mean(), 0.0, atol=0.01 * sigma)

    def test_glorot_top_layer_bound(self):
        model = mlp.mlp((10,), 10, width=1024, seed=0)
        w2 = model.get_layer('logits').kernel.numpy()
        bound = np.sqrt(6 / (1024 + 10))
        self.assertLessEqual(np.abs(w2).max(), bound)
        self.assertGreater(np.abs(w2).max(), 0.9 * bound)

    def test_depth_names_and_probes(self):
        model = mlp.mlp((8, 8, 1), 10, depth=3, width=16, initializer='he_normal', init_scale=1.0, use_bias=True)
        self.assertEqual(list(base.probe_layers(model)), ['hidden1', 'hidden2', 'hidden3'])
        self.assertEqual(model.output_shape, (None, 10))
        self.assertLen(model.trainable_variables, 8)
        logits, reps = base.with_probes(model)(np.zeros((2, 8, 8, 1), np.float32))
        self.assertEqual(reps['hidden2'].shape, (2, 16))

    def test_same_seed_same_weights(self):
        a = mlp.mlp((4,), 3, width=8, seed=7).get_weights()
        b = mlp.mlp((4,), 3, width=8, seed=7).get_weights()
        for x, y in zip(a, b):
            self.assertAllEqual(x, y)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "Unknown activation 'swish'"):
            mlp.mlp((4,), 3, activation='swish')
        with self.assertRaisesRegex(ValueError, 'expected one per layer'):
            mlp.mlp((4,), 3, depth=2, init_scale=[1.0, 1.0])
        with self.assertRaisesRegex(ValueError, "Unknown initializer 'xavier'"):
            initializers.make_initializer('xavier')


class ConvnetTest(tf.test.TestCase):

    def test_appendix_h_shapes(self):
        model = convnet.convnet((32, 32, 3), 10, seed=0)
        self.assertEqual(model.get_layer('conv1').kernel.shape, (5, 5, 3, 32))
        self.assertEqual(model.get_layer('conv2').kernel.shape, (5, 5, 32, 64))
        self.assertEqual(model.get_layer('pool2').output.shape, (None, 8, 8, 64))
        self.assertEqual(model.get_layer('fc').kernel.shape, (8 * 8 * 64, 1024))
        self.assertEqual(list(base.probe_layers(model)), ['conv1', 'conv2', 'fc'])
        self.assertEqual(model(np.zeros((2, 32, 32, 3), np.float32)).shape, (2, 10))

    def test_rejects_flat_input(self):
        with self.assertRaisesRegex(ValueError, 'needs \\(H, W, C\\)'):
            convnet.convnet((64,), 10)


if __name__ == '__main__':
    tf.test.main()
