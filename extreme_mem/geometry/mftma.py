"""Replica mean-field theoretic manifold analysis (MFTMA) of point-cloud manifolds.

Owns the pure-array pipeline `manifold_analysis` and its per-manifold anchor stage
`manifold_stage` / `manifold_stages`. It reproduces `manifold_analysis_corr(XtotT, kappa, n_t)` of
the reference implementation (schung039/neural_manifolds_replicaMFT at d56eda1, as described step
by step in `docs/mftma_algorithm.md`), as used by Stephenson et al. (ICLR 2021,
§3.2 and appendix A.1) for the manifold geometry metrics (MGMs): capacity alpha_M, radius R_M,
dimension D_M and centre correlation rho_center, with P = 100 classes and M = 50 examples each.

Pipeline (section numbers of docs/mftma_algorithm.md):
  §1   global centring; class centres; maxK from the centres' explained variance.
  §2   centre-correlation removal (`center_correlation.remove_center_correlations`): K >= 1
       directions found on the Stiefel manifold with 10 random restarts kept by stability.
  §3   per manifold: project out the K directions, centre on the manifold's own mean, scale so
       that the centre has unit norm, rotate into D = m coordinates (QR) when N > m (D = N
       otherwise; D is m, not the rank), append the centre coordinate: S = [U; 1^T].
  §4   anchor points for n_t Gaussian vectors t ~ N(0, I_{D+1}) (`anchor_qp.nnls_batched`,
       all P x n_t problems solved together), then per manifold
       alpha = 1 / mean_i [max(t_i.s_i + kappa, 0)^2 / |s_i|^2],
       R = sqrt(mean_i |(s_i - mean s)[:D] / s_i[D]|^2)   (about the *mean* anchor),
       D_M = D (mean_i t^_i . s^_i)^2                      (squared mean cosine, times D).
  Summaries: alpha_M harmonic mean, R_M and D_M arithmetic means (reference README).

Randomness: a legacy `numpy.random.RandomState(seed)` is consumed in the reference's order
(restart draws of §2 for every k visited, then randn(D+1, n_t) per manifold), so `seed=s`
follows the stream of `np.random.seed(s)` before a reference call. Whenever the centre step visits
the same k values and keeps the same optimum, the t vectors coincide and the per-manifold results
agree with the reference's to solver accuracy (observed for all recorded seeds 0-4 of the fixture
sets a, b, e, f: <= 4e-5 relative); otherwise they agree statistically (spreads in
docs/mftma_algorithm.md §8: e.g. alpha_M = 0.5240 +- 0.0058 at paper scale). The restarts'
trajectories are chaotic, so which optimum wins can depend on rounding (BLAS kernels, batch
composition).

Deviations from the reference, all outside its working range: P >= 3 is required (with P = 2
removing K >= 1 direction erases both centres); k is capped at P - 2 (the reference evaluates
k = P - 1, where every residual centre vanishes, and fails for P <= 5); degenerate centres raise
ValueError instead of dividing by zero; kappa != 0 is solved exactly through the same NNLS (see
`anchor_qp`).

Cost: at paper scale (P = 100, M = 50, N = 512, n_t = 200) about 0.8 CPU s single-threaded
(benchmarks/mftma.py) against 23.6 s for the reference (docs/mftma_algorithm.md §8). The work is
many small matrix products: use single-threaded BLAS (e.g. OPENBLAS_NUM_THREADS=1) when the cores
are shared; a multi-threaded BLAS under CPU contention can make it several times slower.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from extreme_mem.geometry import anchor_qp
from extreme_mem.geometry import center_correlation

# docs/mftma_algorithm.md §4.3: a QP-branch sample with |v - t| < 1e-8 is treated as interior.
_INTERIOR_EPS = 1e-8
# docs/mftma_algorithm.md §4.6: s^ = s~ / sqrt(|s~|^2 + 1e-12).
_DIM_EPS = 1e-12
# A manifold centre is "vanished" when its norm after removal is below this fraction of the
# largest centred point norm of that manifold (the reference divides by it unguarded, §6.4).
_VANISH_RTOL = 1e-10


@dataclasses.dataclass(frozen=True)
class ManifoldGeometry:
    """Manifold geometry metrics of one set of P manifolds.

    Attributes:
      capacity: alpha_M = 1 / mean_mu(1 / alpha_mu), the harmonic mean of `capacities`.
      radius: R_M, arithmetic mean of `radii`.
      dimension: D_M, arithmetic mean of `dimensions`.
      center_correlation: rho_center, mean |cosine| between the centred class centres (§2.2).
      num_removed: K, centre-correlation directions removed before the anchor analysis (§2.5).
      capacities: (P,) per-manifold alpha_mu.
      radii: (P,) per-manifold R_mu.
      dimensions: (P,) per-manifold D_mu.
    """

    capacity: float
    radius: float
    dimension: float
    center_correlation: float
    num_removed: int
    capacities: np.ndarray
    radii: np.ndarray
    dimensions: np.ndarray


@dataclasses.dataclass(frozen=True)
class StageResult:
    """Per-manifold outputs of the anchor stage (docs/mftma_algorithm.md §4).

    Attributes:
      capacities: (P,) alpha_mu = 1 / mean_i f_i (inf if every sample is interior).
      radii: (P,) R_mu.
      dimensions: (P,) D_mu.
      anchors: (P, Dmax+1, n_t) anchor points s_i in the padded layout (manifold coordinates
        first, centre coordinate last).
      coef: (P, n_t, m) NNLS weights a* (zero for interior samples).
      solved: (P, n_t) bool, samples that went to the QP branch (g_i + kappa >= 0).
      kkt: (P, n_t) scaled KKT residuals of the QP-branch samples.
      num_fallback: problems the fast solver handed to scipy.optimize.nnls.
    """

    capacities: np.ndarray
    radii: np.ndarray
    dimensions: np.ndarray
    anchors: np.ndarray
    coef: np.ndarray
    solved: np.ndarray
    kkt: np.ndarray
    num_fallback: int


def stack_stage_inputs(
    s_list: Sequence[np.ndarray], t_list: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pad per-manifold stage inputs into one batch.

    Args:
      s_list: P arrays (D_mu + 1, m_mu), last row all ones (docs/mftma_algorithm.md §3.5).
      t_list: P arrays (D_mu + 1, n_t).

    Returns:
      (S (P, Dmax+1, mmax), T (P, Dmax+1, n_t), dims (P,), num_points (P,)): manifold
      coordinates in the first D_mu rows, zeros up to Dmax, the centre coordinate in the last
      row; zero columns beyond m_mu.
    """
    dims = np.array([s.shape[0] - 1 for s in s_list])
    num_points = np.array([s.shape[1] for s in s_list])
    n_t = t_list[0].shape[1]
    p, dmax, mmax = len(s_list), int(dims.max()), int(num_points.max())
    s_pad = np.zeros((p, dmax + 1, mmax))
    t_pad = np.zeros((p, dmax + 1, n_t))
    for i, (s, t) in enumerate(zip(s_list, t_list)):
        if t.shape != (s.shape[0], n_t):
            raise ValueError(
                f't vectors of manifold {i} have shape {t.shape}; expected {(s.shape[0], n_t)}'
            )
        d = dims[i]
        s_pad[i, :d, : s.shape[1]] = s[:d]
        s_pad[i, -1, : s.shape[1]] = s[d]
        t_pad[i, :d] = t[:d]
        t_pad[i, -1] = t[d]
    return s_pad, t_pad, dims, num_points


def manifold_stages(
    s: np.ndarray,
    t: np.ndarray,
    dims: np.ndarray,
    num_points: np.ndarray | None = None,
    kappa: float = 0.0,
) -> StageResult:
    """Anchor-point analysis of all manifolds at once (docs/mftma_algorithm.md §4, batched).

    Args:
      s: (P, Dmax+1, m) padded point matrices, last row the centre coordinate (1 for every
        valid point); see `stack_stage_inputs`.
      t: (P, Dmax+1, n_t) Gaussian vectors in the same layout (zeros in padded rows).
      dims: (P,) D_mu, the number of manifold coordinates (m or N, §3.4) used by D_M.
      num_points: (P,) valid columns per manifold; default all m.
      kappa: margin (Stephenson et al. use 0).

    Returns:
      `StageResult` with per-manifold alpha, R, D_M and the anchors.
    """
    p, dp1, m = s.shape
    dims = np.asarray(dims)
    if num_points is None:
        num_points = np.full(p, m)
    num_points = np.asarray(num_points)
    pad = np.arange(m)[None, :] >= num_points[:, None]  # (P, m)
    centre_row = np.where(pad, 1.0, s[:, -1, :])
    if not np.allclose(centre_row, 1.0, rtol=0.0, atol=1e-12):
        bad = int(np.argmax(np.abs(centre_row - 1.0).max(axis=1)))
        raise ValueError(
            f'the last row of S must be the centre coordinate 1 for every valid point; manifold '
            f'{bad} has values up to {np.abs(centre_row[bad] - 1.0).max() + 1.0:.6g}'
        )
    # §4.2 max-projection point: argmax_j t~.u_j (centre coordinate ignored, first on ties).
    proj = np.matmul(np.swapaxes(t[:, :-1, :], 1, 2), s[:, :-1, :])  # (P, n_t, m)
    proj = np.where(pad[:, None, :], -np.inf, proj)
    jstar = np.argmax(proj, axis=2)  # (P, n_t)
    s0 = np.take_along_axis(s, jstar[:, None, :], axis=2)  # (P, Dmax+1, n_t)
    g = np.einsum('pdn,pdn->pn', t, s0)
    solved = g + kappa >= 0.0  # §4.3: strictly negative is interior
    # §4.3 QP via its NNLS dual with t' = t + kappa e_last.
    t_shift = t.copy()
    t_shift[:, -1, :] += kappa
    res = anchor_qp.nnls_batched(s, t_shift, need=solved, num_points=num_points)
    coef = res.coef
    sa = np.matmul(s, np.swapaxes(coef, 1, 2))  # (P, Dmax+1, n_t) = t - v
    total = coef.sum(axis=2)  # (P, n_t) = sum of dual weights
    interior = ~solved | (np.linalg.norm(sa, axis=1) < _INTERIOR_EPS)
    with np.errstate(divide='ignore', invalid='ignore'):
        anchors = np.where(interior[:, None, :], s0, sa / total[:, None, :])
    # §4.4 capacity.
    h = np.maximum(np.einsum('pdn,pdn->pn', t, anchors) + kappa, 0.0)
    s_norm2 = np.einsum('pdn,pdn->pn', anchors, anchors)
    with np.errstate(divide='ignore', invalid='ignore'):
        f = np.where(s_norm2 > 0, h * h / s_norm2, 0.0)
        capacities = 1.0 / f.mean(axis=1)
    # §4.5 radius about the mean anchor, each anchor scaled by its own centre component.
    mean_anchor = anchors.mean(axis=2, keepdims=True)
    delta = (anchors[:, :-1, :] - mean_anchor[:, :-1, :]) / anchors[:, -1:, :]
    radii = np.sqrt(np.einsum('pdn,pdn->pn', delta, delta).mean(axis=1))
    # §4.6 dimension: D (mean cosine between t~ and s~)^2.
    tt = t[:, :-1, :]
    st = anchors[:, :-1, :]
    t_hat = tt / np.linalg.norm(tt, axis=1, keepdims=True)
    s_hat = st / np.sqrt(np.einsum('pdn,pdn->pn', st, st) + _DIM_EPS)[:, None, :]
    cosines = np.einsum('pdn,pdn->pn', t_hat, s_hat)
    dimensions = dims * cosines.mean(axis=1) ** 2
    return StageResult(
        capacities=capacities,
        radii=radii,
        dimensions=dimensions,
        anchors=anchors,
        coef=coef,
        solved=solved,
        kkt=res.kkt,
        num_fallback=res.num_fallback,
    )


def manifold_stage(s: np.ndarray, t: np.ndarray, kappa: float = 0.0) -> tuple[float, float, float]:
    """Anchor-point analysis of one manifold (reference: `each_manifold_analysis_D1`).

    Args:
      s: (D+1, m) point matrix [U; 1^T] (docs/mftma_algorithm.md §3.5).
      t: (D+1, n_t) Gaussian vectors.
      kappa: margin.

    Returns:
      (alpha, R, D_M) of the manifold.
    """
    s = np.asarray(s, dtype=float)
    t = np.asarray(t, dtype=float)
    if s.ndim != 2 or t.ndim != 2 or t.shape[0] != s.shape[0]:
        raise ValueError(
            f'manifold_stage expects s (D+1, m) and t (D+1, n_t); got {s.shape} and {t.shape}'
        )
    res = manifold_stages(s[None], t[None], np.array([s.shape[0] - 1]), kappa=kappa)
    return float(res.capacities[0]), float(res.radii[0]), float(res.dimensions[0])


def as_point_clouds(
    points, min_manifolds: int, min_points: int, purpose: str = '', hint: str = ''
) -> list[np.ndarray]:
    """Validates P point clouds and returns them as float64 arrays [M_p, N].

    Shared by `manifold_analysis` and `capacity.empirical_capacity`, which differ only in the
    limits.

    Args:
      points: an array [P, M, N] or a list of P arrays [M_p, N].
      min_manifolds: smallest valid P.
      min_points: smallest valid M_p.
      purpose: appended to "need at least P manifolds" in the error (e.g. ' for dichotomies').
      hint: appended to that error (why the limit exists).

    Raises:
      ValueError: wrong ndim, too few manifolds or points, mixed N, NaN/Inf; the message names
        the offending manifold and value.
    """
    if isinstance(points, np.ndarray):
        if points.ndim != 3:
            raise ValueError(
                f'points must be an array [P, M, N] or a list of P arrays [M_p, N]; got an array '
                f'with ndim={points.ndim} (shape {points.shape})'
            )
        manifolds = [np.asarray(x, dtype=np.float64) for x in points]
    else:
        manifolds = [np.asarray(x, dtype=np.float64) for x in points]
        for i, x in enumerate(manifolds):
            if x.ndim != 2:
                raise ValueError(
                    f'manifold {i} must be a 2-D array [M_p, N]; got ndim={x.ndim} '
                    f'(shape {x.shape})'
                )
    p = len(manifolds)
    if p < min_manifolds:
        raise ValueError(f'need at least {min_manifolds} manifolds{purpose}; got P={p}{hint}')
    n = manifolds[0].shape[1]
    for i, x in enumerate(manifolds):
        if x.shape[1] != n:
            raise ValueError(
                f'all manifolds must have the same feature dimension N={n}; manifold {i} has '
                f'N={x.shape[1]}'
            )
        if x.shape[0] < min_points:
            raise ValueError(
                f'manifold {i} has {x.shape[0]} point(s); every manifold needs at least '
                f'{min_points} point(s)'
            )
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(
                f'points must be finite; manifold {i} contains NaN or Inf: manifold {i} has '
                f'{x[tuple(bad)]} at point {bad[0]}, feature {bad[1]}'
            )
    return manifolds


def _as_manifolds(points) -> list[np.ndarray]:
    """Validates the input of `manifold_analysis`: P >= 3, M_p >= 2, N >= P - 1."""
    manifolds = as_point_clouds(
        points,
        min_manifolds=3,
        min_points=2,
        hint=' (with P=2 the two centred centres are collinear and removing K >= 1 centre '
        'direction erases both)',
    )
    p, n = len(manifolds), manifolds[0].shape[1]
    if n < p - 1:
        raise ValueError(
            f'feature dimension N={n} is smaller than P-1={p - 1}; the centre-correlation step '
            'needs N >= P-1'
        )
    return manifolds


def _rng(seed) -> np.random.RandomState:
    if isinstance(seed, np.random.RandomState):
        return seed
    return np.random.RandomState(seed)


def manifold_frames(
    manifolds: Sequence[np.ndarray], removed_basis: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-manifold preprocessing (docs/mftma_algorithm.md §1.1-1.2 and §3).

    Args:
      manifolds: P arrays (M_p, N) of raw points.
      removed_basis: W, (N, K) orthonormal directions to project out.

    Returns:
      (S (P, Dmax+1, mmax), dims (P,), num_points (P,)) in the padded layout of
      `stack_stage_inputs`: S = [Q^T U; 1^T] with U the centred points scaled so that the
      manifold centre has unit norm, D = m if N > m else N.

    Raises:
      ValueError: if a manifold's centre vanishes after the removal.
    """
    pooled_mean = np.concatenate(manifolds, axis=0).mean(axis=0)
    n = pooled_mean.size
    w = removed_basis
    frames = []
    for i, x in enumerate(manifolds):
        xc = x - pooled_mean
        y = xc - (xc @ w) @ w.T  # (m, N) rows
        center = y.mean(axis=0)
        nu = np.linalg.norm(center)
        scale = np.linalg.norm(y, axis=1).max()
        if not nu > _VANISH_RTOL * scale:
            raise ValueError(
                f'manifold {i}: its centre has norm {nu:.3g} after removing the global mean and '
                f'the K={w.shape[1]} centre-correlation directions (points up to norm '
                f'{scale:.3g}); the capacity is undefined for a manifold centred at the origin'
            )
        u = (y - center).T / nu  # (N, m)
        m = u.shape[1]
        if n > m:
            q, _ = np.linalg.qr(u)
            u = q.T @ u
        frames.append(u)
    dims = np.array([u.shape[0] for u in frames])
    num_points = np.array([u.shape[1] for u in frames])
    p, dmax, mmax = len(frames), int(dims.max()), int(num_points.max())
    s = np.zeros((p, dmax + 1, mmax))
    for i, u in enumerate(frames):
        s[i, : u.shape[0], : u.shape[1]] = u
        s[i, -1, : u.shape[1]] = 1.0
    return s, dims, num_points


def manifold_analysis(
    points, kappa: float = 0.0, n_t: int = 200, seed=None, n_reps: int = 10
) -> ManifoldGeometry:
    """Replica MFTMA of P manifolds (reference `manifold_analysis_corr`, mftma_algorithm.md §0-5).

    Args:
      points: float array [P, M, N] or a list of P arrays [M_p, N] (M_p >= 2 points of
        dimension N each; P >= 3, N >= P - 1, all finite).
      kappa: margin kappa (Stephenson et al. 2021 use 0).
      n_t: Gaussian vectors per manifold (reference README: 200). The Monte-Carlo error of
        alpha_M is about 1% at n_t = 200 (docs/mftma_algorithm.md §8: e.g. 0.5240 +- 0.0058
        at paper scale).
      seed: int, None or a `numpy.random.RandomState` (consumed in the reference's order).
      n_reps: random restarts per k in the centre-correlation step (reference: 10).

    Returns:
      `ManifoldGeometry` (alpha_M harmonic mean, R_M and D_M arithmetic means, rho_center, K,
      per-manifold arrays).

    Raises:
      ValueError: on wrong ndim, P < 3, fewer than 2 points in a manifold, mixed N, N < P - 1,
        NaN/Inf, n_t < 1, a class centre equal to the mean of the centres, or a manifold
        centre that vanishes after the centre removal.
    """
    manifolds = _as_manifolds(points)
    if int(n_t) != n_t or n_t < 1:
        raise ValueError(f'n_t must be a positive integer; got {n_t!r}')
    if not np.isfinite(kappa):
        raise ValueError(f'kappa must be finite; got {kappa!r}')
    rng = _rng(seed)
    centers = np.stack([x.mean(axis=0) for x in manifolds])  # raw class centres, (P, N)
    offsets = np.linalg.norm(centers - centers.mean(axis=0), axis=1)
    worst = int(np.argmin(offsets))
    if not offsets[worst] > _VANISH_RTOL * offsets.max():
        raise ValueError(
            f'manifold {worst}: its centre coincides with the mean of the class centres '
            f'(distance {offsets[worst]:.3g}); its centre direction, and hence its capacity, is '
            'undefined'
        )
    cc = center_correlation.remove_center_correlations(centers, rng, n_reps=n_reps)
    s, dims, num_points = manifold_frames(manifolds, cc.removed_basis)
    t = np.zeros((len(manifolds), s.shape[1], int(n_t)))
    for i, d in enumerate(dims):
        draw = rng.randn(d + 1, int(n_t))
        t[i, :d] = draw[:d]
        t[i, -1] = draw[d]
    stage = manifold_stages(s, t, dims, num_points, kappa=kappa)
    caps = stage.capacities
    return ManifoldGeometry(
        capacity=float(1.0 / np.mean(1.0 / caps)),
        radius=float(np.mean(stage.radii)),
        dimension=float(np.mean(stage.dimensions)),
        center_correlation=cc.rho_center,
        num_removed=cc.num_removed,
        capacities=caps,
        radii=stage.radii,
        dimensions=stage.dimensions,
    )
