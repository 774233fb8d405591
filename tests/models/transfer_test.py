"""Tests for extreme_mem/models/transfer.py: re-scaling, layer transfer, covariance inits, AUC."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.geometry import covariance
from extreme_mem.models import simple_cnn, transfer


def _cnn(seed, num_outputs=4, **kwargs):
    return simple_cnn.simple_cnn((6, 6, 2), num_outputs, num_conv_layers=2, num_filters=5, num_units=7,
                                 pool_size=2, seed=seed, **kwargs)


def _perturb(model, seed):
    """Random weights and non-zero biases of various scales (a 'trained' model)."""
    rng = np.random.default_rng(seed)
    for layer in transfer.kernel_layers(model):
        layer.set_weights([rng.normal(scale=rng.uniform(0.2, 3.0), size=w.shape).astype(np.float32)
                           for w in layer.get_weights()])


class RescaleTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters('l2', 'l1')
    def test_rescaling_preserves_predictions_and_matches_init_norms(self, norm):
        init, trained = _cnn(0), _cnn(0)
        _perturb(trained, 1)
        x = np.random.default_rng(2).normal(size=(32, 6, 6, 2)).astype(np.float32)
        before = trained(x).numpy()
        factors = transfer.rescale_to_norms(trained, transfer.layer_norms(init, norm), norm)
        after = trained(x).numpy()
        np.testing.assert_array_equal(after.argmax(-1), before.argmax(-1))
        np.testing.assert_allclose(after, before * np.prod(list(factors.values())), rtol=1e-4, atol=1e-6)
        for layer in transfer.kernel_layers(init):
            weights = np.concatenate([w.ravel() for w in trained.get_layer(layer.name).get_weights()])
            want = np.concatenate([w.ravel() for w in layer.get_weights()])
            ord_ = 1 if norm == 'l1' else 2
            self.assertAllClose(np.linalg.norm(weights, ord_), np.linalg.norm(want, ord_), rtol=1e-5)

    def test_literal_rescaling_preserves_predictions_without_biases(self):
        init, trained = _cnn(0), _cnn(0)
        _perturb(trained, 3)
        for layer in transfer.kernel_layers(trained):
            w = layer.get_weights()
            layer.set_weights([w[0], np.zeros_like(w[1])])
        x = np.random.default_rng(4).normal(size=(16, 6, 6, 2)).astype(np.float32)
        before = trained(x).numpy()
        transfer.rescale_to_norms(trained, transfer.layer_norms(init), preserve_predictions=False)
        np.testing.assert_array_equal(trained(x).numpy().argmax(-1), before.argmax(-1))

    def test_refuses_normalisation_layers(self):
        inputs = keras.Input((4,))
        h = keras.layers.Dense(4, name='fc')(inputs)
        h = keras.layers.LayerNormalization(name='ln')(h)
        model = keras.Model(inputs, keras.layers.Dense(2, name='logits')(h))
        with self.assertRaisesRegex(ValueError, 'normalisation layers'):
            transfer.rescale_to_norms(model, transfer.layer_norms(model))


class TransferTest(tf.test.TestCase):

    def test_transfer_first_k_layers_keeps_fresh_head(self):
        upstream, fresh = _cnn(0, num_outputs=9), _cnn(5, num_outputs=4)
        _perturb(upstream, 6)
        head = fresh.get_layer('logits').get_weights()
        fc = fresh.get_layer('fc').get_weights()
        self.assertEqual(transfer.transfer_layers(fresh, upstream, 1), ['conv1'])
        self.assertAllEqual(fresh.get_layer('conv1').get_weights()[0], upstream.get_layer('conv1').get_weights()[0])
        self.assertNotAllClose(fresh.get_layer('conv2').get_weights()[0], upstream.get_layer('conv2').get_weights()[0])
        self.assertEqual(transfer.transfer_layers(fresh, upstream, None), ['conv1', 'conv2', 'fc'])
        self.assertAllEqual(fresh.get_layer('logits').get_weights()[0], head[0])
        self.assertNotAllClose(fresh.get_layer('fc').get_weights()[0], fc[0])
        with self.assertRaisesRegex(ValueError, r'num_layers must be in \[0, 3\]'):
            transfer.transfer_layers(fresh, upstream, 4)

    def test_arms(self):
        for arm in transfer.ARMS:
            upstream, init, fresh = _cnn(0, 9), _cnn(0, 9), _cnn(1)
            _perturb(upstream, 7)
            raw_conv = upstream.get_layer('conv1').get_weights()[0].copy()
            fresh_before = [w.copy() for w in fresh.get_weights()]
            info = transfer.prepare_downstream(arm, fresh, upstream, init, seed=0)
            conv = fresh.get_layer('conv1').get_weights()
            if arm == 'scratch':
                for a, b in zip(fresh.get_weights(), fresh_before):
                    self.assertAllEqual(a, b)
                continue
            if arm == 'no_rescale':
                self.assertAllEqual(conv[0], raw_conv)
                self.assertEqual(info['transferred'], ['conv1', 'conv2', 'fc'])
            elif arm == 'covariance_init':
                self.assertAllEqual(conv[1], np.zeros_like(conv[1]))
                self.assertNotAllClose(conv[0], upstream.get_layer('conv1').get_weights()[0])
                self.assertAllEqual(fresh.get_layer('fc').get_weights()[0], fresh_before[4])
            else:
                factor = info['rescale_factors']['conv1']
                self.assertAllClose(conv[0], raw_conv * factor, rtol=1e-6)
                want = ['conv1', 'conv2'] + (['fc'] if arm == 'pretrained_conv_dense' else [])
                self.assertEqual(info['transferred'], want)
        with self.assertRaisesRegex(ValueError, "Unknown transfer arm 'finetune'"):
            transfer.prepare_downstream('finetune', fresh)

    def test_covariance_init_reproduces_second_moment(self):
        inputs = keras.Input((3, 3, 1))
        h = keras.layers.Conv2D(4000, 3, name='conv1')(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2, name='logits')(keras.layers.Flatten()(h)))
        source_kernel = np.random.default_rng(0).normal(size=(3, 3, 1, 4000)) * np.linspace(0.1, 2, 9).reshape(3, 3, 1, 1)
        source_kernel = source_kernel.astype(np.float32)
        target = keras.models.clone_model(model)
        model.get_layer('conv1').set_weights([source_kernel, np.ones(4000, np.float32)])
        transfer.covariance_init(target, model, ['conv1'], seed=1)
        got = covariance.filter_covariance(target.get_layer('conv1').get_weights()[0], center=False)
        want = covariance.filter_covariance(source_kernel, center=False)
        self.assertAllClose(got, want, atol=0.15 * np.max(np.diag(want)))
        self.assertAllEqual(target.get_layer('conv1').get_weights()[1], np.zeros(4000))

    def test_data_covariance_init_uses_input_eigenvectors_layer_by_layer(self):
        model = _cnn(0)
        x = np.random.default_rng(1).normal(size=(40, 6, 6, 2)).astype(np.float32) * np.array([1.0, 3.0], np.float32)
        names = transfer.data_covariance_init(model, x, 2, seed=0)
        self.assertEqual(names, ['conv1', 'conv2'])
        sigma = covariance.patch_covariance(x, 3, 1, 'same')
        _, vectors = np.linalg.eigh(sigma)
        top = vectors[:, ::-1][:, :5]
        filters = covariance.filter_matrix(model.get_layer('conv1').get_weights()[0])
        self.assertAllClose(np.abs(filters @ top), np.eye(5), atol=1e-4)
        feed = keras.Model(model.inputs, model.get_layer('conv2').input)
        sigma2 = covariance.patch_covariance(feed(x).numpy(), 3, 1, 'same')
        _, v2 = np.linalg.eigh(sigma2)
        filters2 = covariance.filter_matrix(model.get_layer('conv2').get_weights()[0])
        self.assertAllClose(np.abs(filters2 @ v2[:, ::-1][:, :5]), np.eye(5), atol=1e-3)


class AucTest(tf.test.TestCase):

    def test_auc_against_closed_forms(self):
        self.assertAllClose(transfer.training_auc([0, 10], [1.0, 1.0]), 1.0)
        self.assertAllClose(transfer.training_auc([0, 5, 10], [0.0, 0.5, 1.0]), 0.5)
        steps = np.linspace(0, 100, 101)
        self.assertAllClose(transfer.training_auc(steps, (steps / 100) ** 2), 1 / 3, atol=1e-4)
        # stops at step 50 with accuracy 1: flat extension to the budget.
        self.assertAllClose(transfer.training_auc([0, 50], [0.0, 1.0], num_steps=100), 0.75)
        with self.assertRaisesRegex(ValueError, 'strictly increasing'):
            transfer.training_auc([0, 0], [0.1, 0.2])


if __name__ == '__main__':
    tf.test.main()
