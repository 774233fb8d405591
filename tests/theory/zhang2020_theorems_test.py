"""Theorem 1 and Lemma 1 of Zhang et al. (ICLR 2020), "Identity Crisis", as tests of the trainer.

Theorem 1 (appendix C): a one-layer linear net f(x) = W x without bias, trained by gradient
descent on one example (x̄, x̄) from W0, converges to W = W0 + (I − W0) x̄ x̄ᵀ / ‖x̄‖²: on a test
input it predicts W0 x + (x̄ − W0 x̄) x̄ᵀx / ‖x̄‖², so an input orthogonal to x̄ keeps its initial
output. Lemma 1 (appendix D): with N ≤ d linearly independent examples X [N, D] and targets
Y [N, d], f(x) = Wᵀx converges to W = W0 + Xᵀ(XXᵀ)⁻¹(Y − X W0).

The nets are `identity_linear` (a Dense kernel K: f(x) = Kᵀx, so W = Kᵀ for Theorem 1 and W = K
for Lemma 1), trained by `train.Trainer` with the `mse` loss; the closed forms are numpy from the
initial kernel. The paper's optimiser (momentum 0.9, stagewise rate) keeps the iterates in the
same affine subspace W0 + span, so the same limits hold for it too.
"""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem import losses
from extreme_mem.data import base as data_base
from extreme_mem.models import identity_nets
from extreme_mem.train import trainer as trainer_lib

SHAPE = (4, 4, 1)  # d = 16


def _data(x: np.ndarray, y: np.ndarray, test: np.ndarray) -> data_base.Data:
    n = len(x)
    train = data_base.Split(x.astype(np.float32), y.astype(np.float32), np.zeros(n, np.int32), np.arange(n))
    test_split = data_base.Split(test.astype(np.float32), test.astype(np.float32), np.zeros(len(test), np.int32),
                                 np.arange(len(test)))
    return data_base.Data(train, test_split, data_base.DatasetInfo('theory', 1, SHAPE))


def _train(model, data, workdir, num_steps, **knobs):
    trainer = trainer_lib.Trainer(model, losses.mse, 1, batch_size=len(data.train.images), num_steps=num_steps,
                                  eval_every=num_steps, log_every=num_steps, checkpoint_every=num_steps,
                                  divergence_factor=None, **knobs)
    fit = trainer.fit(data, workdir, seed=0)
    assert fit.status == 'done', fit.status


class Theorem1Test(tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ('gradient_descent', dict(learning_rate=0.05, momentum=0.0), 1500),
        ('paper_optimizer', dict(learning_rate=0.01, momentum=0.9, schedule='stagewise'), 1500),
    )
    def test_converges_to_closed_form(self, knobs, num_steps):
        rng = np.random.default_rng(0)
        d = int(np.prod(SHAPE))
        xbar = rng.normal(size=d)
        ortho = rng.normal(size=d)
        ortho -= (ortho @ xbar) / (xbar @ xbar) * xbar
        tests = np.concatenate([rng.normal(size=(5, d)), ortho[None], xbar[None]])
        model = identity_nets.identity_linear(SHAPE, depth=1, use_bias=False, seed=3)
        w0 = model.trainable_weights[0].numpy().T.astype(np.float64)  # f(x) = W0 x
        _train(model, _data(xbar.reshape(1, *SHAPE), xbar.reshape(1, *SHAPE), tests.reshape(-1, *SHAPE)),
               self.create_tempdir().full_path, num_steps, **knobs)
        w = w0 + np.outer(xbar - w0 @ xbar, xbar) / (xbar @ xbar)
        expected = tests @ w.T
        got = model(tests.reshape(-1, *SHAPE).astype(np.float32)).numpy().reshape(len(tests), d)
        self.assertLess(np.linalg.norm(got - expected) / np.linalg.norm(expected), 1e-3)
        # An input orthogonal to the training example keeps its initial output.
        self.assertAllClose(got[-2], w0 @ ortho, rtol=1e-3, atol=1e-3)
        # The training example is fitted.
        self.assertAllClose(got[-1], xbar, atol=1e-3)

    def test_closed_form_differs_from_identity_and_from_init(self):
        # Guards the oracle: the limit is neither the identity nor W0 on a generic input.
        rng = np.random.default_rng(1)
        w0, xbar, x = rng.normal(size=(6, 6)), rng.normal(size=6), rng.normal(size=6)
        w = w0 + np.outer(xbar - w0 @ xbar, xbar) / (xbar @ xbar)
        self.assertGreater(np.linalg.norm(w @ x - x), 0.1)
        self.assertGreater(np.linalg.norm(w @ x - w0 @ x), 0.1)


class Lemma1Test(tf.test.TestCase):

    def test_multi_example_closed_form(self):
        rng = np.random.default_rng(2)
        d, n = int(np.prod(SHAPE)), 4
        x, y = rng.normal(size=(n, d)), rng.normal(size=(n, d))
        tests = rng.normal(size=(6, d))
        model = identity_nets.identity_linear(SHAPE, depth=1, use_bias=False, seed=5)
        k0 = model.trainable_weights[0].numpy().astype(np.float64)  # f(x) = K0ᵀ x: Lemma 1's W0
        _train(model, _data(x.reshape(n, *SHAPE), y.reshape(n, *SHAPE), tests.reshape(-1, *SHAPE)),
               self.create_tempdir().full_path, 1500, learning_rate=0.1, momentum=0.9)
        w = k0 + x.T @ np.linalg.solve(x @ x.T, y - x @ k0)
        expected = tests @ w
        got = model(tests.reshape(-1, *SHAPE).astype(np.float32)).numpy().reshape(len(tests), d)
        self.assertLess(np.linalg.norm(got - expected) / np.linalg.norm(expected), 1e-3)
        self.assertAllClose(model(x.reshape(n, *SHAPE).astype(np.float32)).numpy().reshape(n, d), y, atol=1e-3)


if __name__ == '__main__':
    tf.test.main()
