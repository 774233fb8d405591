"""Tests for extreme_mem/analysis/rewinding.py: a numpy forward pass is the oracle."""

import os

import keras
import numpy as np
import tensorflow as tf

from extreme_mem.analysis import rewinding
from extreme_mem.models import mlp
from extreme_mem.models import resnet


def _forward(state, x):
    """ReLU MLP with biases, in numpy, from a weight state."""
    h = x
    for name in ('hidden1', 'hidden2'):
        w, b = state[name]
        h = np.maximum(h @ w + b, 0.0)
    w, b = state['logits']
    return h @ w + b


def _randomize(model, rng):
    for v in model.weights:
        v.assign(rng.normal(size=v.shape).astype(np.float32))


class RewindingTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.model = mlp.mlp((6,), 3, depth=2, width=5, activation='relu', initializer='glorot_uniform',
                              init_scale=1.0, use_bias=True, seed=0)
        self.x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)

    def test_rewinding_one_layer_mixes_the_states(self):
        rng = np.random.default_rng(2)
        early = rewinding.snapshot(self.model)
        _randomize(self.model, rng)
        final = rewinding.snapshot(self.model)
        mixed = rewinding.rewound(final, early, ['hidden2'])
        rewinding.assign(self.model, mixed)
        expected = _forward({'hidden1': final['hidden1'], 'hidden2': early['hidden2'], 'logits': final['logits']},
                            self.x.astype(np.float64))
        self.assertAllClose(self.model(self.x).numpy(), expected, atol=1e-4)

    def test_table_rows_and_model_restored(self):
        rng = np.random.default_rng(3)
        states = {0: rewinding.snapshot(self.model)}
        _randomize(self.model, rng)
        states[1] = rewinding.snapshot(self.model)
        _randomize(self.model, rng)
        final = rewinding.snapshot(self.model)

        def evaluate(model):
            return {'out': float(model(self.x).numpy()[0, 0])}

        rows = rewinding.rewind_table(self.model, final, states, evaluate)
        self.assertEqual([(r['layer'], r['epoch']) for r in rows],
                         [(u, e) for u in ('hidden1', 'hidden2', 'logits') for e in (0, 1)])
        for r in rows:
            state = {**final, r['layer']: states[r['epoch']][r['layer']]}
            self.assertAllClose(r['out'], _forward(state, self.x.astype(np.float64))[0, 0], atol=1e-4)
        self.assertAllClose(self.model(self.x).numpy(), _forward(final, self.x.astype(np.float64)), atol=1e-4)

    def test_checkpoint_state_reads_a_trainer_style_checkpoint(self):
        directory = self.create_tempdir().full_path
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(self.model.trainable_variables)
        ckpt = tf.train.Checkpoint(model=self.model, optimizer=optimizer)
        manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=10)
        saved = {}
        rng = np.random.default_rng(4)
        for step in (3, 7):
            _randomize(self.model, rng)
            saved[step] = rewinding.snapshot(self.model)
            manager.save(checkpoint_number=step)
        self.assertEqual(rewinding.checkpoint_steps(directory), [3, 7])
        _randomize(self.model, rng)
        current = rewinding.snapshot(self.model)
        state = rewinding.checkpoint_state(self.model, os.path.join(directory, 'ckpt-3'))
        for name in saved[3]:
            for a, b in zip(state[name], saved[3][name]):
                self.assertAllEqual(a, b)
        for name in current:  # the model is left as it was
            for a, b in zip(rewinding.snapshot(self.model)[name], current[name]):
                self.assertAllEqual(a, b)
        with self.assertRaisesRegex(FileNotFoundError, 'ckpt-5'):
            rewinding.checkpoint_state(self.model, os.path.join(directory, 'ckpt-5'))

    def test_conv_units_carry_their_batch_norm(self):
        model = resnet.resnet18((32, 32, 3), 10, width_multiplier=0.0625, seed=0)
        groups = rewinding.layer_groups(model)
        self.assertEqual(groups['conv1'], ['conv1', 'conv1_bn'])
        self.assertEqual(groups['s2b1_shortcut'], ['s2b1_shortcut', 's2b1_shortcut_bn'])
        self.assertEqual(list(groups)[-1], 'logits')
        self.assertLen(groups, 1 + 16 + 3 + 1)  # stem, block convs, shortcuts, logits

    def test_unknown_layer(self):
        state = rewinding.snapshot(self.model)
        with self.assertRaisesRegex(KeyError, "'nope'"):
            rewinding.rewound(state, state, ['nope'])


if __name__ == '__main__':
    tf.test.main()
