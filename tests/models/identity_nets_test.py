"""Tests for extreme_mem/models/identity_nets.py: shapes, parameter counts, any input size, knobs."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.models import identity_nets as nets


class IdentityNetsTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(0, 1, 3)
    def test_cnn_parameter_count_and_shape(self, depth):
        k, ch, c = 5, 6, 2
        model = nets.identity_cnn((9, 9, c), depth=depth, channels=ch, kernel_size=k, seed=0)
        # Hand count: first conv k·k·c·ch + ch, middle convs k·k·ch·ch + ch, output k·k·ch_in·c + c.
        if depth == 0:
            expected = k * k * c * c + c
        else:
            expected = (k * k * c * ch + ch) + (depth - 1) * (k * k * ch * ch + ch) + (k * k * ch * c + c)
        self.assertEqual(model.count_params(), expected)
        x = np.ones((2, 9, 9, c), np.float32)
        self.assertEqual(model(x).shape, (2, 9, 9, c))

    def test_cnn_is_fully_convolutional(self):
        model = nets.identity_cnn((28, 28, 1), depth=2, channels=4, seed=0)
        for size in (7, 112):
            self.assertEqual(model(np.zeros((1, size, size, 1), np.float32)).shape, (1, size, size, 1))

    def test_cnn_with_identity_centre_taps_is_the_identity(self):
        # Appendix B.3: a kernel whose only non-zero entry is the centre realises the identity.
        model = nets.identity_cnn((8, 8, 1), depth=0, kernel_size=5, use_bias=False, seed=0)
        kernel = np.zeros((5, 5, 1, 1), np.float32)
        kernel[2, 2, 0, 0] = 1.0
        model.get_layer('output').set_weights([kernel])
        x = np.random.default_rng(0).normal(size=(3, 8, 8, 1)).astype(np.float32)
        self.assertAllClose(model(x), x)

    def test_linear_no_bias_is_one_square_matrix(self):
        model = nets.identity_linear((4, 4, 1), depth=1, use_bias=False, seed=0)
        self.assertEqual([tuple(w.shape) for w in model.trainable_weights], [(16, 16)])
        w = model.trainable_weights[0].numpy()
        x = np.random.default_rng(1).normal(size=(2, 4, 4, 1)).astype(np.float32)
        self.assertAllClose(model(x).numpy().reshape(2, 16), x.reshape(2, 16) @ w, atol=1e-5)

    def test_multilayer_linear_has_no_bottleneck(self):
        model = nets.identity_linear((3, 3, 1), depth=3, use_bias=True, seed=0)
        self.assertEqual(model.count_params(), 3 * (9 * 9 + 9))

    def test_fcn_widths_and_relu(self):
        model = nets.identity_fcn((2, 3, 1), depth=2, width=10, seed=0)
        self.assertEqual(model.count_params(), (6 * 10 + 10) + (10 * 10 + 10) + (10 * 6 + 6))
        self.assertEqual(model.get_layer('hidden1_rep').activation.__name__, 'relu')
        self.assertEqual(model(np.zeros((1, 2, 3, 1), np.float32)).shape, (1, 2, 3, 1))

    def test_seed_gives_repeatable_weights(self):
        a = nets.identity_cnn((5, 5, 1), depth=1, channels=3, seed=4).get_weights()
        b = nets.identity_cnn((5, 5, 1), depth=1, channels=3, seed=4).get_weights()
        for x, y in zip(a, b):
            self.assertAllEqual(x, y)

    def test_pytorch_default_initializer_bound(self):
        model = nets.identity_cnn((5, 5, 1), depth=1, channels=16, kernel_size=3, initializer='pytorch_default',
                                  seed=0)
        kernel = model.get_layer('output').kernel.numpy()  # fan_in = 3·3·16 = 144 -> U(±1/12)
        self.assertLessEqual(np.abs(kernel).max(), 1 / 12 + 1e-7)
        self.assertGreater(np.abs(kernel).max(), 0.9 / 12)

    def test_bad_values_name_the_choices(self):
        with self.assertRaisesRegex(ValueError, 'pytorch_default'):
            nets.identity_cnn((5, 5, 1), initializer='magic')
        with self.assertRaisesRegex(ValueError, 'odd kernel_size'):
            nets.identity_cnn((5, 5, 1), kernel_size=4)
        with self.assertRaisesRegex(ValueError, 'depth must be an integer >= 1'):
            nets.identity_linear((5, 5, 1), depth=0)
        with self.assertRaisesRegex(ValueError, r'\(H, W, C\)'):
            nets.identity_fcn((25,))

    def test_registered(self):
        self.assertIs(registry.MODELS.get('identity_cnn'), nets.identity_cnn)
        self.assertIs(registry.MODELS.get('identity_fcn'), nets.identity_fcn)
        self.assertIs(registry.MODELS.get('identity_linear'), nets.identity_linear)


if __name__ == '__main__':
    tf.test.main()
