"""Tests of the batched anchor solver: KKT residuals and agreement with its slow scipy twin."""

import numpy as np
import pytest
import scipy.optimize

from extreme_mem.geometry import anchor_qp, mftma

STAGED = (
    'a_clouds_P10_M20_N100',
    'b_clusters_P20_M30_N200',
    'd_spheres_P20_M50_N1024',
    'f_noqr_P10_M40_N30',
)


def _explicit_kkt(s, t, coef, kappa=0.0):
    """KKT of the primal QP min 1/2|v|^2 - t.v s.t. s_j.v <= -kappa, v = t - S a (per sample).

    Returns the max over samples of: constraint violation (s_j.v + kappa)_+, dual violation
    (-a_j)_+, complementarity |a_j (s_j.v + kappa)|, each scaled by |t| max_j |s_j|.
    """
    v = t - s @ coef.T  # (d, n)
    cons = s.T @ v + kappa  # (m, n)
    scale = np.linalg.norm(t, axis=0) * np.linalg.norm(s, axis=0).max()
    primal = np.maximum(cons, 0.0).max(axis=0) / scale
    dual = np.maximum(-coef, 0.0).max(axis=1) / scale
    comp = np.abs(coef.T * cons).max(axis=0) / scale
    return primal.max(), dual.max(), comp.max()


class TestKKT:
    @pytest.mark.parametrize('stem', STAGED)
    def test_kkt_on_all_fixture_problems(self, stem, load_stages):
        """Every QP-branch problem of every manifold meets the KKT conditions to 1e-10."""
        st = load_stages(stem)
        s, t, dims, num_points = mftma.stack_stage_inputs(st['s'], st['t'])
        res = mftma.manifold_stages(s, t, dims, num_points)
        assert res.num_fallback == 0
        assert res.kkt.max() < 1e-10
        for i in range(len(st['s'])):
            m = num_points[i]
            coef = res.coef[i, :, :m]
            keep = res.solved[i]
            primal, dual, comp = _explicit_kkt(st['s'][i], st['t'][i][:, keep], coef[keep])
            assert primal < 1e-10 and dual == 0.0 and comp < 1e-10, (i, primal, dual, comp)

    def test_kkt_residual_flags_wrong_solutions(self):
        rng = np.random.RandomState(0)
        s = np.vstack([rng.randn(4, 6), np.ones((1, 6))])
        t = rng.randn(5, 3)
        res = anchor_qp.nnls_batched(s[None], t[None])
        gram = (s.T @ s)[None]
        rhs = (t.T @ s)[None]
        scale = np.ones((1, 3))
        assert anchor_qp.kkt_residual(gram, rhs, res.coef, scale).max() < 1e-12
        assert anchor_qp.kkt_residual(gram, rhs, res.coef * 0.9 + 0.01, scale).max() > 1e-3


class TestAgainstSlowTwin:
    @pytest.mark.parametrize('stem', STAGED)
    def test_projection_matches_slsqp(self, stem, load_stages):
        """Fast batched solver vs one SLSQP QP per sample, on real fixture manifolds."""
        st = load_stages(stem)
        for i in (0, 5):
            s, t = st['s'][i], st['t'][i][:, :25]
            coef = anchor_qp.nnls_batched(s[None], t[None]).coef[0]
            for j in range(t.shape[1]):
                v, total = anchor_qp.project_qp_scipy(s, t[:, j])
                np.testing.assert_allclose(v, t[:, j] - s @ coef[j], atol=1e-8)
                np.testing.assert_allclose(total, coef[j].sum(), atol=1e-8)

    @pytest.mark.parametrize('kappa', [0.4, -0.25])
    def test_nonzero_margin(self, kappa, load_stages):
        """kappa enters as t' = t + kappa e_last (S^T e_last = 1); checked against the primal QP."""
        st = load_stages('b_clusters_P20_M30_N200')
        s, t = st['s'][2], st['t'][2][:, :20]
        shifted = t.copy()
        shifted[-1] += kappa
        coef = anchor_qp.nnls_batched(s[None], shifted[None]).coef[0]
        primal, dual, comp = _explicit_kkt(s, t, coef, kappa=kappa)
        assert primal < 1e-10 and dual == 0.0 and comp < 1e-10
        for j in range(t.shape[1]):
            v, _ = anchor_qp.project_qp_scipy(s, t[:, j], kappa=kappa)
            np.testing.assert_allclose(v, t[:, j] - s @ coef[j], atol=1e-8)

    def test_random_rank_deficient_problems_match_scipy_nnls(self):
        """m > d (rank-deficient Gram), duplicated and zero-norm columns."""
        rng = np.random.RandomState(5)
        p, d, m, n = 6, 7, 15, 40
        s = rng.randn(p, d, m)
        s[:, :, 3] = s[:, :, 1]  # duplicate column
        s[:, :, 7] = 0.0  # zero column
        t = rng.randn(p, d, n)
        res = anchor_qp.nnls_batched(s, t)
        assert res.num_fallback == 0
        assert res.kkt.max() < 1e-10
        for i in range(p):
            for j in range(n):
                _, rnorm = scipy.optimize.nnls(s[i], t[i, :, j])
                ours = np.linalg.norm(t[i, :, j] - s[i] @ res.coef[i, j])
                assert abs(ours - rnorm) < 1e-10 * (1 + rnorm)

    def test_chunking_and_subsets_do_not_change_results(self, load_stages):
        st = load_stages('a_clouds_P10_M20_N100')
        s, t, _, _ = mftma.stack_stage_inputs(st['s'], st['t'])
        need = np.random.RandomState(0).rand(*t.shape[::2]) < 0.7
        full = anchor_qp.nnls_batched(s, t, need=need)
        small = anchor_qp.nnls_batched(s, t, need=need, chunk_size=37)
        np.testing.assert_allclose(small.coef, full.coef, atol=1e-12)
        assert np.all(full.coef[~need] == 0.0)

    def test_padded_columns_stay_zero(self):
        rng = np.random.RandomState(2)
        s = rng.randn(2, 5, 8)
        s[1, :, 5:] = 0.0
        s[:, -1, :] = 1.0
        s[1, -1, 5:] = 0.0
        t = rng.randn(2, 5, 30)
        res = anchor_qp.nnls_batched(s, t, num_points=np.array([8, 5]))
        assert np.all(res.coef[1, :, 5:] == 0.0)
        alone = anchor_qp.nnls_batched(s[1:, :, :5], t[1:])
        np.testing.assert_allclose(res.coef[1, :, :5], alone.coef[0], atol=1e-12)

    def test_fallback_path(self):
        """A step budget of 1 forces every multi-step problem through scipy.optimize.nnls."""
        rng = np.random.RandomState(3)
        s = np.vstack([rng.randn(6, 10), np.ones((1, 10))])[None]
        t = rng.randn(1, 7, 20)
        ref = anchor_qp.nnls_batched(s, t)
        forced = anchor_qp.nnls_batched(s, t, max_steps=1)
        assert forced.num_fallback > 0
        np.testing.assert_allclose(forced.coef, ref.coef, atol=1e-10)
        assert forced.kkt.max() < 1e-10
