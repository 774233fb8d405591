"""Anchor-point solvers: the batched exact cone projection and its slow scipy twin.

Owns the quadratic programs of the per-manifold MFTMA stage (docs/mftma_algorithm.md §4.3): for
each manifold point matrix S ((D+1) x m, columns s_j = (u_j, 1)) and Gaussian vector t, the
reference solves

    minimise 1/2 |v|^2 - t.v  over v   subject to  s_j.v <= -kappa  (j = 1..m)

with cvxopt (one interior-point call per sample). Its dual is the non-negative least-squares problem

    a* = argmin_{a >= 0} |t' - S a|^2,   t' = t + kappa e_last,   v = t - S a*,

because the last row of S is all ones, so S^T e_last = 1 and S^T t' = S^T t + kappa 1 (for
kappa = 0 this is the Moreau decomposition of docs/mftma_algorithm.md §7). The anchor point is
s = S a* / sum(a*).

`nnls_batched` solves all problems of a layer together (every manifold, every t vector) with a
vectorised Lawson-Hanson active-set method in Gram form (Bro & de Jong 1997): each problem keeps
its passive set in a compact order together with the inverse of the passive Gram block, updated
by bordering when a point enters and by a rank-one downdate when one leaves, so one step costs
O(k^2) per problem instead of a fresh factorisation. Problems are processed in blocks of a few
thousand (mixing manifolds; products with G = S^T S are one GEMM per manifold present) and leave
the block as soon as they are optimal. Passive least-squares solutions are iteratively refined
when their residual is not at rounding level, and every result is checked against the KKT
conditions (`kkt_residual`, scaled as a backward error); any problem that fails (none of the
~25,000 fixture problems) is re-solved by `scipy.optimize.nnls`. At paper scale the ~17,300
problems of a layer take ~0.15 s, against ~16 s for the reference's cvxopt calls
(docs/mftma_algorithm.md §8).

`project_qp_scipy` is the slow, obviously-correct twin: the primal QP of one sample, solved by
scipy's SLSQP with analytic derivatives (~0.3 ms per QP; the tests compare the two to 1e-8).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.optimize

# A dual component w_j = s_j.(t - S a) counts as positive when it exceeds this fraction of
# max_j |s_j| |t| (its natural scale; rounding in w is ~1e-15 of it).
_ADD_TOL = 1e-11
# A new passive column is numerically dependent on the others when the squared norm of its
# component orthogonal to them is below this fraction of |s_j|^2; such problems go to scipy.
_DEPENDENT_TOL = 1e-10
# KKT acceptance of the fast solver, relative to max_j |s_j| (|t'| + sum_i a_i |s_i|).
KKT_TOL = 1e-10


@dataclasses.dataclass(frozen=True)
class NNLSResult:
    """Solutions of a batch of NNLS problems.

    Attributes:
      coef: (P, n, m) a*, zero for problems not solved and for padded columns.
      kkt: (P, n) KKT residual of every solved problem (0 for unsolved ones), scaled by
        max_j |s_j| (|t| + sum_i a_i |s_i|), the size of the rounding in w = S^T (t - S a).
      steps: number of vectorised active-set steps taken.
      num_fallback: problems re-solved with scipy.optimize.nnls.
    """

    coef: np.ndarray
    kkt: np.ndarray
    steps: int
    num_fallback: int


def kkt_residual(
    gram: np.ndarray, rhs: np.ndarray, coef: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """Scaled KKT residual of min_{a>=0} 1/2 a^T G a - b^T a (an NNLS problem in Gram form).

    With w = b - G a (= S^T (t' - S a), the constraint values s_j.v + kappa of the primal QP):
    dual feasibility a >= 0, primal feasibility w <= 0, complementary slackness a_j w_j = 0.

    Args:
      gram: (P, m, m) G = S^T S per manifold.
      rhs: (P, n, m) b = S^T t'; padded columns may hold -inf (they are ignored).
      coef: (P, n, m) candidate a.
      scale: (P, n) positive problem scale, e.g. |t'| max_j |s_j|.

    Returns:
      (P, n) max(max_j (w_j)_+, max_j (-a_j)_+, max_j |a_j w_j| / (1 + sum a)) / scale.
    """
    w = rhs - np.matmul(coef, gram)
    finite = np.isfinite(w)  # padded columns carry b = -inf and are ignored
    primal = np.maximum(np.where(finite, w, -np.inf).max(axis=-1), 0.0)
    dual = np.maximum(-coef.min(axis=-1), 0.0)
    comp = np.abs(coef * np.where(finite, w, 0.0)).max(axis=-1) / (1.0 + coef.sum(axis=-1))
    return np.maximum(np.maximum(primal, dual), comp) / scale


class _ActiveSet:
    """Working state of the vectorised Lawson-Hanson method for a set of unfinished problems."""

    def __init__(self, pid, grp, rhs, tol, tnorm, cap):
        n, m = rhs.shape
        self.pid = pid  # (n,) index into the flat problem list
        self.grp = grp  # (n,) manifold of each problem (sorted)
        self.rhs = rhs  # (n, m) b
        self.order = np.tile(np.arange(m), (n, 1))  # passive indices first
        self.npas = np.zeros(n, dtype=np.int64)
        self.xp = np.zeros((n, cap))  # values in passive order
        self.bp = np.zeros((n, cap))  # b in passive order
        self.hinv = np.zeros((n, cap, cap))  # inverse of the passive Gram block
        self.passive = np.zeros((n, m), dtype=bool)
        self.add_mode = np.ones(n, dtype=bool)
        self.last_added = np.full(n, -1)
        self.done = np.zeros(n, dtype=bool)  # retired, awaiting compaction
        self.tol = tol  # (n,) threshold for a positive dual component
        self.tnorm = tnorm  # (n,) |t|

    @property
    def cap(self) -> int:
        return self.xp.shape[1]

    def grow(self, new_cap: int) -> None:
        n, cap = self.xp.shape
        extra = new_cap - cap
        self.xp = np.pad(self.xp, ((0, 0), (0, extra)))
        self.bp = np.pad(self.bp, ((0, 0), (0, extra)))
        self.hinv = np.pad(self.hinv, ((0, 0), (0, extra), (0, extra)))

    def keep(self, rows: np.ndarray) -> None:
        for name in ('pid', 'grp', 'rhs', 'order', 'npas', 'xp', 'bp', 'hinv', 'passive',
                     'add_mode', 'last_added', 'tol', 'tnorm', 'done'):
            setattr(self, name, getattr(self, name)[rows])

    def full_x(self, rows: np.ndarray) -> np.ndarray:
        m = self.rhs.shape[1]
        x = np.zeros((rows.size, m))
        cap = self.cap
        np.put_along_axis(x, self.order[rows, :cap], self.xp[rows], axis=1)
        return x


def _gram_times(gram: np.ndarray, grp: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows x_r @ G[grp_r] for rows sorted by group, one GEMM per group present."""
    out = np.empty_like(x)
    if x.shape[0] == 0:
        return out
    cuts = np.flatnonzero(np.diff(grp)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [grp.size]))
    for s, e in zip(starts, ends):
        out[s:e] = x[s:e] @ gram[grp[s]]
    return out


def _swap_positions(st: _ActiveSet, rows: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> None:
    """Swap compact positions p1 <-> p2 (per row) in order, xp, bp and both axes of hinv."""
    o1 = st.order[rows, p1].copy()
    st.order[rows, p1] = st.order[rows, p2]
    st.order[rows, p2] = o1
    cap = st.cap
    inside = (p1 < cap) & (p2 < cap)
    r, q1, q2 = rows[inside], p1[inside], p2[inside]
    for arr in (st.xp, st.bp):
        a1 = arr[r, q1].copy()
        arr[r, q1] = arr[r, q2]
        arr[r, q2] = a1
    h = st.hinv
    row1 = h[r, q1, :].copy()
    h[r, q1, :] = h[r, q2, :]
    h[r, q2, :] = row1
    col1 = h[r, :, q1].copy()
    h[r, :, q1] = h[r, :, q2]
    h[r, :, q2] = col1


def _lawson_hanson(gram, grp, rhs, tol, tnorm, max_steps):
    """Vectorised Lawson-Hanson NNLS in Gram form for problems sorted by group.

    Args: gram (P, m, m); grp (n,) sorted manifold index; rhs (n, m) b = S^T t (-inf for padded
    columns); tol (n,) positivity threshold of the dual components at x = 0, scaled by
    (1 + sum_i x_i |s_i| / |t|) as x grows; tnorm (n,) |t|; max_steps step budget.

    Returns (x (n, m), failed (n,) bool, steps).
    """
    n, m = rhs.shape
    x_out = np.zeros((n, m))
    failed = np.zeros(n, dtype=bool)
    st = _ActiveSet(np.arange(n), grp, rhs, tol, tnorm, cap=min(m, 8))
    gdiag = np.einsum('gjj->gj', gram)
    steps = 0
    while steps < max_steps and not st.done.all():
        steps += 1
        finished = np.zeros(st.pid.size, dtype=bool)
        # (A) Problems whose current x is feasible: pick the most violated dual constraint.
        ia = np.flatnonzero(st.add_mode & ~st.done)
        if ia.size:
            xa = st.full_x(ia)
            w = st.rhs[ia] - _gram_times(gram, st.grp[ia], xa)
            # x_P solves the passive least squares, so w_P = 0 up to rounding; where the
            # passive Gram block is ill-conditioned, one step of iterative refinement first.
            resid = np.where(st.passive[ia], w, 0.0)
            redo = np.flatnonzero(np.abs(resid).max(axis=1) > 0.01 * st.tol[ia])
            if redo.size:
                rows = ia[redo]
                cap = st.cap
                rp = np.take_along_axis(resid[redo], st.order[rows, :cap], axis=1)
                valid = np.arange(cap)[None, :] < st.npas[rows, None]
                rp = np.where(valid, rp, 0.0)
                xp = st.xp[rows] + np.einsum('rij,rj->ri', st.hinv[rows], rp)
                st.xp[rows] = np.where(valid, np.maximum(xp, 0.0), 0.0)
                xr = st.full_x(rows)
                w[redo] = st.rhs[rows] - _gram_times(gram, st.grp[rows], xr)
            w[st.passive[ia]] = -np.inf
            j = np.argmax(w, axis=1)
            wj = w[np.arange(ia.size), j]
            # Rounding in w grows with |S x| <= sum_i x_i |s_i| (large x: ill-conditioned S_P).
            snorm = np.sqrt(gdiag[st.grp[ia, None], st.order[ia, : st.cap]])
            sx = np.einsum('rq,rq->r', st.xp[ia], snorm)
            done = ~(wj > st.tol[ia] * (1.0 + sx / st.tnorm[ia]))
            finished[ia[done]] = True
            ia, j = ia[~done], j[~done]
        if ia.size:
            q = st.npas[ia]
            if q.max() >= st.cap:
                st.grow(min(m, 2 * st.cap))
            cap = st.cap
            # Move j to compact position q. Both positions are outside the passive block, where
            # xp, bp and the rows/columns of hinv are kept zero, so only `order` changes.
            pos_j = np.argmax(st.order[ia] == j[:, None], axis=1)
            st.order[ia, pos_j] = st.order[ia, q]
            st.order[ia, q] = j
            # Border the inverse: g = G[P, j], u = H g, d = G_jj - g.u.
            g = st.grp[ia]
            gp = gram[g[:, None], st.order[ia, :cap], j[:, None]]
            gp[np.arange(cap)[None, :] >= q[:, None]] = 0.0
            h = st.hinv[ia]
            u = np.einsum('rij,rj->ri', h, gp)
            d = gdiag[g, j] - np.einsum('ri,ri->r', gp, u)
            bad = ~(d > _DEPENDENT_TOL * gdiag[g, j])
            d = np.where(bad, 1.0, d)
            h += u[:, :, None] * (u[:, None, :] / d[:, None, None])
            rr = np.arange(ia.size)
            h[rr, q, :] = -u / d[:, None]
            h[rr, :, q] = -u / d[:, None]
            h[rr, q, q] = 1.0 / d
            st.hinv[ia] = h
            st.bp[ia, q] = st.rhs[ia, j]
            st.xp[ia, q] = 0.0
            st.npas[ia] += 1
            st.passive[ia, j] = True
            st.last_added[ia] = q
            if np.any(bad):  # numerically dependent column: leave it to the fallback
                finished[ia[bad]] = True
                failed[st.pid[ia[bad]]] = True
        # (B) Unconstrained least squares on the passive set of every unfinished problem.
        ib = np.flatnonzero(~finished & ~st.done)
        if ib.size:
            cap = st.cap
            valid = np.arange(cap)[None, :] < st.npas[ib, None]
            s = np.einsum('rij,rj->ri', st.hinv[ib], st.bp[ib])
            s = np.where(valid, s, 0.0)
            neg = valid & (s <= 0.0)
            anyneg = neg.any(axis=1)
            ok = ib[~anyneg]
            st.xp[ok] = s[~anyneg]
            st.add_mode[ok] = True
            st.last_added[ok] = -1
            ic = ib[anyneg]
            if ic.size:
                sc, xc, nc = s[anyneg], st.xp[ic], neg[anyneg]
                with np.errstate(divide='ignore', invalid='ignore'):
                    ratio = np.where(nc, xc / (xc - sc), np.inf)
                r = np.argmin(ratio, axis=1)
                alpha = ratio[np.arange(ic.size), r]
                stalled = (r == st.last_added[ic]) & ~(alpha > 0)
                xc = np.maximum(xc + alpha[:, None] * (sc - xc), 0.0)
                xc[np.arange(ic.size), r] = 0.0
                st.xp[ic] = xc
                st.add_mode[ic] = False
                st.last_added[ic] = -1
                # Remove position r: swap it to the last passive position, then downdate.
                last = st.npas[ic] - 1
                st.passive[ic, st.order[ic, r]] = False
                _swap_positions(st, ic, r, last)
                h = st.hinv[ic]
                rr = np.arange(ic.size)
                hl = h[rr, :, last].copy()
                hll = hl[rr, last]
                h -= hl[:, :, None] * (hl[:, None, :] / hll[:, None, None])
                h[rr, last, :] = 0.0
                h[rr, :, last] = 0.0
                st.hinv[ic] = h
                st.xp[ic, last] = 0.0
                st.bp[ic, last] = 0.0
                st.npas[ic] -= 1
                if np.any(stalled):
                    finished[ic[stalled]] = True
                    failed[st.pid[ic[stalled]]] = True
        # (C) Retire finished problems; compact the working arrays once a quarter of the rows
        # are retired (a problem that finishes in (A) has passive residual w_P <= tol / 100).
        fin = np.flatnonzero(finished)
        if fin.size:
            x_out[st.pid[fin]] = st.full_x(fin)
            st.done[fin] = True
            if st.done.sum() * 4 >= st.done.size:
                st.keep(np.flatnonzero(~st.done))
    left = np.flatnonzero(~st.done)
    if left.size:  # step budget exhausted
        failed[st.pid[left]] = True
        x_out[st.pid[left]] = st.full_x(left)
    return x_out, failed, steps


def nnls_batched(
    points: np.ndarray,
    targets: np.ndarray,
    need: np.ndarray | None = None,
    num_points: np.ndarray | None = None,
    chunk_size: int = 2048,
    max_steps: int | None = None,
) -> NNLSResult:
    """Solve min_{a >= 0} |t - S a|^2 for every manifold and every target column, together.

    Args:
      points: (P, d, m) S per manifold (zero-padded columns allowed, see num_points).
      targets: (P, d, n) target vectors t (columns).
      need: (P, n) bool, which problems to solve; default all. Others get a = 0.
      num_points: (P,) number of valid columns of each S; default m.
      chunk_size: problems per vectorised block (bounds memory and keeps blocks in cache).
      max_steps: active-set steps per block before the remaining problems go to the fallback;
        default 3 m + 10.

    Returns:
      `NNLSResult` with coef (P, n, m); every solved problem satisfies the KKT conditions to
      `KKT_TOL` (scaled) or was re-solved by scipy.optimize.nnls.
    """
    p, d, m = points.shape
    n = targets.shape[2]
    gram = np.matmul(np.swapaxes(points, 1, 2), points)  # (P, m, m)
    rhs = np.matmul(np.swapaxes(targets, 1, 2), points)  # (P, n, m)
    if num_points is not None:
        pad = np.arange(m)[None, :] >= np.asarray(num_points)[:, None]  # (P, m)
        rhs = np.where(pad[:, None, :], -np.inf, rhs)
    if need is None:
        need = np.ones((p, n), dtype=bool)
    if max_steps is None:
        max_steps = 3 * m + 10
    coef = np.zeros((p, n, m))
    tnorm = np.maximum(np.linalg.norm(targets, axis=1), np.finfo(float).tiny)  # (P, n)
    scale = tnorm * np.linalg.norm(points, axis=1).max(axis=1)[:, None]
    scale = np.maximum(scale, np.finfo(float).tiny)
    grp, col = np.nonzero(need)  # sorted by manifold
    total_steps = 0
    failed_all = np.zeros(grp.size, dtype=bool)
    for start in range(0, grp.size, chunk_size):
        sl = slice(start, start + chunk_size)
        g, c = grp[sl], col[sl]
        x, failed, steps = _lawson_hanson(
            gram, g, rhs[g, c], _ADD_TOL * scale[g, c], tnorm[g, c], max_steps
        )
        coef[g, c] = x
        failed_all[sl] = failed
        total_steps += steps
    snorm = np.sqrt(np.einsum('pjj->pj', gram))  # (P, m) |s_j|

    def kkt_of(c):
        # Backward-error scale max_j |s_j| (|t| + sum_i a_i |s_i|): rounding in w = S^T (t - S a).
        sc = scale * (1.0 + np.einsum('pnm,pm->pn', c, snorm) / tnorm)
        return np.where(need, kkt_residual(gram, rhs, c, sc), 0.0)

    kkt = kkt_of(coef)
    redo = np.flatnonzero(failed_all | (kkt[grp, col] > KKT_TOL))
    for r in redo:
        gi, ci = grp[r], col[r]
        mm = m if num_points is None else int(num_points[gi])
        a, _ = scipy.optimize.nnls(points[gi, :, :mm], targets[gi, :, ci])
        coef[gi, ci, :] = 0.0
        coef[gi, ci, :mm] = a
    if redo.size:
        kkt = kkt_of(coef)
    return NNLSResult(coef=coef, kkt=kkt, steps=total_steps, num_fallback=int(redo.size))


def project_qp_scipy(
    points: np.ndarray, t: np.ndarray, kappa: float = 0.0
) -> tuple[np.ndarray, float]:
    """Slow twin: the primal anchor QP of one sample with scipy's SLSQP.

    Solves min_v 1/2 |v|^2 - t.v subject to s_j.v <= -kappa (docs/mftma_algorithm.md §4.3)
    directly, with analytic derivatives and ftol 1e-15, from the feasible start
    v = (0, ..., 0, -kappa - 1) (every s_j ends in 1, so s_j.v = -kappa - 1). The sum of the dual
    weights is read off the centre row, sum_j a_j = t_last - v_last, because t - v = S a and the
    last row of S is ones.

    Args:
      points: (d, m) S with last row all ones.
      t: (d,) the Gaussian vector.
      kappa: margin.

    Returns:
      (v (d,), sum_a) with v the projection and sum_a = sum of the dual weights.
    """
    d = points.shape[0]
    v0 = np.zeros(d)
    v0[-1] = -kappa - 1.0
    cons = {
        'type': 'ineq',
        'fun': lambda v: -(points.T @ v) - kappa,
        'jac': lambda v: -points.T,
    }
    res = scipy.optimize.minimize(
        lambda v: 0.5 * v @ v - t @ v,
        v0,
        jac=lambda v: v - t,
        constraints=[cons],
        method='SLSQP',
        options={'ftol': 1e-15, 'maxiter': 1000},
    )
    v = res.x
    return v, float(t[-1] - v[-1])
