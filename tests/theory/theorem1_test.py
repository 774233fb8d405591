"""Monte-Carlo test of Theorem 1 of Mehta et al. (ICLR 2021), section 3.1 / appendix B.

Theorem 1: if every entry of W1 ∈ R^{h×p} is drawn from N(0, σ²) and φ = sin, then for any x, x′

    E_{W1} [<φ(W1 x), φ(W1 x′)>] ≤ h exp(−σ² ‖x − x′‖² / 2).

Per hidden unit (a row w ~ N(0, σ² I)), sin a sin b = (cos(a − b) − cos(a + b)) / 2 and
E cos(w·u) = exp(−σ² ‖u‖² / 2) give the closed form

    E [sin(w·x) sin(w·x′)] = (exp(−σ² ‖x − x′‖² / 2) − exp(−σ² ‖x + x′‖² / 2)) / 2,

which is at most half the theorem's bound. The tests check Monte-Carlo means of the inner product
against the closed form and the bound, within 5 standard errors, for several σ, x, x′. They also
pin down that the theorem is one-sided: |E| can exceed the bound (x′ = −x), so the last step of
the appendix-B proof, which bounds |E| by |E cos(w·Δ)| with ‖Δ‖ ≤ ‖x − x′‖, does not hold as
written (that inequality between exponentials goes the other way); the statement itself holds
by the closed form.
"""

import numpy as np
from absl.testing import absltest, parameterized

HIDDEN = 32          # h, hidden units (rows of W1)
DRAWS = 4000         # independent draws of W1
DIM = 8              # p, input dimension
NUM_SE = 5.0         # tolerance in Monte-Carlo standard errors


def inner_products(x, x_prime, sigma, hidden=HIDDEN, draws=DRAWS, seed=0):
    """[draws] samples of <sin(W1 x), sin(W1 x′)>, one per independent W1 ~ N(0, σ²)^{h×p}."""
    rng = np.random.default_rng(seed)
    w = rng.normal(scale=sigma, size=(draws, hidden, len(x)))
    return np.sum(np.sin(w @ x) * np.sin(w @ x_prime), axis=1)


def bound(x, x_prime, sigma, hidden=HIDDEN):
    """The theorem's right-hand side h exp(−σ² ‖x − x′‖² / 2)."""
    return hidden * np.exp(-(sigma**2) * np.sum((x - x_prime) ** 2) / 2)


def closed_form(x, x_prime, sigma, hidden=HIDDEN):
    """h (exp(−σ²‖x − x′‖²/2) − exp(−σ²‖x + x′‖²/2)) / 2."""
    minus = np.exp(-(sigma**2) * np.sum((x - x_prime) ** 2) / 2)
    plus = np.exp(-(sigma**2) * np.sum((x + x_prime) ** 2) / 2)
    return hidden * (minus - plus) / 2


def _pairs():
    rng = np.random.default_rng(1)
    x = rng.normal(size=DIM)
    x /= np.linalg.norm(x)
    orthogonal = rng.normal(size=DIM)
    orthogonal -= orthogonal @ x * x
    orthogonal /= np.linalg.norm(orthogonal)
    return {
        'random': (x, rng.normal(size=DIM) / np.sqrt(DIM)),
        'near': (x, x + 0.05 * rng.normal(size=DIM) / np.sqrt(DIM)),  # the bound is close to h here
        'orthogonal': (x, orthogonal),
        'scaled': (x, 3.0 * x),
        'identical': (x, x),
        'opposite': (x, -x),
    }


PAIRS = _pairs()
SIGMAS = (0.1, 0.5, 1.0, 2.0, 5.0)


class Theorem1Test(parameterized.TestCase):

    @parameterized.product(pair=sorted(PAIRS), sigma=SIGMAS)
    def test_monte_carlo_mean_is_below_bound(self, pair, sigma):
        x, x_prime = PAIRS[pair]
        samples = inner_products(x, x_prime, sigma)
        mean, se = samples.mean(), samples.std(ddof=1) / np.sqrt(len(samples))
        # Monte Carlo agrees with the closed form ...
        self.assertLessEqual(abs(mean - closed_form(x, x_prime, sigma)), NUM_SE * se + 1e-12)
        # ... and stays below the theorem's bound, even below half of it (the closed form's bound).
        self.assertLessEqual(mean, bound(x, x_prime, sigma) + NUM_SE * se)
        self.assertLessEqual(mean, bound(x, x_prime, sigma) / 2 + NUM_SE * se)

    def test_large_sigma_decorrelates(self):
        """The point of the theorem: at large σ, distinct inputs' features are uncorrelated."""
        x, x_prime = PAIRS['near']
        small = inner_products(x, x_prime, 0.1).mean()
        self.assertGreater(small, 0.5 * HIDDEN * 0.1**2 * (x @ x_prime))  # ≈ h σ² <x, x′> for small σ
        x, x_prime = PAIRS['random']
        large = inner_products(x, x_prime, 5.0)
        self.assertLessEqual(abs(large.mean()), NUM_SE * large.std(ddof=1) / np.sqrt(len(large)))
        self.assertLess(bound(x, x_prime, 5.0), 1e-3 * HIDDEN)

    def test_bound_is_one_sided(self):
        """|E| is not bounded: x′ = −x gives E = −h (1 − exp(−2σ²‖x‖²)) / 2 < −h exp(−2σ²‖x‖²)."""
        x, x_prime = PAIRS['opposite']
        samples = inner_products(x, x_prime, 1.0)
        se = samples.std(ddof=1) / np.sqrt(len(samples))
        self.assertAlmostEqual(closed_form(x, x_prime, 1.0), -HIDDEN * (1 - np.exp(-2.0)) / 2)
        self.assertGreater(abs(samples.mean()) - NUM_SE * se, bound(x, x_prime, 1.0))


if __name__ == '__main__':
    absltest.main()
