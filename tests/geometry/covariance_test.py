"""Tests for extreme_mem/geometry/covariance.py against independent oracles (numpy, scipy)."""

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.stats
import tensorflow as tf
from absl.testing import absltest, parameterized

from extreme_mem.geometry import covariance


def _random_spd(d, rng, spread=3.0):
    q = covariance.random_orthonormal_basis(d, rng)
    return q @ np.diag(np.exp(rng.uniform(-spread / 2, spread / 2, size=d))) @ q.T


def _definition2_numerical(a_bases, b):
    """inf over Σ = Σ_i exp(θ_i) P_i (aligned with A) of ½ tr(Σ⁻¹B + B⁻¹Σ) − d, by BFGS."""
    d = b.shape[0]
    b_inv = np.linalg.inv(b)
    projectors = [q @ q.T for q in a_bases]

    def objective(theta):
        sigma = sum(np.exp(t) * p for t, p in zip(theta, projectors))
        return 0.5 * np.trace(np.linalg.inv(sigma) @ b + b_inv @ sigma) - d

    best = min((scipy.optimize.minimize(objective, x0, method='BFGS', options={'gtol': 1e-10})
                for x0 in (np.zeros(len(projectors)), np.full(len(projectors), 1.0))), key=lambda r: r.fun)
    return best.fun


class PatchesTest(parameterized.TestCase):

    @parameterized.parameters(('valid', 1), ('valid', 2), ('same', 1), ('same', 2))
    def test_patches_are_conv_inputs(self, padding, stride):
        """⟨filter, patch⟩ equals TensorFlow's convolution (Keras kernel layout and padding)."""
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 6, 5, 3))
        kernel = rng.normal(size=(3, 3, 3, 4))
        p = covariance.patches(x, 3, stride, padding)
        got = p @ covariance.filter_matrix(kernel).T
        want = tf.nn.conv2d(x, kernel, strides=stride, padding=padding.upper()).numpy()
        np.testing.assert_allclose(got, want.reshape(-1, 4), atol=1e-10)

    def test_patch_covariance_matches_numpy_cov_in_chunks(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(7, 5, 5, 2))
        want = np.cov(covariance.patches(x, 3), rowvar=False, bias=True)
        np.testing.assert_allclose(covariance.patch_covariance(x, 3, chunk=3), want, atol=1e-12)

    def test_filter_covariance_matches_numpy(self):
        kernel = np.random.default_rng(2).normal(size=(3, 3, 2, 50))
        filters = np.stack([kernel[..., j].ravel() for j in range(50)])
        np.testing.assert_allclose(covariance.filter_covariance(kernel), np.cov(filters, rowvar=False, bias=True),
                                   atol=1e-12)

    def test_bad_inputs(self):
        with self.assertRaisesRegex(ValueError, "Unknown padding 'full'"):
            covariance.patches(np.zeros((1, 4, 4, 1)), 3, padding='full')
        with self.assertRaisesRegex(ValueError, 'smaller than the 5x5 patch'):
            covariance.patches(np.zeros((1, 4, 4, 1)), 5)


class MisalignmentTest(parameterized.TestCase):

    @parameterized.parameters(2, 3, 5)
    def test_closed_form_equals_numerical_infimum(self, d):
        rng = np.random.default_rng(d)
        a, b = _random_spd(d, rng), _random_spd(d, rng)
        got = covariance.misalignment(a, b)
        want = _definition2_numerical(covariance.eigenspaces(a), b)
        self.assertAlmostEqual(got, want, places=6)
        self.assertGreater(got, 1e-3)

    def test_closed_form_with_repeated_eigenvalue(self):
        """A = diag(1, 1, 2, 3): one 2-dimensional eigenspace; Σ must be constant on it."""
        rng = np.random.default_rng(7)
        q = covariance.random_orthonormal_basis(4, rng)
        a = q @ np.diag([1.0, 1.0, 2.0, 3.0]) @ q.T
        b = _random_spd(4, rng)
        bases = covariance.eigenspaces(a)
        self.assertEqual(sorted(x.shape[1] for x in bases), [1, 1, 2])
        self.assertAlmostEqual(covariance.misalignment(a, b), _definition2_numerical(bases, b), places=6)
        # B aligned with A although B separates the repeated eigenspace? No: B must be constant there.
        b_split = q @ np.diag([1.0, 5.0, 2.0, 3.0]) @ q.T
        self.assertGreater(covariance.misalignment(a, b_split), 0.1)
        # ... while A is aligned with a B that merges eigenspaces (same value on V_2 and V_3).
        b_merged = q @ np.diag([4.0, 4.0, 7.0, 7.0]) @ q.T
        self.assertAlmostEqual(covariance.misalignment(a, b_merged), 0.0, places=10)

    def test_nonnegative_on_random_pairs(self):
        rng = np.random.default_rng(3)
        values = [covariance.misalignment(_random_spd(6, rng), _random_spd(6, rng)) for _ in range(50)]
        self.assertGreaterEqual(min(values), 0.0)

    def test_zero_iff_aligned(self):
        rng = np.random.default_rng(4)
        q = covariance.random_orthonormal_basis(5, rng)
        a = q @ np.diag([5.0, 4.0, 3.0, 2.0, 1.0]) @ q.T
        aligned = q @ np.diag(rng.uniform(0.1, 10, size=5)) @ q.T
        self.assertAlmostEqual(covariance.misalignment(a, aligned), 0.0, places=10)
        for eps in (1e-3, 1e-2, 1e-1):
            g = rng.normal(size=(5, 5))
            small = scipy.linalg.expm(eps * (g - g.T))  # a small rotation
            rotated = small @ aligned @ small.T
            self.assertGreater(covariance.misalignment(a, rotated), 0.0)

    def test_invariances(self):
        rng = np.random.default_rng(5)
        a, b = _random_spd(4, rng), _random_spd(4, rng)
        u = covariance.random_orthonormal_basis(4, rng)
        m = covariance.misalignment(a, b)
        self.assertAlmostEqual(covariance.misalignment(a, 7.5 * b), m, places=10)
        self.assertAlmostEqual(covariance.misalignment(u @ a @ u.T, u @ b @ u.T), m, places=10)

    def test_basis_form_equals_closed_form_for_eigenbasis(self):
        rng = np.random.default_rng(6)
        a, b = _random_spd(6, rng), _random_spd(6, rng)
        _, vectors = np.linalg.eigh(a)
        self.assertAlmostEqual(covariance.basis_misalignment(vectors, b), covariance.misalignment(a, b), places=10)

    def test_random_bases_are_haar_and_misaligned(self):
        rng = np.random.default_rng(8)
        q = covariance.random_orthonormal_basis(3, rng)
        np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
        # Haar: the first column's first entry is distributed as for a uniform point on S^2 (uniform on [-1, 1]).
        first = np.array([covariance.random_orthonormal_basis(3, rng)[0, 0] for _ in range(2000)])
        self.assertGreater(scipy.stats.kstest(first, 'uniform', args=(-1, 2)).pvalue, 1e-3)
        b = np.diag([10.0, 1.0, 0.1])
        values = covariance.random_basis_misalignment(b, num_bases=30, seed=0)
        self.assertLen(values, 30)
        self.assertGreater(values.min(), 0.0)
        self.assertAlmostEqual(covariance.misalignment(np.diag([3.0, 2.0, 1.0]), b), 0.0, places=12)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, 'positive definite'):
            covariance.misalignment(np.eye(3), np.diag([1.0, 1.0, 0.0]))
        with self.assertRaisesRegex(ValueError, 'same shape'):
            covariance.misalignment(np.eye(3), np.eye(2))
        with self.assertRaisesRegex(ValueError, 'orthonormal'):
            covariance.basis_misalignment(2 * np.eye(2), np.eye(2))


class TransferFunctionTest(absltest.TestCase):

    def test_aligned_covariances_map_eigenvalues(self):
        rng = np.random.default_rng(0)
        q = covariance.random_orthonormal_basis(4, rng)
        sig = np.array([4.0, 3.0, 2.0, 1.0])
        tau = np.array([0.5, 2.0, 1.5, 0.1])
        sigma, f = covariance.transfer_function(q @ np.diag(sig**2) @ q.T, q @ np.diag(tau**2) @ q.T)
        np.testing.assert_allclose(sigma, sig, atol=1e-12)
        np.testing.assert_allclose(f, tau, atol=1e-12)

    def test_synthetic_variances(self):
        v = covariance.synthetic_variances()
        self.assertLen(v, 30)
        self.assertAlmostEqual(v[0], 0.1)
        self.assertAlmostEqual(v[-1], 3.0)
        x = covariance.gaussian_inputs(40000, v, seed=1)
        np.testing.assert_allclose(x.var(axis=0), v, rtol=0.05)


class SamplingTest(absltest.TestCase):

    def test_sampled_filters_reproduce_sigma_w(self):
        """Sample covariance of 20k filters matches Σ_w within sampling error (4 standard errors)."""
        rng = np.random.default_rng(0)
        sigma_w = _random_spd(9, rng)
        kernel = covariance.sample_filters(sigma_w, (3, 3, 1, 20000), seed=1)
        filters = covariance.filter_matrix(kernel)
        est = filters.T @ filters / len(filters)
        # Var of the (i, j) entry of the empirical second moment of Gaussians: (Σ_ij² + Σ_ii Σ_jj) / n.
        se = np.sqrt((sigma_w**2 + np.outer(np.diag(sigma_w), np.diag(sigma_w))) / len(filters))
        self.assertLess(np.max(np.abs(est - sigma_w) / se), 4.5)
        self.assertLess(np.max(np.abs(filters.mean(axis=0)) / np.sqrt(np.diag(sigma_w) / len(filters))), 4.5)

    def test_singular_covariance_samples_live_in_its_range(self):
        rng = np.random.default_rng(1)
        v = covariance.random_orthonormal_basis(6, rng)[:, :2]
        kernel = covariance.sample_filters(v @ np.diag([4.0, 1.0]) @ v.T, (6, 500), seed=2)
        filters = covariance.filter_matrix(kernel)
        residual = filters - filters @ v @ v.T
        self.assertLess(np.abs(residual).max(), 1e-5)

    def test_eigen_filters_are_scaled_top_eigenvectors(self):
        rng = np.random.default_rng(2)
        q = covariance.random_orthonormal_basis(9, rng)
        sigma_x = q @ np.diag(np.arange(9, 0, -1.0)) @ q.T
        taus = [3.0, 2.0, 1.0]
        filters = covariance.filter_matrix(covariance.eigen_filters(sigma_x, (3, 3, 1, 3), taus, seed=0))
        for i, tau in enumerate(taus):
            self.assertAlmostEqual(abs(filters[i] @ q[:, i]), tau, places=5)
            self.assertAlmostEqual(np.linalg.norm(filters[i]), tau, places=5)
        more = covariance.filter_matrix(covariance.eigen_filters(sigma_x, (3, 3, 1, 16), seed=0))
        # 16 filters from 9 dimensions: the first 9 are ±e_i, the rest lie in their span (all of R^9).
        np.testing.assert_allclose(np.abs(more[:9] @ q), np.eye(9), atol=1e-5)
        with self.assertRaisesRegex(ValueError, "Unknown eigen_filters mode 'pca'"):
            covariance.eigen_filters(sigma_x, (3, 3, 1, 3), mode='pca')


class EigenvectorMatchTest(absltest.TestCase):

    def test_matches_recover_shared_eigenvectors(self):
        rng = np.random.default_rng(3)
        q = covariance.random_orthonormal_basis(4, rng)
        sigma_x = q @ np.diag([4.0, 3.0, 2.0, 1.0]) @ q.T
        sigma_w = q @ np.diag([1.0, 5.0, 0.5, 0.2]) @ q.T
        matches = covariance.eigenvector_matches(sigma_x, sigma_w, num_filters=2)
        self.assertEqual(matches[0]['ranks_x'], [1])  # Σ_w's top eigenvector is Σ_x's second
        self.assertEqual(matches[1]['ranks_x'], [0])
        self.assertAlmostEqual(abs(matches[0]['v_x_bar'] @ matches[0]['v_w']), 1.0, places=10)


if __name__ == '__main__':
    absltest.main()
