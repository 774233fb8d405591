"""Tests of the centre-correlation step (ALGORITHM.md §1.4-2.5)."""

import numpy as np
import pytest

from extreme_mem.geometry import center_correlation as cc

STAGED = (
    'a_clouds_P10_M20_N100',
    'b_clusters_P20_M30_N200',
    'd_spheres_P20_M50_N1024',
    'f_noqr_P10_M40_N30',
)


def _direct_cost(z, v):
    """The reference's F(V) written out literally (§2.3)."""
    g = z @ z.T
    y = z @ v
    a = g - y @ y.T
    c0 = np.diag(a)
    return 0.5 * np.sum(a * a / np.outer(c0, c0))  # complex-safe (no abs/conj)


class TestCost:
    @pytest.mark.parametrize('k', [1, 3])
    @pytest.mark.parametrize('shrink', [1.0, 0.02])
    def test_cost_and_gradient(self, k, shrink):
        """Expanded (shrink = 1) and direct (near-singular, shrink small) branches vs the literal
        formula and its complex-step derivative along random ambient directions."""
        rng = np.random.RandomState(k)
        z = rng.randn(9, 8)
        v = np.linalg.qr(rng.randn(8, k))[0]
        if shrink < 1.0:  # make residual centre 0 tiny: put Z_0 almost inside span(V)
            outside = z[0] - (z[0] @ v) @ v.T
            z[0] = 2.0 * v[:, 0] + shrink * outside
        cost = cc._CenterCost(z)
        y = cost.project(v.T[None])
        ratio = ((cost.gdiag - np.sum(y[0] ** 2, axis=0)) / cost.gdiag).min()
        assert (ratio < cc._DIRECT_BELOW) == (shrink < 1.0)
        f, eyt = cost.evaluate(y)
        np.testing.assert_allclose(f[0], _direct_cost(z, v), rtol=1e-9)
        grad = cost.egrad(eyt)[0].T
        for _ in range(3):
            d = rng.randn(*v.shape)
            # Complex-step derivative of the (analytic) literal formula: exact to rounding.
            h = 1e-30
            num = _direct_cost(z, v + 1j * h * d).imag / h
            np.testing.assert_allclose(np.sum(grad * d), num, rtol=1e-8)

    def test_mean_abs_cosine(self):
        assert cc.mean_abs_cosine(np.eye(4)) == pytest.approx(0.0, abs=1e-15)
        x = np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
        s = 1 / np.sqrt(2)
        assert cc.mean_abs_cosine(x) == pytest.approx((s + 1 + s) * 2 / 6)


class TestAgainstReference:
    @pytest.mark.parametrize('stem', STAGED)
    def test_seed0_matches_reference(self, stem, load_points, load_stages):
        """rho_center, maxK, K and the removed subspace of the reference's seed-0 run."""
        st = load_stages(stem)
        x = load_points(stem)
        res = cc.remove_center_correlations(x.mean(axis=1), np.random.RandomState(0))
        assert abs(res.rho_center - float(st['res_coeff0'])) < 1e-10 * float(st['res_coeff0'])
        assert res.max_k == int(st['maxK'])
        assert res.num_removed == int(st['K'])
        w, ref = res.removed_basis, st['V11']
        assert w.shape == ref.shape
        np.testing.assert_allclose(w.T @ w, np.eye(w.shape[1]), atol=1e-10)
        # Same subspace to the optimiser's accuracy (both stop at |grad| ~ 1e-6).
        assert np.abs(w @ w.T - ref @ ref.T).max() < 1e-5
        k = int(st['K'])
        np.testing.assert_allclose(res.res_coeff[k - 1], st['res_coeff_per_K'][k - 1], rtol=1e-6)

    def test_rng_stream_is_replayed_after_speculation(self, load_points, load_reference):
        """d seed 1 runs to k = 12 in speculative batches of 4 (6-9, 10-13); the RNG must end
        exactly where the reference's loop (k = 1..12, 10 restarts each) left it."""
        stem = 'd_spheres_P20_M50_N1024'
        run = load_reference(stem)['by_n_t']['200']['runs'][1]
        x = load_points(stem)
        rng = np.random.RandomState(1)
        res = cc.remove_center_correlations(x.mean(axis=1), rng)
        k_stop = len(res.res_coeff)
        assert k_stop == len(run['res_coeff_per_K']) == 12
        replay = np.random.RandomState(1)
        p = x.shape[0]
        for k in range(1, k_stop + 1):
            for _ in range(10):
                replay.randn(p, 1)
                replay.randn(p - 1, k)
        assert rng.randn() == replay.randn()
