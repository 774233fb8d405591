"""Tests for the covariance_alignment plugin and the gaussian_covariance dataset."""

import keras
import numpy as np
import tensorflow as tf

from extreme_mem.data import gaussian_covariance
from extreme_mem.geometry import covariance
from extreme_mem.metrics import base
from extreme_mem.metrics import covariance_alignment


class CovarianceAlignmentTest(tf.test.TestCase):

    def test_dense_layer_aligned_and_misaligned(self):
        data = gaussian_covariance.GaussianCovariance(num_train=4000, num_test=10,
                                                      variances=[4.0, 2.0, 1.0, 0.5]).load(seed=0)
        inputs = keras.Input((4,))
        h = keras.layers.Dense(400, name='hidden1')(inputs)
        model = keras.Model(inputs, keras.layers.Dense(3, name='logits')(h))
        rng = np.random.default_rng(0)
        taus = np.array([0.5, 2.0, 1.0, 0.3])
        model.get_layer('hidden1').set_weights([(rng.normal(size=(400, 4)) * taus).T.astype(np.float32),
                                                np.zeros(400, np.float32)])
        plugin = covariance_alignment.CovarianceAlignment(num_examples=None, num_random_bases=25,
                                                          transfer_function=True)
        out = plugin.evaluate(base.EvalContext(step=0, model=model, data=data, evals={}))
        sigma_x = covariance.covariance(data.train.images)
        sigma_w = covariance.filter_covariance(model.get_layer('hidden1').get_weights()[0])
        self.assertAllClose(out['eval/misalignment/data/hidden1'], covariance.misalignment(sigma_x, sigma_w))
        self.assertLess(out['eval/misalignment/data/hidden1'], 0.05)
        self.assertGreater(out['eval/misalignment/random_mean/hidden1'], 5 * out['eval/misalignment/data/hidden1'])
        # f(σ): σ_i sorted descending are ~ (2, 1.41, 1, 0.71); τ_i ~ taus in the same order.
        sig = [out[f'eval/transfer_sigma/hidden1/{i}'] for i in range(4)]
        tau = [out[f'eval/transfer_tau/hidden1/{i}'] for i in range(4)]
        self.assertAllClose(sig, np.sqrt([4.0, 2.0, 1.0, 0.5]), rtol=0.05)
        self.assertAllClose(tau, taus, rtol=0.1)

    def test_conv_layer_uses_patches(self):
        images = np.random.default_rng(1).normal(size=(20, 5, 5, 1)).astype(np.float32)
        inputs = keras.Input((5, 5, 1))
        h = keras.layers.Conv2D(30, 3, padding='valid', name='conv1')(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2, name='logits')(keras.layers.Flatten()(h)))
        got = covariance_alignment.layer_input_covariance(model, 'conv1', images)
        self.assertAllClose(got, np.cov(covariance.patches(images, 3), rowvar=False, bias=True))
        with self.assertRaisesRegex(ValueError, 'has no kernel'):
            covariance_alignment.layer_input_covariance(model, model.layers[0].name, images)


class GaussianCovarianceTest(tf.test.TestCase):

    def test_statistics(self):
        data = gaussian_covariance.GaussianCovariance(num_train=20000, num_test=100).load(seed=3)
        self.assertEqual(data.info.input_shape, (30,))
        self.assertAllClose(data.train.images.var(axis=0), np.arange(1, 31) / 10, rtol=0.05)
        counts = np.bincount(data.train.labels, minlength=10) / 20000
        self.assertAllClose(counts, np.full(10, 0.1), atol=0.01)
        again = gaussian_covariance.GaussianCovariance(num_train=20000, num_test=100).load(seed=4)
        self.assertAllEqual(again.train.images, data.train.images)  # data_seed, not the run seed


if __name__ == '__main__':
    tf.test.main()
