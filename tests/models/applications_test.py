"""Tests for extreme_mem/models/applications.py: ResNet-50 / DenseNet-121 factories (weights=None)."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.models import applications, base

FACTORIES = {'resnet50': applications.resnet50, 'densenet121': applications.densenet121}
# Parameters of the Keras backbones (include_top=False) for one input channel.
BACKBONE_PARAMS = {'resnet50': 23_581_440, 'densenet121': 7_031_232}


class ApplicationsTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters('resnet50', 'densenet121')
    def test_shapes_probe_and_flat_layers(self, name):
        model = FACTORIES[name]((32, 32, 1), 7, seed=0)
        self.assertEqual(model.output_shape, (None, 7))
        features = {'resnet50': 2048, 'densenet121': 1024}[name]
        self.assertEqual(model.get_layer('logits').kernel.shape, (features, 7))
        self.assertEqual(model.count_params(), BACKBONE_PARAMS[name] + features * 7 + 7)
        self.assertEqual(list(base.probe_layers(model)), ['features'])
        # Backbone layers are top-level layers of the model (addressable by name), not one nested model.
        self.assertNotIn('Functional', [type(l).__name__ for l in model.layers])
        self.assertIn('conv1_conv', [l.name for l in model.layers])
        logits, reps = base.with_probes(model)(np.zeros((2, 32, 32, 1), np.float32))
        self.assertEqual(logits.shape, (2, 7))
        self.assertEqual(reps['features'].shape, (2, features))

    @parameterized.parameters('resnet50', 'densenet121')
    def test_registered(self, name):
        self.assertIs(registry.MODELS.get(name), FACTORIES[name])

    def test_logits_layer_is_seeded_glorot_with_zero_bias(self):
        a = applications.densenet121((32, 32, 3), 10, seed=3).get_layer('logits').get_weights()
        b = applications.densenet121((32, 32, 3), 10, seed=3).get_layer('logits').get_weights()
        self.assertAllEqual(a[0], b[0])
        self.assertAllEqual(a[1], np.zeros(10))
        bound = np.sqrt(6 / (1024 + 10))
        self.assertLessEqual(np.abs(a[0]).max(), bound)

    @parameterized.parameters(((8, 8, 1),), ((31, 40, 3),), ((1024,),))
    def test_rejects_small_or_flat_inputs(self, shape):
        with self.assertRaisesRegex(ValueError, 'resnet50 needs'):
            applications.resnet50(shape, 10)

    def test_rejects_unknown_pooling(self):
        with self.assertRaisesRegex(ValueError, "Unknown pooling 'mean'"):
            applications.resnet50((32, 32, 3), 10, pooling='mean')


if __name__ == '__main__':
    tf.test.main()
