"""Tests for extreme_mem/pergrad/engine.py: every engine agrees with the per-example `loop` oracle."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.pergrad import engine
from extreme_mem.pergrad import factored

NUM_CLASSES = 3
BATCH = 10
LABELS = np.array([0, 1, 2, 0, 0, 1, 2, 2, 0, 1])  # every class has >= 2 examples


def _dense(use_bias: bool) -> keras.Model:
    inputs = keras.Input((6,), name='x')
    h = keras.layers.Dense(12, use_bias=use_bias, name='hidden')(inputs)
    h = keras.layers.Activation('tanh', name='hidden_rep')(h)
    logits = keras.layers.Dense(NUM_CLASSES, use_bias=use_bias, name='logits')(h)
    return keras.Model(inputs, logits)


def _conv(padding: str, strides: int, use_bias: bool = True) -> keras.Model:
    inputs = keras.Input((7, 7, 2), name='x')
    h = keras.layers.Conv2D(4, 3, strides=strides, padding=padding, use_bias=use_bias, name='conv')(inputs)
    h = keras.layers.Activation('relu', name='conv_rep')(h)
    h = keras.layers.Flatten()(h)
    logits = keras.layers.Dense(NUM_CLASSES, name='logits')(h)
    return keras.Model(inputs, logits)


def _small_spatial_conv() -> keras.Model:
    """L·(K+O) < K·O: the conv kernel norms go through the patch-Gram route."""
    inputs = keras.Input((4, 4, 8), name='x')
    h = keras.layers.Conv2D(16, 3, padding='valid', name='conv')(inputs)
    h = keras.layers.Activation('tanh', name='conv_rep')(h)
    h = keras.layers.Flatten()(h)
    logits = keras.layers.Dense(NUM_CLASSES, use_bias=False, name='logits')(h)
    return keras.Model(inputs, logits)


def _mixed() -> keras.Model:
    """Dense -> Reshape -> Conv2D -> Dense."""
    inputs = keras.Input((5,), name='x')
    h = keras.layers.Dense(4 * 4 * 2, name='fc')(inputs)
    h = keras.layers.Activation('sigmoid', name='fc_rep')(h)
    h = keras.layers.Reshape((4, 4, 2))(h)
    h = keras.layers.Conv2D(3, 2, strides=2, padding='same', name='conv')(h)
    h = keras.layers.Activation('tanh', name='conv_rep')(h)
    h = keras.layers.Flatten()(h)
    logits = keras.layers.Dense(NUM_CLASSES, name='logits')(h)
    return keras.Model(inputs, logits)


MODELS = {
    'dense_bias': lambda: _dense(True),
    'dense_no_bias': lambda: _dense(False),
    'conv_valid_s1': lambda: _conv('valid', 1),
    'conv_same_s1': lambda: _conv('same', 1, use_bias=False),
    'conv_valid_s2': lambda: _conv('valid', 2),
    'conv_same_s2': lambda: _conv('same', 2),
    'conv_patch_gram': _small_spatial_conv,
    'dense_to_conv': _mixed,
}
LOSSES = ('cross_entropy', 'hinge', 'squared')


def _build(name: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    model = MODELS[name]()
    x = tf.random.normal([BATCH, *model.inputs[0].shape[1:]], seed=seed)
    return model, x


def _run(model, x, loss, engine_name, compute_gram, chunk_size=4, classes=None):
    layers = {l.name: engine_name for l in model.layers if l.trainable_variables}
    pg = engine.PerExampleGradients(
        model, engines=layers, compute_gram=compute_gram, chunk_size=chunk_size, classes=classes
    )
    return pg(x, tf.constant(LABELS), losses.get(loss), NUM_CLASSES)


class EngineTest(tf.test.TestCase, parameterized.TestCase):

    def assertStatsClose(self, got, want, check_gram=True):
        scale = float(np.sum(want.sq_norms)) + 1e-30
        for field in ('sq_norms', 'class_sum_sq_norms', 'class_counts', 'total_sum_sq_norm'):
            self.assertAllClose(getattr(got, field), getattr(want, field), rtol=1e-4, atol=1e-6 * scale, msg=field)
        if check_gram:
            self.assertAllClose(got.gram, want.gram, rtol=1e-4, atol=1e-6 * scale, msg='gram')

    @parameterized.product(model=sorted(MODELS), loss=LOSSES)
    def test_engines_match_loop(self, model, loss):
        model, x = _build(model)
        want = _run(model, x, loss, 'loop', compute_gram=True)
        runs = {
            'factored': _run(model, x, loss, 'factored', compute_gram=False),
            'factored_gram': _run(model, x, loss, 'factored', compute_gram=True),
            'jacobian': _run(model, x, loss, 'jacobian', compute_gram=True),
            'vectorized_map': _run(model, x, loss, 'vectorized_map', compute_gram=True),
        }
        for name, got in runs.items():
            with self.subTest(engine=name):
                gram = name != 'factored'
                if not gram:
                    self.assertIsNone(got.logit_stats.gram)
                for path, s in want.grad_stats.items():
                    self.assertStatsClose(got.grad_stats[path], s, check_gram=gram)
                    if not gram:
                        self.assertIsNone(got.grad_stats[path].gram)
                self.assertStatsClose(got.logit_stats, want.logit_stats, check_gram=gram)
                self.assertAllClose(got.per_example_loss, want.per_example_loss)

    @parameterized.parameters('dense_bias', 'dense_to_conv')
    def test_grads_equal_plain_tape_gradient_of_mean_loss(self, model):
        model, x = _build(model)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses.cross_entropy(LABELS, model(x, training=True)))
        want = tape.gradient(loss, model.trainable_variables)
        got = _run(model, x, 'cross_entropy', 'factored', compute_gram=False)
        self.assertAllClose(got.loss, loss)
        self.assertLen(got.grads, len(want))
        for g, w in zip(got.grads, want):
            self.assertAllClose(g, w, rtol=1e-5, atol=1e-7)

    def test_sum_of_class_stats_is_total_for_identical_examples(self):
        # Every example identical: all per-example gradients equal g, so ||Σ_c g||² = n_c²||g||².
        model, _ = _build('dense_bias')
        x = tf.ones([BATCH, 6])
        labels = tf.zeros([BATCH], tf.int32)
        d = engine.PerExampleGradients(model)(x, labels, losses.cross_entropy, NUM_CLASSES)
        s = d.grad_stats['hidden/kernel']
        self.assertAllClose(s.class_sum_sq_norms[0], BATCH**2 * s.sq_norms[0], rtol=1e-5)
        self.assertAllClose(s.total_sum_sq_norm, BATCH**2 * s.sq_norms[0], rtol=1e-5)
        self.assertAllEqual(s.class_counts, [BATCH, 0, 0])

    def test_class_subset(self):
        model, x = _build('conv_valid_s1')
        full = _run(model, x, 'cross_entropy', 'factored', compute_gram=False)
        sub = _run(model, x, 'cross_entropy', 'factored', compute_gram=False, classes=[2])
        for path, s in full.grad_stats.items():
            t = sub.grad_stats[path]
            self.assertAllClose(t.class_counts, [0, 0, 3])
            self.assertAllClose(t.class_sum_sq_norms[2], s.class_sum_sq_norms[2], rtol=1e-5)
            self.assertAllClose(t.class_sum_sq_norms[:2], [0, 0])
            self.assertAllClose(t.sq_norms, s.sq_norms, rtol=1e-5)
            self.assertAllClose(t.total_sum_sq_norm, s.total_sum_sq_norm, rtol=1e-5)

    def test_traceable_in_tf_function_and_matches_eager(self):
        model, x = _build('dense_to_conv')
        pg = engine.PerExampleGradients(model, compute_gram=True)
        labels = tf.constant(LABELS)
        step = tf.function(lambda x, y: pg(x, y, losses.cross_entropy, NUM_CLASSES))
        eager, graph = pg(x, labels, losses.cross_entropy, NUM_CLASSES), step(x, labels)
        for path in eager.grad_stats:
            self.assertStatsClose(graph.grad_stats[path], eager.grad_stats[path])
        self.assertEqual(sorted(graph.representations), ['conv', 'fc'])
        want_fc = keras.Model(model.inputs, model.get_layer('fc_rep').output)(x)
        self.assertAllClose(graph.representations['fc'], want_fc)

    def test_unknown_batch_size_in_tf_function(self):
        model, x = _build('conv_same_s2')
        pg = engine.PerExampleGradients(model)
        step = tf.function(
            lambda x, y: pg(x, y, losses.cross_entropy, NUM_CLASSES),
            input_signature=[tf.TensorSpec([None, 7, 7, 2]), tf.TensorSpec([None], tf.int32)],
        )
        got = step(x, tf.constant(LABELS, tf.int32))
        want = _run(model, x, 'cross_entropy', 'loop', compute_gram=False)
        for path, s in want.grad_stats.items():
            self.assertStatsClose(got.grad_stats[path], s, check_gram=False)

    def test_automatic_engine_choice(self):
        inputs = keras.Input((4,))
        h = keras.layers.Dense(5, activation='relu', name='fused')(inputs)
        h = keras.layers.LayerNormalization(name='norm')(h)
        logits = keras.layers.Dense(NUM_CLASSES, name='logits')(h)
        pg = engine.PerExampleGradients(keras.Model(inputs, logits))
        self.assertEqual(
            pg.engines,
            {
                'fused/kernel': 'jacobian',
                'fused/bias': 'jacobian',
                'norm/gamma': 'jacobian',
                'norm/beta': 'jacobian',
                'logits/kernel': 'factored',
                'logits/bias': 'factored',
            },
        )

    def test_jacobian_engine_on_non_factorable_layers_matches_loop(self):
        keras.utils.set_random_seed(1)
        inputs = keras.Input((4,))
        h = keras.layers.Dense(5, activation='relu', name='fused')(inputs)
        h = keras.layers.LayerNormalization(name='norm')(h)
        logits = keras.layers.Dense(NUM_CLASSES, name='logits')(h)
        model = keras.Model(inputs, logits)
        x = tf.random.normal([BATCH, 4])
        auto = engine.PerExampleGradients(model, compute_gram=True)(x, LABELS, losses.hinge, NUM_CLASSES)
        want = _run(model, x, 'hinge', 'loop', compute_gram=True)
        for path, s in want.grad_stats.items():
            self.assertStatsClose(auto.grad_stats[path], s)

    def test_dense_on_sequences_uses_positions(self):
        keras.utils.set_random_seed(2)
        inputs = keras.Input((3, 4))
        h = keras.layers.Dense(5, name='seq')(inputs)
        h = keras.layers.Activation('tanh', name='seq_rep')(h)
        h = keras.layers.Flatten()(h)
        logits = keras.layers.Dense(NUM_CLASSES, name='logits')(h)
        model = keras.Model(inputs, logits)
        x = tf.random.normal([BATCH, 3, 4])
        got = _run(model, x, 'squared', 'factored', compute_gram=True)
        want = _run(model, x, 'squared', 'loop', compute_gram=True)
        for path, s in want.grad_stats.items():
            self.assertStatsClose(got.grad_stats[path], s)

    def test_sequential_nested_and_subclassed_models(self):
        keras.utils.set_random_seed(3)
        x = tf.random.normal([BATCH, 5])
        seq = keras.Sequential(
            [
                keras.Input((5,)),
                keras.layers.Dense(4, name='a'),
                keras.layers.Activation('tanh', name='a_rep'),
                keras.layers.Dense(3, name='b'),
            ]
        )
        inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name='inner_dense')], name='inner')
        inputs = keras.Input((5,))
        nested = keras.Model(inputs, inner(keras.layers.Dense(4, name='outer')(inputs)))

        class Subclassed(keras.Model):
            def __init__(self):
                super().__init__(name='sub')
                self.dense = keras.layers.Dense(3, name='dense')

            def call(self, x):
                return self.dense(x)

        subclassed = Subclassed()
        subclassed(x)
        for model, want_engines in (
            (seq, {'factored'}),
            (nested, {'factored', 'jacobian'}),  # the inner model's variables fall back to jacobian
            (subclassed, {'jacobian'}),  # no functional graph to tap
        ):
            pg = engine.PerExampleGradients(model, compute_gram=True)
            self.assertEqual(set(pg.engines.values()), want_engines)
            got = pg(x, LABELS, losses.cross_entropy, NUM_CLASSES)
            want = _run(model, x, 'cross_entropy', 'loop', compute_gram=True)
            for path, s in want.grad_stats.items():
                self.assertStatsClose(got.grad_stats[path], s)

    def test_invalid_configuration_raises(self):
        model, _ = _build('dense_bias')
        with self.assertRaisesRegex(ValueError, 'Unknown engines'):
            engine.PerExampleGradients(model, engines={'hidden': 'magic'})
        with self.assertRaisesRegex(ValueError, 'name no trainable variable or layer'):
            engine.PerExampleGradients(model, engines={'hiden': 'loop'})
        with self.assertRaisesRegex(ValueError, 'chunk_size'):
            engine.PerExampleGradients(model, chunk_size=0)
        inputs = keras.Input((4,))
        fused = keras.Model(inputs, keras.layers.Dense(3, activation='relu', name='fused')(inputs))
        with self.assertRaisesRegex(ValueError, 'built-in activation'):
            engine.PerExampleGradients(fused, engines={'fused': 'factored'})
        with self.assertRaisesRegex(ValueError, 'classes'):
            engine.PerExampleGradients(model, classes=[5])(tf.ones([2, 6]), [0, 1], losses.cross_entropy, NUM_CLASSES)

    def test_cost_model(self):
        self.assertTrue(factored.prefers_gram(256, 3072, 1024))
        self.assertFalse(factored.prefers_gram(256, 1024, 10))
        self.assertFalse(factored.prefers_gram(None, 3072, 1024))
        self.assertFalse(factored.prefers_patch_gram(16 * 16, 800, 64))
        self.assertTrue(factored.prefers_patch_gram(4, 72, 16))


if __name__ == '__main__':
    tf.test.main()
