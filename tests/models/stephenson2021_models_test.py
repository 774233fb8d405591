"""Tests for the CIFAR-sized convnets of Stephenson et al. (2021) appendix A.10: models/vgg.py,
models/alexnet.py, models/resnet.py and models/units.py. Parameter counts are checked against
counts derived by hand from the paper's tables (and the published CIFAR ResNet-18 count)."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.models import alexnet
from extreme_mem.models import base
from extreme_mem.models import resnet
from extreme_mem.models import units
from extreme_mem.models import vgg


def _trainable(model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_weights))


def _conv(k, cin, cout, bn=True):
    return k * k * cin * cout + (2 * cout if bn else cout)  # BN: gamma + beta; else a bias


class ModelsTest(tf.test.TestCase, parameterized.TestCase):

    def test_vgg16_matches_table_3(self):
        model = vgg.vgg16((32, 32, 3), 100, seed=0)
        widths = [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
        expected = sum(_conv(3, cin, cout) for cin, cout in zip([3] + widths[:-1], widths))
        expected += (512 * 4096 + 4096) + (4096 * 4096 + 4096) + (4096 * 100 + 100)
        self.assertEqual(_trainable(model), expected)
        self.assertEqual(list(base.probe_layers(model)), [f'conv{k}' for k in range(1, 14)] + ['fc1', 'fc2'])
        self.assertEqual(model(np.zeros((2, 32, 32, 3), np.float32)).shape, (2, 100))

    def test_alexnet_matches_table_2(self):
        model = alexnet.alexnet((32, 32, 3), 100, seed=0)
        expected = (_conv(11, 3, 64, False) + _conv(5, 64, 192, False) + _conv(3, 192, 384, False)
                    + _conv(3, 384, 256, False) + _conv(3, 256, 1024, False) + 1024 * 100 + 100)
        self.assertEqual(_trainable(model), expected)
        self.assertEqual(model.get_layer('flatten').output.shape[-1], 1024)  # 1x1x1024 before the logits
        self.assertEqual(list(base.probe_layers(model)), [f'conv{k}' for k in range(1, 6)])

    def test_resnet18_matches_the_published_cifar_count(self):
        model = resnet.resnet18((32, 32, 3), 100, seed=0)
        # CIFAR ResNet-18: 11,173,962 trainable parameters with 10 classes; 100 classes add 90 x 513.
        self.assertEqual(_trainable(model), 11_173_962 + 90 * 513)
        probes = list(base.probe_layers(model))
        self.assertLen(probes, 17)  # stem + 16 block convs; shortcuts carry no probe
        self.assertEqual(probes[0], 'conv1')
        self.assertEqual(probes[-1], 's4b2_conv2')
        self.assertEqual(model.get_layer('s4b2_conv2_rep').output.shape[1:], (4, 4, 512))

    def test_resnet18_width_multiplier_scales_every_width(self):
        model = resnet.resnet18((32, 32, 3), 10, width_multiplier=0.25, seed=0)
        self.assertEqual(model.get_layer('conv1').filters, 16)
        self.assertEqual(model.get_layer('s4b1_shortcut').filters, 128)
        self.assertEqual(model.get_layer('pool').output.shape[-1], 128)

    @parameterized.parameters('vgg16', 'alexnet', 'resnet18')
    def test_seed_makes_weights_repeatable(self, name):
        build = registry.MODELS.get(name)
        a = build((32, 32, 3), 10, width_multiplier=0.125, seed=3)
        b = build((32, 32, 3), 10, width_multiplier=0.125, seed=3)
        for x, y in zip(a.weights, b.weights):
            self.assertAllEqual(x.numpy(), y.numpy())

    def test_bad_inputs_name_the_value(self):
        with self.assertRaisesRegex(ValueError, r'vgg16 needs \(H, W, C\) image inputs, got input_shape=\(1024,\)'):
            vgg.vgg16((1024,), 10)
        with self.assertRaisesRegex(ValueError, 'at least 32x32'):
            vgg.vgg16((16, 16, 3), 10)
        with self.assertRaisesRegex(ValueError, 'width_multiplier must be > 0, got 0'):
            units.scaled(64, 0)


if __name__ == '__main__':
    tf.test.main()
