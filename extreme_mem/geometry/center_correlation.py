"""Centre-correlation analysis and low-rank removal of the MFTMA pipeline.

Owns sections 1.3-1.5 and 2 of the reference description
(`docs/mftma_algorithm.md`, describing `fun_FA` of
schung039/neural_manifolds_replicaMFT at d56eda1): the class-centre statistics `rho_center`, the
upper bound `maxK`, the Riemannian minimisation of the residual-centre cosine cost on the Stiefel
manifold with random restarts (kept by *stability*, not by cost), the choice of K by the first
minimum of the residual mean |cosine|, and the removed subspace W (N x K).

The optimiser is a batched numpy re-implementation of the conjugate-gradient method the reference
uses (pymanopt 0.2.4 `ConjugateGradient` with Hestenes-Stiefel beta, the "adaptive" backtracking
line search and the sign-fixed QR retraction), with the Euclidean gradient in closed form instead
of automatic differentiation, and all restarts (and all k <= 5, which the reference always
evaluates before its early stop can trigger) optimised together as one batch; later k run in
speculative batches of 4 with the random stream rewound to where the reference's loop stops.
Random starts are drawn in the reference's order from a legacy `numpy.random.RandomState`, so
with the same seed the restarts start from the same points as the reference's. The cost and its
gradient use products with G = Z Z^T only (O(P^2 k) per point, no autodiff); near a singular
point (a residual centre almost removed, c0/G < 1e-2) they switch to the literal formula, whose
rounding does not blow up like the expansion's. On the fixtures this reproduces the reference's
res_coeff per k to ~1e-8 and its removed subspace to ~1e-7.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

# docs/mftma_algorithm.md §1.5: maxK = (last index with cumulative explained variance < 0.95) + 11.
_MAXK_VARIANCE = 0.95
_MAXK_OFFSET = 11
# docs/mftma_algorithm.md §2.4: the early stop may trigger from k = 5 on (k > 4, three strict
# increases).
_MIN_K_FOR_STOP = 5
# Points whose smallest retained squared-norm fraction c0/G is below this use the direct cost.
_DIRECT_BELOW = 1e-2
# k values beyond 5 optimised together per batch (speculatively, see remove_center_correlations).
_SPECULATE = 4


@dataclasses.dataclass(frozen=True)
class CenterCorrelation:
    """Result of the centre-correlation step.

    Attributes:
      rho_center: mean |cosine| between the centred class centres before removal (§2.2).
      num_removed: K >= 1, number of removed centre directions (§2.5).
      removed_basis: W, (N, K) orthonormal columns spanning the removed subspace.
      max_k: maxK, the upper bound of the k loop (§1.5).
      res_coeff: (k_stop,) mean |cosine| of the residual centres for k = 1..k_stop (§2.4.2).
      stability: (k_stop,) min retained norm fraction of the kept restart at each k (§2.4.1d).
    """

    rho_center: float
    num_removed: int
    removed_basis: np.ndarray
    max_k: int
    res_coeff: np.ndarray
    stability: np.ndarray


def mean_abs_cosine(vectors: np.ndarray) -> float:
    """Mean |cosine| over ordered off-diagonal pairs of rows (docs/mftma_algorithm.md §2.2).

    Args:
      vectors: (P, d) rows; none may be zero.

    Returns:
      (sum_{mu,nu} |cos(x_mu, x_nu)| - P) / (P (P - 1)), the reference's formula (which assumes
      the diagonal is exactly 1).
    """
    p = vectors.shape[0]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    gamma = unit @ unit.T
    return float((np.abs(gamma).sum() - p) / (p * (p - 1)))


def max_k_bound(centers: np.ndarray) -> int:
    """The reference's maxK from the explained variance of the centred centres (§1.4-1.5).

    Args:
      centers: (P, N) raw class centres.

    Returns:
      n_lt + 10 if n_lt >= 1 else 11, n_lt = #{k : tau_k < 0.95}, tau the cumulative explained
      variance of the singular values of the centres centred by their plain mean.
    """
    centered = centers - centers.mean(axis=0, keepdims=True)
    sigma = np.linalg.svd(centered, compute_uv=False)
    total = np.sum(sigma**2)
    tau = np.cumsum(sigma**2) / total
    masked = np.where(tau < _MAXK_VARIANCE, tau, 0.0)
    return int(np.argmax(masked)) + _MAXK_OFFSET


class _CenterCost:
    """F(V) = 1/2 sum_{mu,nu} (G_{mu nu} - Y_mu . Y_nu)^2 / (c0_mu c0_nu), Y = Z V (§2.3).

    c0_mu = G_{mu mu} - |Y_mu|^2 and G = Z Z^T; for orthonormal V this is the sum of squared
    cosines of the residual centres r = Z (I - V V^T). Batched over B points, stored transposed:
    `vt` is V^T with shape (B, k, n), `yt` is Y^T with shape (B, k, P). Only products with the
    fixed P x P matrices G and G o G and with Z are used (one GEMM each for the whole batch); no
    B x P x P array is formed. Zero-padded columns of V (elements with smaller k in a mixed batch)
    contribute nothing and get zero gradient.
    """

    def __init__(self, z: np.ndarray):
        self.z = z
        self.gram = z @ z.T
        self.gram2 = self.gram * self.gram
        self.gdiag = np.diag(self.gram).copy()

    def project(self, vt: np.ndarray) -> np.ndarray:
        """Y^T = (Z V)^T for a batch, (B, k, n) -> (B, k, P)."""
        b, k, n = vt.shape
        return (vt.reshape(b * k, n) @ self.z.T).reshape(b, k, -1)

    def evaluate(self, yt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F and (E Y)^T from Y^T (B, k, P), with dF/dV = -2 Z^T E Z V (see `egrad`).

        E = A o (w w^T) - diag(u), A = G - Y Y^T, w = 1 / c0, u_mu = w_mu^2 sum_nu A_{mu nu}^2 w_nu
        (dF = sum E o dA). Returns (F (B,), (E Y)^T (B, k, P)).
        """
        b, k, p = yt.shape
        c = self.gdiag - np.einsum('bkp,bkp->bp', yt, yt)
        w = 1.0 / c
        g2w = w @ self.gram2  # (B, P)
        wyt = yt * w[:, None, :]
        gwyt = (wyt.reshape(b * k, p) @ self.gram).reshape(b, k, p)
        m = np.matmul(yt, np.swapaxes(wyt, 1, 2))  # Y^T W Y, (B, k, k)
        t1 = np.einsum('bp,bp->b', w, g2w)
        t2 = np.einsum('bkp,bkp->b', wyt, gwyt)
        t3 = np.einsum('bij,bij->b', m, m)
        cost = 0.5 * (t1 - 2.0 * t2 + t3)
        myt = np.matmul(m, yt)  # (Y M)^T, M symmetric
        # q_mu = sum_nu A_{mu nu}^2 w_nu, expanded like the cost.
        q = g2w - 2.0 * np.einsum('bkp,bkp->bp', yt, gwyt) + np.einsum('bkp,bkp->bp', myt, yt)
        u = w * w * q
        eyt = w[:, None, :] * (gwyt - myt) - u[:, None, :] * yt
        # The expansions lose about 2 log10(G/c0) digits; near-singular points (a residual
        # centre almost removed) are evaluated with the direct formulas instead.
        direct = np.flatnonzero((c / self.gdiag).min(axis=1) < _DIRECT_BELOW)
        if direct.size:
            yd = yt[direct]
            amat = self.gram - np.matmul(np.swapaxes(yd, 1, 2), yd)  # (b', P, P)
            wd = w[direct]
            a2w = np.einsum('bij,bj->bi', amat * amat, wd)
            cost[direct] = 0.5 * np.einsum('bi,bi->b', a2w, wd)
            ew = amat * wd[:, :, None] * wd[:, None, :]  # A o w w^T
            eyt[direct] = np.matmul(yd, ew) - (wd * wd * a2w)[:, None, :] * yd
        return cost, eyt

    def egrad(self, eyt: np.ndarray) -> np.ndarray:
        """Euclidean gradient (dF/dV)^T = -2 (E Y)^T Z, (B, k, n)."""
        b, k, p = eyt.shape
        return -2.0 * (eyt.reshape(b * k, p) @ self.z).reshape(b, k, -1)

    def residual_norm_fraction(self, vt: np.ndarray) -> np.ndarray:
        """|r_mu| / |Z_mu| for each element and manifold, (B, P)."""
        yt = self.project(vt)
        c = self.gdiag - np.einsum('bkp,bkp->bp', yt, yt)
        return np.sqrt(np.maximum(c, 0.0) / self.gdiag)


def _gram_t(at: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """A^T B for transposed batches at = A^T (B, k, n), bt = B^T: (B, k, k)."""
    return np.matmul(at, np.swapaxes(bt, 1, 2))


def _proj_t(xt: np.ndarray, ut: np.ndarray) -> np.ndarray:
    """Stiefel tangent projection U - X sym(X^T U), transposed batches (ut may carry extra
    leading axes, broadcast against xt)."""
    s = np.matmul(xt, np.swapaxes(ut, -1, -2))
    s = 0.5 * (s + np.swapaxes(s, -1, -2))
    return ut - np.matmul(s, xt)


def _inner(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum('bij,bij->b', a, b)


def stiefel_conjugate_gradient(
    cost: _CenterCost,
    v0t: np.ndarray,
    colmask: np.ndarray,
    gtol: float = 1e-6,
    min_step: float = 1e-10,
    max_iter: int = 1000,
    max_line_evals: int = 10,
) -> np.ndarray:
    """Batched Riemannian CG on St(n, k), mirroring pymanopt 0.2.4 `ConjugateGradient`.

    Per batch element: Hestenes-Stiefel beta clipped at 0 (reset to steepest descent when the
    direction is not a descent direction), vector transport by tangent projection, the adaptive
    backtracking line search (first trial 1/|d|, Armijo factor 0.5, halving while the count of
    cost evaluations is <= `max_line_evals`, i.e. at most max_line_evals + 1 evaluations as in
    pymanopt's loop condition; reject when worse; next trial alpha if exactly two evaluations
    were used else 2 alpha), sign-fixed QR retraction. An element stops when
    |grad| < gtol, when its step length is < min_step, or after max_iter iterations. Trial
    points of the line search are evaluated through Y = Z V without touching V:
    Y(alpha) = (Y + alpha Z d) R(alpha)^{-1}.

    Args:
      cost: the cost object.
      v0t: (B, k, n) transposed starting points with orthonormal (unpadded) rows.
      colmask: (B, k) 1.0 for real columns of V, 0.0 for zero padding (smaller k).
      gtol, min_step, max_iter, max_line_evals: stopping rules, reference defaults.

    Returns:
      (B, k, n) the final points, transposed.
    """
    batch, kpad, _ = v0t.shape
    out = v0t.copy()
    ids = np.arange(batch)  # original index of each working row
    x = v0t.copy()
    pad = np.zeros((batch, kpad, kpad))
    pad[:, np.arange(kpad), np.arange(kpad)] = 1.0 - colmask
    y = cost.project(x)
    f, eyt = cost.evaluate(y)
    grad = _proj_t(x, cost.egrad(eyt))
    gg = _inner(grad, grad)
    desc = -grad
    old_alpha = np.full(batch, np.nan)
    step = np.full(batch, np.nan)
    for it in range(max_iter):
        # pymanopt's stopping rules, checked before each iteration; finished rows are written
        # out and the working arrays compacted.
        stop = (np.sqrt(gg) < gtol) | (step < min_step)
        if it + 1 >= max_iter:
            stop[:] = True
        if np.any(stop):
            out[ids[stop]] = x[stop]
            keep = np.flatnonzero(~stop)
            if keep.size == 0:
                break
            ids, x, y, f, grad, gg, desc, old_alpha, step, pad = (
                a[keep] for a in (ids, x, y, f, grad, gg, desc, old_alpha, step, pad)
            )
        df0 = _inner(grad, desc)
        reset = df0 >= 0
        if np.any(reset):
            desc[reset] = -grad[reset]
            df0[reset] = -gg[reset]
        # Adaptive line search on Y(alpha) = (Y + alpha Z d) L(alpha)^{-T}.
        zd = cost.project(desc)
        xx, xd, dd = _gram_t(x, x), _gram_t(x, desc), _gram_t(desc, desc)
        xd = xd + np.swapaxes(xd, 1, 2)
        norm_d = np.sqrt(np.einsum('bii->b', dd))
        alpha = np.where(np.isnan(old_alpha), 1.0 / norm_d, old_alpha)

        def trial(sub, a):
            a3 = a[:, None, None]
            g = xx[sub] + a3 * xd[sub] + (a3 * a3) * dd[sub] + pad[sub]
            linv = np.linalg.inv(np.linalg.cholesky(g))
            return linv, np.matmul(linv, y[sub] + a3 * zd[sub])

        linv, newy = trial(slice(None), alpha)
        newf, neweyt = cost.evaluate(newy)
        evals = np.ones(x.shape[0], dtype=int)
        while True:
            bad = (newf > f + 0.5 * alpha * df0) & (evals <= max_line_evals)
            if not np.any(bad):
                break
            sub = np.flatnonzero(bad)
            alpha[sub] *= 0.5
            linv[sub], newy[sub] = trial(sub, alpha[sub])
            newf[sub], neweyt[sub] = cost.evaluate(newy[sub])
            evals[sub] += 1
        newx = np.matmul(linv, x + alpha[:, None, None] * desc)
        worse = newf > f
        if np.any(worse):  # rejected step: stay (and stop, as the step length is 0)
            alpha[worse] = 0.0
            newx[worse] = x[worse]
            newy[worse] = y[worse]
            newf[worse], neweyt[worse] = cost.evaluate(newy[worse])
        step = alpha * norm_d
        old_alpha = np.where(evals == 2, alpha, 2.0 * alpha)
        # New gradient, transported old gradient and direction (one stacked projection), and
        # the Hestenes-Stiefel direction.
        newgrad, oldgrad, dtrans = _proj_t(newx, np.stack([cost.egrad(neweyt), grad, desc]))
        diff = newgrad - oldgrad
        num = _inner(newgrad, diff)
        den = _inner(diff, dtrans)
        with np.errstate(divide='ignore', invalid='ignore'):
            beta = np.where(den != 0.0, np.maximum(0.0, num / den), 1.0)
        x, y, f, grad = newx, newy, newf, newgrad
        gg = _inner(newgrad, newgrad)
        desc = -newgrad + beta[:, None, None] * dtrans
    return out


def _random_starts(rng: np.random.RandomState, p: int, ks: list[int], n_reps: int):
    """Draw the restarts in the reference's order: per k, per repetition, randn(P, 1) (unused)
    then randn(P - 1, k), whose reduced-QR Q factor is the start (pymanopt Stiefel.rand)."""
    starts = []
    for k in ks:
        for _ in range(n_reps):
            rng.randn(p, 1)
            q, _ = np.linalg.qr(rng.randn(p - 1, k))
            starts.append(q)
    return starts


def remove_center_correlations(
    centers: np.ndarray,
    rng: np.random.RandomState,
    n_reps: int = 10,
    gtol: float = 1e-6,
) -> CenterCorrelation:
    """Centre-correlation analysis and choice of the removed subspace (mftma_algorithm.md §1.4-2.5).

    Args:
      centers: (P, N) raw class centres c_mu (P >= 3, N >= P - 1).
      rng: legacy RandomState; consumed exactly as the reference consumes the global RNG for
        the k values it visits (so t vectors drawn afterwards line up with the reference's when
        the same k_stop is reached).
      n_reps: random restarts per k (reference: 10).
      gtol: Riemannian gradient-norm stopping tolerance (reference: 1e-6).

    Returns:
      `CenterCorrelation` with rho_center, K, W (N, K) and the per-k diagnostics.
    """
    p, n = centers.shape
    max_k = max_k_bound(centers)
    b = centers - centers.mean(axis=0, keepdims=True)
    q, _ = scipy.linalg.qr(b.T, mode='economic')
    proj = q[:, : p - 1]
    z = b @ proj  # (P, P-1)
    rho_center = mean_abs_cosine(z)
    cost = _CenterCost(z)

    # The reference would reach k = P-1 (all residuals zero, F undefined) and then fail for
    # P <= 5; capping at P-2 keeps every k well defined and changes nothing for P >= 6 unless
    # the early stop never triggers.
    k_limit = max(1, min(max_k, p - 2))
    res_coeff: list[float] = []
    stability: list[float] = []
    kept: list[np.ndarray] = []

    def run_group(ks: list[int]) -> list[tuple[float, np.ndarray | None]]:
        """Optimise all restarts of all k in ks as one batch; best (stability, V) per k."""
        starts = _random_starts(rng, p, ks, n_reps)
        kpad = max(ks)
        v0t = np.zeros((len(starts), kpad, p - 1))
        colmask = np.zeros((len(starts), kpad))
        for i, s in enumerate(starts):
            v0t[i, : s.shape[1], :] = s.T
            colmask[i, : s.shape[1]] = 1.0
        vt = stiefel_conjugate_gradient(cost, v0t, colmask, gtol=gtol)
        frac = cost.residual_norm_fraction(vt).min(axis=1)
        out = []
        for gi, k in enumerate(ks):
            best, best_v = 0.0, None
            for r in range(n_reps):  # strict '>' from 0: the first best restart wins
                i = gi * n_reps + r
                if frac[i] > best:
                    best, best_v = frac[i], vt[i, :k, :].T
            out.append((best, best_v))
        return out

    def accept(best: float, best_v: np.ndarray | None) -> None:
        if best_v is None:  # §2.4 corner case: keep the previous k's subspace.
            best_v = kept[-1] if kept else np.zeros((p - 1, 0))
        kept.append(best_v)
        stability.append(best)
        res_coeff.append(mean_abs_cosine(z - (z @ best_v) @ best_v.T))

    def stop_now() -> bool:
        k = len(res_coeff)
        if k < _MIN_K_FOR_STOP:
            return False
        rc = res_coeff
        return rc[k - 1] > rc[k - 2] > rc[k - 3] > rc[k - 4]

    # k = 1..5 always run (the early stop cannot trigger before k = 5): one batch.
    for best in run_group(list(range(1, min(_MIN_K_FOR_STOP, k_limit) + 1))):
        accept(*best)
    # Later k speculatively in batches of `_SPECULATE` values; the RNG is rewound and replayed
    # up to the k where the loop stops, so the stream stays the reference's.
    while not stop_now() and len(res_coeff) < k_limit:
        k0 = len(res_coeff) + 1
        ks = list(range(k0, min(k0 + _SPECULATE, k_limit + 1)))
        state = rng.get_state()
        results = run_group(ks)
        for i, best in enumerate(results):
            accept(*best)
            if stop_now() and i + 1 < len(ks):
                rng.set_state(state)
                _random_starts(rng, p, ks[: i + 1], n_reps)
                break
    num_removed = int(np.argmin(res_coeff)) + 1
    basis = proj @ kept[num_removed - 1]
    return CenterCorrelation(
        rho_center=rho_center,
        num_removed=num_removed,
        removed_basis=basis,
        max_k=max_k,
        res_coeff=np.asarray(res_coeff),
        stability=np.asarray(stability),
    )
