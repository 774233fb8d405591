"""Tests for the activation_sparsity plugin against direct numpy counts."""

import os

import keras
import numpy as np
import tensorflow as tf

from extreme_mem import registry
from extreme_mem.data import base as data_base
from extreme_mem.metrics import activation_sparsity
from extreme_mem.metrics import base


def _model():
    inputs = keras.Input((4, 4, 1), name='x')
    h = keras.layers.Conv2D(3, 3, padding='same', name='conv1')(inputs)
    h = keras.layers.Activation('relu', name='conv1_rep')(h)
    h = keras.layers.Dense(5, name='fc')(keras.layers.Flatten()(h))
    h = keras.layers.Activation('relu', name='fc_rep')(h)
    return keras.Model(inputs, keras.layers.Dense(2, name='logits')(h))


def _data(n=30):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4, 4, 1)).astype(np.float32)
    y = (np.arange(n) % 2).astype(np.int32)
    split = data_base.Split(x, y, y, np.arange(n))
    return data_base.Data(split, split, data_base.DatasetInfo('toy', 2, (4, 4, 1)))


class ActivationSparsityTest(tf.test.TestCase):

    def test_against_numpy_count(self):
        model, data = _model(), _data()
        # Make one fc unit dead: a large negative bias.
        kernel, bias = model.get_layer('fc').get_weights()
        bias[2] = -1e3
        model.get_layer('fc').set_weights([kernel, bias])
        plugin = registry.METRICS.get('activation_sparsity')(num_examples=None)
        results = plugin.evaluate(base.EvalContext(step=7, model=model, data=data, evals={}))
        for layer in ('conv1', 'fc'):
            rep = keras.Model(model.inputs, model.get_layer(f'{layer}_rep').output)(data.test.images).numpy()
            active = rep.reshape(len(rep), -1) > 0
            self.assertAllClose(results[f'eval/inactive_fraction/{layer}'], 1 - active.sum() / active.size)
            dead = np.mean([not active[:, j].any() for j in range(active.shape[1])])
            self.assertAllClose(results[f'eval/dead_fraction/{layer}'], dead)
            neuron = plugin.distributions[7][layer]['neuron_rates']
            example = plugin.distributions[7][layer]['example_rates']
            self.assertAllClose(neuron, [active[:, j].sum() / len(active) for j in range(active.shape[1])])
            self.assertAllClose(example, [active[i].sum() / active.shape[1] for i in range(len(active))])
        self.assertGreaterEqual(results['eval/dead_fraction/fc'], 0.2)

    def test_channel_units_and_threshold(self):
        reps = np.zeros((2, 2, 2, 3))
        reps[0, 1, 1, 0] = 0.5
        reps[1, 0, 0, 2] = 2.0
        active = activation_sparsity.activity(reps, threshold=1.0, unit='channel')
        self.assertAllEqual(active, [[False, False, False], [False, False, True]])
        stats = activation_sparsity.sparsity_stats(active)
        self.assertAllClose(stats['dead_fraction'], 2 / 3)
        self.assertAllClose(stats['inactive_fraction'], 5 / 6)

    def test_writes_histograms_and_png(self):
        workdir = self.create_tempdir().full_path
        plugin = activation_sparsity.ActivationSparsity(num_examples=10)
        plugin.set_logdir(workdir)
        plugin.evaluate(base.EvalContext(step=0, model=_model(), data=_data(), evals={}))
        dists = activation_sparsity.load_distributions(workdir)
        self.assertEqual(sorted(dists[0]), ['conv1', 'fc'])
        self.assertLen(dists[0]['fc']['example_rates'], 10)
        self.assertNotEmpty(os.listdir(os.path.join(workdir, 'tensorboard', 'eval')))
        path = os.path.join(workdir, 'fig.png')
        self.assertTrue(activation_sparsity.plot_distributions(dists[0], path, 'test'))
        self.assertTrue(os.path.getsize(path) > 0)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "Unknown unit 'neuron'"):
            activation_sparsity.ActivationSparsity(unit='neuron')
        with self.assertRaisesRegex(ValueError, "Unknown split 'valid'"):
            activation_sparsity.ActivationSparsity(split='valid')


if __name__ == '__main__':
    tf.test.main()
