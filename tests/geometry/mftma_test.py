"""Tests of extreme_mem.geometry.mftma against the reference fixtures and closed forms."""

import numpy as np
import pytest

from extreme_mem.geometry import center_correlation, mftma

DATASETS = (
    'a_clouds_P10_M20_N100',
    'b_clusters_P20_M30_N200',
    'd_spheres_P20_M50_N1024',
    'e_paper_P100_M50_N512',
    'f_noqr_P10_M40_N30',
)
# Datasets with saved stage inputs (data/stages, seed 0, n_t = 200).
STAGED = tuple(d for d in DATASETS if not d.startswith('e_'))

# RESULTS.md "Tolerances to use" 2: |new - ref mean| <= 4 ref std + 0.5% |ref mean| per run.
_SPREAD_STDS = 4.0
_SPREAD_FLOOR = 0.005


def _stage_batch(st):
    return mftma.stack_stage_inputs(st['s'], st['t'])


class TestStageExact:
    """Same S matrices and t vectors as the reference (data/stages): exact per-manifold values."""

    @pytest.mark.parametrize('stem', STAGED)
    def test_batched_stage_reproduces_reference(self, stem, load_stages):
        st = load_stages(stem)
        s, t, dims, num_points = _stage_batch(st)
        res = mftma.manifold_stages(s, t, dims, num_points, kappa=float(st['kappa']))
        # RESULTS.md asks for 1e-6; the brief for 1e-4. We reach ~1e-8.
        np.testing.assert_allclose(res.capacities, st['alpha_M_vec'], rtol=1e-6)
        np.testing.assert_allclose(res.radii, st['R_M_vec'], rtol=1e-6)
        np.testing.assert_allclose(res.dimensions, st['D_M_vec'], rtol=1e-6)
        assert res.num_fallback == 0

    @pytest.mark.parametrize('stem', STAGED)
    def test_single_manifold_stage(self, stem, load_stages):
        st = load_stages(stem)
        for i in (0, len(st['s']) - 1):
            alpha, radius, dim = mftma.manifold_stage(st['s'][i], st['t'][i])
            np.testing.assert_allclose(
                [alpha, radius, dim],
                [st['alpha_M_vec'][i], st['R_M_vec'][i], st['D_M_vec'][i]],
                rtol=1e-6,
            )

    @pytest.mark.parametrize('stem', STAGED)
    def test_frames_match_reference_inputs(self, stem, load_points, load_stages):
        """§1-3 from the raw data and the reference's removed subspace V11 give its sD1_i."""
        st = load_stages(stem)
        x = load_points(stem)
        s, dims, num_points = mftma.manifold_frames(list(x), st['V11'])
        for i, ref in enumerate(st['s']):
            d = dims[i]
            assert ref.shape == (d + 1, num_points[i])
            ours = np.vstack([s[i, :d, : num_points[i]], s[i, -1:, : num_points[i]]])
            # Up to the sign of each QR row (ALGORITHM.md §7).
            signs = np.where(np.sum(ours * ref, axis=1) < 0, -1.0, 1.0)
            np.testing.assert_allclose(ours * signs[:, None], ref, atol=1e-10)

    def test_padded_batch_equals_individual_stages(self, load_stages):
        """Manifolds of different m and D batched with padding give the unpadded results."""
        a = load_stages('a_clouds_P10_M20_N100')  # D = m = 20
        f = load_stages('f_noqr_P10_M40_N30')  # D = N = 30, m = 40
        s_list = [a['s'][0], f['s'][0], a['s'][1][:, :7]]
        t_list = [a['t'][0], f['t'][0], a['t'][1]]
        s, t, dims, num_points = mftma.stack_stage_inputs(s_list, t_list)
        res = mftma.manifold_stages(s, t, dims, num_points)
        for i, (si, ti) in enumerate(zip(s_list, t_list)):
            alone = mftma.manifold_stage(si, ti)
            np.testing.assert_allclose(
                [res.capacities[i], res.radii[i], res.dimensions[i]], alone, rtol=1e-10
            )


class TestStageClosedForm:
    def test_point_manifold(self):
        """All points at the centre: anchors are the point (0, 1); f_i = max(t0, 0)^2."""
        rng = np.random.RandomState(0)
        d, m, n_t = 4, 3, 500
        s = np.zeros((d + 1, m))
        s[-1] = 1.0
        t = rng.randn(d + 1, n_t)
        alpha, radius, dim = mftma.manifold_stage(s, t)
        np.testing.assert_allclose(alpha, 1.0 / np.mean(np.maximum(t[-1], 0.0) ** 2), rtol=1e-12)
        assert radius == 0.0
        assert dim == 0.0
        # Gardner's point capacity 2 = 1 / E[max(t0, 0)^2] within Monte-Carlo error.
        assert abs(alpha - 2.0) < 0.3

    @pytest.mark.parametrize('r', [0.3, 1.0, 2.5])
    def test_segment_manifold(self, r):
        """Two points (+-r, 0, 1), (-r, 0, 1): the cone {|x| <= r z} in the (x, z) plane.

        Projection of (x, z): itself inside the cone, 0 in the polar cone {r |x| + z <= 0},
        otherwise onto the ray (sign(x) r, 1); f = |projection|^2 (ALGORITHM.md §4.4 identity).
        """
        rng = np.random.RandomState(1)
        n_t = 400
        s = np.array([[r, -r], [0.0, 0.0], [1.0, 1.0]])
        t = rng.randn(3, n_t)
        x, z = t[0], t[-1]
        e = np.stack([np.sign(x) * r, np.ones_like(x)]) / np.sqrt(1 + r * r)
        along = np.maximum(e[0] * x + e[1] * z, 0.0)
        f = np.where(np.abs(x) <= r * z, x * x + z * z, along**2)
        f = np.where(r * np.abs(x) + z <= 0, 0.0, f)
        alpha, radius, _ = mftma.manifold_stage(s, t)
        np.testing.assert_allclose(alpha, 1.0 / f.mean(), rtol=1e-10)
        # Anchors lie on the segment between the two points: radius at most r.
        assert 0.0 < radius <= r + 1e-12


def _within_spread(value, summary):
    mean, std = summary['mean'], summary['std']
    return abs(value - mean) <= _SPREAD_STDS * std + _SPREAD_FLOOR * abs(mean)


class TestPipeline:
    @pytest.mark.parametrize('stem', [d for d in DATASETS if not d.startswith('d_')])
    def test_statistics_with_own_random_numbers(self, stem, load_points, load_reference):
        """A seed the reference never used: rho_center exact, K equal, summaries within spread."""
        x = load_points(stem)
        ref = load_reference(stem)['by_n_t']['200']['summary_over_seeds']
        geo = mftma.manifold_analysis(x, kappa=0.0, n_t=200, seed=12345)
        assert abs(geo.center_correlation - ref['rho_center']['mean']) < 1e-8
        assert geo.num_removed == round(ref['K']['mean']) == 1
        assert _within_spread(geo.capacity, ref['alpha_M']), (geo.capacity, ref['alpha_M'])
        assert _within_spread(geo.radius, ref['R_M']), (geo.radius, ref['R_M'])
        assert _within_spread(geo.dimension, ref['D_M']), (geo.dimension, ref['D_M'])
        p = x.shape[0]
        assert geo.capacities.shape == geo.radii.shape == geo.dimensions.shape == (p,)
        np.testing.assert_allclose(geo.capacity, 1.0 / np.mean(1.0 / geo.capacities))
        np.testing.assert_allclose(geo.radius, geo.radii.mean())
        np.testing.assert_allclose(geo.dimension, geo.dimensions.mean())

    @pytest.mark.parametrize('stem', [d for d in DATASETS if not d.startswith('d_')])
    def test_seed_follows_reference_stream(self, stem, load_points, load_reference):
        """seed=0 consumes the RNG like np.random.seed(0) before the reference call.

        The centre step starts its restarts from the reference's points and reaches the same
        optimum, so the t vectors coincide and per-manifold values agree to solver accuracy
        (observed <= 4e-5 relative; the centre step is only converged to |grad| < 1e-6).
        """
        x = load_points(stem)
        run = load_reference(stem)['by_n_t']['200']['runs'][0]
        assert run['seed'] == 0
        # The restarts' trajectories are sensitive to rounding (BLAS kernels); if this machine's
        # centre step visits a different number of k values, the t-vector streams are shifted
        # and only the statistical test above applies.
        centre = center_correlation.remove_center_correlations(
            x.mean(axis=1), np.random.RandomState(0)
        )
        if len(centre.res_coeff) != len(run['res_coeff_per_K']):
            pytest.skip(
                f'centre step stopped at k={len(centre.res_coeff)}, the reference at '
                f'k={len(run["res_coeff_per_K"])}: random streams not aligned on this machine'
            )
        geo = mftma.manifold_analysis(x, seed=0)
        assert geo.num_removed == run['K']
        np.testing.assert_allclose(geo.capacities, run['alpha_M_vec'], rtol=1e-3)
        np.testing.assert_allclose(geo.radii, run['R_M_vec'], rtol=1e-3)
        np.testing.assert_allclose(geo.dimensions, run['D_M_vec'], rtol=1e-3)

    def test_spheres(self, load_points, load_reference):
        """d: K depends on which local optimum the restarts reach (reference: 2, 1, 4, 1), so
        only rho_center is exact; K must be one the reference saw and the summaries within the
        reference's range over seeds (widened by 10%)."""
        stem = 'd_spheres_P20_M50_N1024'
        x = load_points(stem)
        runs = load_reference(stem)['by_n_t']['200']['runs']
        geo = mftma.manifold_analysis(x, seed=0)
        assert abs(geo.center_correlation - runs[0]['rho_center']) < 1e-8
        assert geo.num_removed in {r['K'] for r in runs}
        for key, value in (('alpha_M', geo.capacity), ('R_M', geo.radius), ('D_M', geo.dimension)):
            vals = [r[key] for r in runs]
            assert 0.9 * min(vals) <= value <= 1.1 * max(vals), (key, value, vals)

    def test_list_input_with_unequal_sizes(self):
        rng = np.random.RandomState(3)
        centers = rng.randn(8, 40)
        sizes = [5, 9, 12, 7, 20, 6, 8, 10]
        manifolds = [c + 0.4 * rng.randn(m, 40) for c, m in zip(centers, sizes)]
        geo = mftma.manifold_analysis(manifolds, seed=1, n_t=50)
        assert geo.capacities.shape == (8,)
        assert np.all(np.isfinite(geo.capacities)) and np.all(geo.capacities > 0)
        assert np.all(geo.radii > 0) and np.all(geo.dimensions > 0)

    def test_invariant_to_scale_and_translation(self, load_points):
        """alpha, R, D and rho are invariant to x -> c x + b (the centre step sees c Z)."""
        x = load_points('a_clouds_P10_M20_N100')
        g1 = mftma.manifold_analysis(x, seed=7)
        g2 = mftma.manifold_analysis(3.0 * x + 5.0, seed=7)
        assert g1.num_removed == g2.num_removed
        np.testing.assert_allclose(g2.capacities, g1.capacities, rtol=1e-5)
        np.testing.assert_allclose(g2.radii, g1.radii, rtol=1e-5)
        np.testing.assert_allclose(g2.center_correlation, g1.center_correlation, rtol=1e-10)

    def test_margin_lowers_capacity(self, load_points):
        """Same seed, same t vectors: a larger margin kappa moves every sample farther from
        the feasible set, so every per-manifold capacity drops (kappa = 0 vs 0.3)."""
        x = load_points('b_clusters_P20_M30_N200')
        g0 = mftma.manifold_analysis(x, seed=3, kappa=0.0)
        g1 = mftma.manifold_analysis(x, seed=3, kappa=0.3)
        assert np.all(g1.capacities < g0.capacities)
        assert g1.center_correlation == g0.center_correlation

    def test_result_is_frozen(self, load_points):
        geo = mftma.manifold_analysis(load_points('a_clouds_P10_M20_N100'), seed=0, n_t=20)
        with pytest.raises(AttributeError):
            geo.capacity = 1.0


class TestDegenerateInput:
    def _points(self, p=5, m=4, n=12, seed=0):
        rng = np.random.RandomState(seed)
        return rng.randn(p, 1, n) + 0.3 * rng.randn(p, m, n)

    def test_wrong_ndim(self):
        with pytest.raises(ValueError, match='ndim=2'):
            mftma.manifold_analysis(np.zeros((4, 5)))
        with pytest.raises(ValueError, match='ndim=4'):
            mftma.manifold_analysis(np.zeros((4, 5, 6, 7)))
        with pytest.raises(ValueError, match='manifold 1 must be a 2-D array.*ndim=1'):
            mftma.manifold_analysis([np.zeros((3, 6)), np.zeros(6), np.zeros((3, 6))])

    def test_too_few_points(self):
        x = list(self._points())
        x[2] = x[2][:1]
        with pytest.raises(ValueError, match='manifold 2 has 1 point.*at least 2'):
            mftma.manifold_analysis(x)

    def test_too_few_features(self):
        x = self._points(p=8, n=5)
        with pytest.raises(ValueError, match='N=5 is smaller than P-1=7'):
            mftma.manifold_analysis(x)

    def test_too_few_manifolds(self):
        with pytest.raises(ValueError, match='at least 3 manifolds; got P=2'):
            mftma.manifold_analysis(self._points(p=2))

    def test_mixed_feature_dimension(self):
        x = list(self._points())
        x[3] = x[3][:, :-1]
        with pytest.raises(ValueError, match='manifold 3 has N=11'):
            mftma.manifold_analysis(x)

    @pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
    def test_non_finite(self, bad):
        x = self._points()
        x[1, 2, 3] = bad
        with pytest.raises(ValueError, match=f'manifold 1 has {bad} at point 2, feature 3'):
            mftma.manifold_analysis(x)

    def test_bad_n_t(self):
        with pytest.raises(ValueError, match='n_t must be a positive integer; got 0'):
            mftma.manifold_analysis(self._points(), n_t=0)

    def test_centre_at_mean_of_centres(self):
        x = self._points()
        others = x[1:].mean(axis=(0, 1))
        x[0] = others + (x[0] - x[0].mean(axis=0))
        with pytest.raises(ValueError, match='manifold 0: its centre coincides with the mean'):
            mftma.manifold_analysis(x)

    def test_stage_needs_centre_row_of_ones(self):
        s = np.vstack([np.random.RandomState(0).randn(3, 4), np.full((1, 4), 0.5)])
        with pytest.raises(ValueError, match='last row of S must be the centre coordinate 1'):
            mftma.manifold_stage(s, np.ones((4, 5)))

    def test_centre_vanishes_after_removal(self):
        x = self._points()
        pooled = x.reshape(-1, x.shape[2]).mean(axis=0)
        direction = x[3].mean(axis=0) - pooled
        basis = (direction / np.linalg.norm(direction))[:, None]
        with pytest.raises(ValueError, match='manifold 3: its centre has norm .* K=1'):
            mftma.manifold_frames(list(x), basis)
