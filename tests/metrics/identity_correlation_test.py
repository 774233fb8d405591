"""Tests for extreme_mem/metrics/identity_correlation.py against numpy oracles and known answers."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import registry
from extreme_mem.data import base as data_base
from extreme_mem.metrics import base
from extreme_mem.metrics import identity_correlation as ic
from extreme_mem.models import identity_nets


def _image(seed=0, shape=(6, 6, 1)):
    return np.random.default_rng(seed).uniform(size=shape).astype(np.float32)


def _context(model, x, step=0, test=None):
    train = data_base.Split(x[None], x[None], np.zeros(1, np.int32), np.zeros(1, np.int64))
    test = x[None] if test is None else test
    test_split = data_base.Split(test, test, np.zeros(len(test), np.int32), np.arange(len(test)))
    data = data_base.Data(train, test_split, data_base.DatasetInfo('fake', 1, x.shape))
    return base.EvalContext(step=step, model=model, data=data, evals={})


class CorrelatedInputsTest(tf.test.TestCase, parameterized.TestCase):

    def test_pearson_matches_numpy(self):
        rng = np.random.default_rng(0)
        a, b = rng.normal(size=(4, 3, 3)), rng.normal(size=(4, 3, 3))
        expected = [np.corrcoef(a[i].ravel(), b[i].ravel())[0, 1] for i in range(4)]
        self.assertAllClose(ic.pearson(a, b), expected)
        self.assertAllClose(ic.pearson(a, b[0]), [np.corrcoef(a[i].ravel(), b[0].ravel())[0, 1] for i in range(4)])

    @parameterized.parameters(0.0, 0.3, 0.9, 1.0)
    def test_correlation_norm_and_mean(self, rho):
        x = _image()
        inputs = ic.correlated_inputs(x, [rho], num_per_rho=5, seed=1)[0]
        for t in inputs:
            self.assertAllClose(np.corrcoef(t.ravel(), x.ravel())[0, 1], rho, atol=1e-5)
            self.assertAllClose(np.linalg.norm(t), np.linalg.norm(x), rtol=1e-5)
            self.assertAllClose(t.mean(), x.mean(), atol=1e-5)

    def test_rho_zero_inputs_are_random(self):
        inputs = ic.correlated_inputs(_image(), [0.0], num_per_rho=2, seed=0)[0]
        self.assertLess(abs(np.corrcoef(inputs[0].ravel(), inputs[1].ravel())[0, 1]), 0.7)

    def test_bad_rho(self):
        with self.assertRaisesRegex(ValueError, r'\[0, 1\]'):
            ic.correlated_inputs(_image(), [1.5], 1)

    def test_identity_and_constant_predictors(self):
        x = _image()
        identity = ic.correlations(lambda b: b, x, x, num_per_rho=3)
        constant = ic.correlations(lambda b: np.repeat(x[None], len(b), 0), x, x, num_per_rho=3)
        for key in ('0', '0.5', '1'):
            self.assertAllClose(identity['identity'][key], 1.0)
            self.assertAllClose(constant['constant'][key], 1.0)
            # corr(f(x_ρ), x) = corr(x_ρ, x) = ρ for the identity, and the same for the constant.
            self.assertAllClose(identity['constant'][key], float(key), atol=1e-5)
            self.assertAllClose(constant['identity'][key], float(key), atol=1e-5)
        self.assertEqual(list(identity['identity']), [f'{r:g}' for r in ic.RHOS])


class PluginTest(tf.test.TestCase):

    def test_identity_correlation_plugin_on_identity_cnn(self):
        model = identity_nets.identity_cnn((6, 6, 1), depth=0, kernel_size=3, use_bias=False, seed=0)
        kernel = np.zeros((3, 3, 1, 1), np.float32)
        kernel[1, 1] = 1.0
        model.get_layer('output').set_weights([kernel])
        out = ic.IdentityCorrelation(num_per_rho=2).evaluate(_context(model, _image()))
        self.assertAllClose(out['eval/identity_correlation/0'], 1.0, atol=1e-5)
        self.assertAllClose(out['eval/constant_correlation/0.5'], 0.5, atol=1e-4)
        self.assertAllClose(out['eval/constant_correlation/mean'], np.mean(ic.RHOS), atol=1e-4)
        self.assertIs(registry.METRICS.get('identity_correlation'), ic.IdentityCorrelation)

    def test_theorem1_prediction_matches_explicit_matrix(self):
        rng = np.random.default_rng(0)
        d = 5
        w0, xbar, tests = rng.normal(size=(d, d)), rng.normal(size=d), rng.normal(size=(3, d))
        w = w0 + np.outer(xbar - w0 @ xbar, xbar) / (xbar @ xbar)  # Theorem 1 / appendix C
        got = ic.theorem1_prediction(tests @ w0.T, w0 @ xbar, xbar, xbar, tests)
        self.assertAllClose(got, tests @ w.T)

    def test_theorem1_error_is_zero_at_init_and_absent_after_resume(self):
        model = identity_nets.identity_linear((3, 3, 1), seed=0)
        x = _image(shape=(3, 3, 1))
        plugin = ic.Theorem1Error(num_per_rho=1)
        self.assertEqual(plugin.evaluate(_context(model, x, step=5)), {})
        # At step 0 the net is W0; the closed form differs by the projection term, > 0.
        self.assertGreater(plugin.evaluate(_context(model, x, step=0))['eval/theorem1_relative_error'], 0.0)


if __name__ == '__main__':
    tf.test.main()
