"""Correlation with the identity and the constant function (Zhang et al., ICLR 2020, section 3.2).

Test inputs at train–test correlation ρ are built as in section 3.2: a random-pixel image, made
orthogonal to the (centred) training image x, plus the multiple of x that gives Pearson
correlation ρ with x, at the norm of x (`correlated_inputs`). A net trained on (x, x) is then
scored by the Pearson correlation of its prediction f(x_ρ) with the identity target x_ρ and with
the constant function's output x (`correlations`), averaged over the test inputs: the rows of
Fig. 4, whose row means are Fig. 8.

Plugins (evaluation time, on the single training example of `data/identity_images.py`):
- `identity_correlation`: tags `eval/identity_correlation/<ρ:g>`, `eval/constant_correlation/<ρ:g>`
  and their means over ρ, `.../mean`.
- `theorem1_error`: relative error of the predictions against Theorem 1's closed form
  f(x) = f0(x) + (y − f0(x̄)) x̄ᵀx / ‖x̄‖², with f0 the predictions at initialisation (captured at
  the step-0 evaluation; after a resume the tag is absent). Tag `eval/theorem1_relative_error`.
"""

from typing import Callable, Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base

RHOS = tuple(round(0.1 * k, 1) for k in range(11))  # ρ ∈ {0, 0.1, ..., 1}


def rho_key(rho: float) -> str:
    """The tag / report key of ρ: `f'{rho:g}'` ('0', '0.1', ..., '1')."""
    return f'{float(rho):g}'


def correlated_inputs(x: np.ndarray, rhos: Sequence[float], num_per_rho: int, seed: int = 0) -> np.ndarray:
    """Test images with Pearson correlation exactly ρ to `x` and the norm of `x` (section 3.2).

    x_ρ = m + s (ρ ĉ + √(1 − ρ²) û), with m the mean of x, c = x − m, ĉ = c / ‖c‖, s = ‖c‖, and
    û a uniform random-pixel image, centred, made orthogonal to c and normalised. So x_ρ has the
    mean and norm of x, and x_0 is orthogonal to x after centring.

    Args:
      x: [*shape] the training image.
      rhos: correlations in [0, 1].
      num_per_rho: test images per ρ (the same random images û for every ρ).
      seed: seed of the random pixels.

    Returns:
      [len(rhos), num_per_rho, *shape] float32.
    """
    x = np.asarray(x, np.float64)
    if any(not 0.0 <= r <= 1.0 for r in rhos):
        raise ValueError(f'rhos must lie in [0, 1], got {list(rhos)}.')
    c = x.ravel() - x.mean()
    s = np.linalg.norm(c)
    if s == 0:
        raise ValueError('The training image is constant: its correlation with anything is undefined.')
    c_hat = c / s
    u = np.random.default_rng(seed).uniform(size=(num_per_rho, c.size))
    u -= u.mean(axis=1, keepdims=True)
    u -= np.outer(u @ c_hat, c_hat)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    rho = np.asarray(rhos, np.float64)[:, None, None]
    out = x.mean() + s * (rho * c_hat + np.sqrt(1.0 - rho**2) * u[None])
    return out.reshape(len(rhos), num_per_rho, *x.shape).astype(np.float32)


def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each example of `a` with the matching one of `b` (flattened).

    Args:
      a, b: [n, ...] (b may be [...], broadcast to every example).

    Returns:
      [n]; 0 where either side is constant.
    """
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    b = np.broadcast_to(np.asarray(b, np.float64).reshape(-1, a.shape[1]), a.shape)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide(np.sum(a * b, axis=1), denom, out=np.zeros(len(a)), where=denom > 0)


def correlations(predict: Callable, x: np.ndarray, target: np.ndarray, rhos: Sequence[float] = RHOS,
                 num_per_rho: int = 16, seed: int = 0) -> dict:
    """Mean correlation of predictions with the identity and with the constant function, per ρ.

    Args:
      predict: [n, *shape] -> [n, *shape] (the trained net).
      x: [*shape] the training input.
      target: [*shape] the training output (the constant function's value; x for identity).
      rhos, num_per_rho, seed: the test inputs (`correlated_inputs`).

    Returns:
      `{'identity': {ρ key: mean}, 'constant': {ρ key: mean}}`.
    """
    inputs = correlated_inputs(x, rhos, num_per_rho, seed)
    preds = np.asarray(predict(inputs.reshape(-1, *inputs.shape[2:]))).reshape(inputs.shape)
    out = {'identity': {}, 'constant': {}}
    for rho, xs, ps in zip(rhos, inputs, preds):
        out['identity'][rho_key(rho)] = float(np.mean(pearson(ps, xs)))
        out['constant'][rho_key(rho)] = float(np.mean(pearson(ps, target)))
    return out


def predict_fn(model, batch_size: int = 256) -> Callable:
    """`images -> predictions` of a Keras model, in batches, as numpy."""
    def predict(images):
        images = np.asarray(images, np.float32)
        return np.concatenate([np.asarray(model(images[i:i + batch_size], training=False))
                               for i in range(0, len(images), batch_size)])
    return predict


@registry.METRICS.register('identity_correlation')
@gin.configurable(module='metrics')
class IdentityCorrelation(base.MetricPlugin):
    """Fig. 4's correlations with the identity and the constant function at every evaluation.

    Args:
      rhos: train–test correlations (default {0, 0.1, ..., 1}).
      num_per_rho: random test inputs per ρ.
      seed: seed of the test inputs.
    """

    def __init__(self, rhos: Sequence[float] = RHOS, num_per_rho: int = 16, seed: int = 0):
        super().__init__(every_n_steps=None)
        if num_per_rho < 1:
            raise ValueError(f'num_per_rho must be >= 1, got {num_per_rho}.')
        self._rhos, self._num, self._seed = tuple(rhos), int(num_per_rho), int(seed)

    def evaluate(self, context: base.EvalContext) -> dict:
        split = context.data.train
        corr = correlations(predict_fn(context.model), split.images[0], split.labels[0], self._rhos,
                            self._num, self._seed)
        out = {}
        for kind, values in corr.items():
            for key, value in values.items():
                out[f'eval/{kind}_correlation/{key}'] = value
            out[f'eval/{kind}_correlation/mean'] = float(np.mean(list(values.values())))
        return out


def theorem1_prediction(f0_test: np.ndarray, f0_train: np.ndarray, x_train: np.ndarray, y_train: np.ndarray,
                        x_test: np.ndarray) -> np.ndarray:
    """Theorem 1's limit f(x) = W0 x + (y − W0 x̄) x̄ᵀx / ‖x̄‖², from the initial predictions.

    Args:
      f0_test: [n, d] initial predictions W0 x on the test inputs.
      f0_train: [d] initial prediction W0 x̄ on the training input.
      x_train: [d] the training input x̄.
      y_train: [d] its target (x̄ for the identity).
      x_test: [n, d] test inputs.

    Returns:
      [n, d] predictions of the gradient-descent limit.
    """
    x_train = np.asarray(x_train, np.float64).ravel()
    coef = np.asarray(x_test, np.float64).reshape(len(x_test), -1) @ x_train / (x_train @ x_train)
    residual = np.asarray(y_train, np.float64).ravel() - np.asarray(f0_train, np.float64).ravel()
    return np.asarray(f0_test, np.float64).reshape(len(x_test), -1) + coef[:, None] * residual[None]


@registry.METRICS.register('theorem1_error')
@gin.configurable(module='metrics')
class Theorem1Error(base.MetricPlugin):
    """Relative distance of a one-layer no-bias linear net's predictions to Theorem 1's limit.

    Test inputs: the evaluation split plus the ρ inputs of `IdentityCorrelation`.
    """

    def __init__(self, num_per_rho: int = 4, seed: int = 0):
        super().__init__(every_n_steps=None)
        self._num, self._seed = int(num_per_rho), int(seed)
        self._initial: Optional[tuple] = None

    def _inputs(self, data) -> np.ndarray:
        x = data.train.images[0]
        rho_inputs = correlated_inputs(x, RHOS, self._num, self._seed).reshape(-1, *x.shape)
        return np.concatenate([np.asarray(data.test.images, np.float32).reshape(-1, *x.shape), rho_inputs])

    def evaluate(self, context: base.EvalContext) -> dict:
        predict = predict_fn(context.model)
        inputs = self._inputs(context.data)
        x_train, y_train = context.data.train.images[0], context.data.train.labels[0]
        if context.step == 0:
            self._initial = (predict(inputs), predict(x_train[None])[0])
        if self._initial is None:
            return {}
        expected = theorem1_prediction(self._initial[0], self._initial[1], x_train, y_train, inputs)
        got = predict(inputs).reshape(expected.shape)
        return {'eval/theorem1_relative_error': float(np.linalg.norm(got - expected) / np.linalg.norm(expected))}
