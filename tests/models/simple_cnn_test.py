"""Tests for the Maennel et al. (2020) models: Simple CNN, VGG-16 (config D), ResNet-18 v2 GroupNorm."""

import numpy as np
import tensorflow as tf

from extreme_mem.models import base, resnet18_gn, simple_cnn, transfer, vgg16


class SimpleCnnTest(tf.test.TestCase):

    def test_matches_numpy_forward(self):
        model = simple_cnn.simple_cnn((5, 5, 2), 3, num_conv_layers=1, num_filters=4, num_units=6, padding='valid',
                                      seed=0)
        rng = np.random.default_rng(0)
        for layer in transfer.kernel_layers(model):
            layer.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in layer.get_weights()])
        x = rng.normal(size=(2, 5, 5, 2)).astype(np.float32)
        k, b, w1, b1, w2, b2 = model.get_weights()
        conv = np.zeros((2, 3, 3, 4))
        for i in range(3):
            for j in range(3):
                conv[:, i, j] = np.einsum('nabc,abco->no', x[:, i:i + 3, j:j + 3], k) + b
        h = np.maximum(np.maximum(conv, 0).reshape(2, -1) @ w1 + b1, 0)
        self.assertAllClose(model(x), h @ w2 + b2, rtol=1e-4, atol=1e-4)

    def test_he_normal_scale_and_zero_biases(self):
        model = simple_cnn.simple_cnn((8, 8, 3), 10, num_filters=512, init_scale=0.5, seed=1)
        kernel, bias = model.get_layer('conv1').get_weights()
        self.assertAllClose(kernel.std(), 0.5 * np.sqrt(2 / 27), rtol=0.05)
        self.assertAllEqual(bias, np.zeros_like(bias))
        self.assertEqual(list(base.probe_layers(model)), ['conv1', 'fc'])
        ortho = simple_cnn.simple_cnn((8, 8, 1), 10, num_filters=9, init_algorithm='orthogonal', init_scale=2.0)
        f = ortho.get_layer('conv1').get_weights()[0].reshape(9, 9)
        self.assertAllClose(f.T @ f, 4.0 * np.eye(9), atol=1e-4)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "Unknown init_algorithm 'lecun'"):
            simple_cnn.simple_cnn((8, 8, 1), 10, init_algorithm='lecun')
        with self.assertRaisesRegex(ValueError, "Unknown padding 'full'"):
            simple_cnn.simple_cnn((8, 8, 1), 10, padding='full')


class Vgg16Test(tf.test.TestCase):

    def test_configuration_d_without_fc4096(self):
        model = vgg16.vgg16_d((32, 32, 3), 10, seed=0)
        convs = transfer.conv_layers(model)
        self.assertEqual([l.filters for l in convs], [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512])
        self.assertEqual([l.name for l in transfer.kernel_layers(model)][-1], 'logits')
        self.assertLen(transfer.kernel_layers(model), 14)  # 13 convs + head, no FC-4096
        self.assertEqual(model.get_layer('flatten').output.shape[-1], 512)
        # 14,714,688 conv parameters in configuration D + 5,130 for the head.
        self.assertEqual(model.count_params(), 14_714_688 + 5_130)

    def test_small_inputs_and_width(self):
        model = vgg16.vgg16_d((8, 8, 1), 10, width_multiplier=0.125, seed=0)
        self.assertEqual(model(np.zeros((2, 8, 8, 1), np.float32)).shape, (2, 10))
        self.assertEqual(transfer.conv_layers(model)[0].filters, 8)


class Resnet18Test(tf.test.TestCase):

    def test_structure(self):
        model = resnet18_gn.resnet18_gn((32, 32, 3), 10, seed=0)
        convs = [l for l in transfer.conv_layers(model) if not l.name.endswith('proj')]
        self.assertLen(convs, 17)  # stem + 16 block convs (+ head = 18 layers)
        self.assertFalse(any(l.use_bias for l in transfer.conv_layers(model)))
        self.assertEqual(model.get_layer('final_gn').groups, 32)
        self.assertEqual(model.get_layer('s4b2_conv2').filters, 512)
        self.assertEqual(model.output_shape, (None, 10))

    def test_pre_activation_block_forward(self):
        model = resnet18_gn.resnet18_gn((8, 8, 1), 3, width=4, blocks_per_stage=(1,), groups=2, seed=0)
        self.assertEqual(model(np.ones((2, 8, 8, 1), np.float32)).shape, (2, 3))
        self.assertIn('s1b1', base.probe_layers(model))


if __name__ == '__main__':
    tf.test.main()
