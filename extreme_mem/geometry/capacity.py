"""Empirical (simulated) manifold capacity by bisection on the number of random features.

Owns `empirical_capacity` and the exact separability test `is_linearly_separable`. This is the
ground truth that the mean-field capacity of `mftma.manifold_analysis` approximates (Stephenson
et al., ICLR 2021, §3.2 and Fig. 1B: "a bisection search to find the critical number of features
N such that the fraction of linearly separable random manifold dichotomies is close to 1/2";
alpha = P / N_c). It follows the reference's simulation (`manifold_simcap_analysis` of
neural_manifolds_replicaMFT): each trial labels a random half of the P manifolds +1 and the rest
-1 (all points of a manifold share the label), projects the raw points onto n random unit-norm
Gaussian directions, and asks whether a hyperplane with bias separates the two classes.

Differences from the reference, both deliberate:
  * Separability is decided exactly by a bounded max-margin LP (scipy.optimize.linprog, HiGHS)
    instead of an interior-point SVM with tolerance 1e-8.
  * Each trial draws one Gaussian matrix N x N and uses its first n columns, so the projections
    are nested in n and every trial's separability is monotone in n. The critical n of every
    trial is then found by its own search (galloping from the running median of the earlier
    trials' critical n, then bisection; ~6 LPs per trial), and N_c is where the empirical
    fraction of separable trials crosses 1/2 (linear interpolation between the two neighbouring
    integers n_c - 1 and n_c around the crossing).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import scipy.optimize

from extreme_mem.geometry import mftma

# HiGHS variants tried in turn when one reports neither feasibility nor infeasibility.
_LP_METHODS = ('highs', 'highs-ds', 'highs-ipm')
# Separable iff the optimal bounded margin exceeds this fraction of max |x|.
_MARGIN_RTOL = 1e-9


@dataclasses.dataclass(frozen=True)
class EmpiricalCapacity:
    """Result of `empirical_capacity`.

    Attributes:
      capacity: alpha_sim = P / N_c (nan if more than half of the trials are not separable even
        with all N features, i.e. N_c > N cannot be resolved by projection).
      critical_n: N_c, interpolated number of features at which half the dichotomies separate.
      trial_critical_n: (n_rep,) smallest separable feature count of each trial (inf if the
        trial is not separable with all N features).
      n_values: (k,) feature counts at which the separable fraction changes.
      p_values: (k,) fraction of separable trials at each of n_values.
      num_lps: number of linear programs solved.
    """

    capacity: float
    critical_n: float
    trial_critical_n: np.ndarray
    n_values: np.ndarray
    p_values: np.ndarray
    num_lps: int


def is_linearly_separable(x: np.ndarray, y: np.ndarray, bias: bool = True) -> bool:
    """Exact test of strict linear separability: exists (w, b) with y_i (w.x_i + b) > 0.

    Solves the bounded max-margin LP

        maximise t  over (w, b, t)  s.t.  y_i (w.x_i + b) >= t,  |w|_inf <= 1,  t <= 1

    with HiGHS. (w, b, t) = 0 is always feasible, so the optimum t* >= 0 exists, and the data
    are separable iff t* > 0 (decided against 1e-9 max|x|, far below the margins of separable
    trials). Unlike the unbounded feasibility LP y_i (w.x_i + b) >= 1, whose infeasibility
    proofs take HiGHS 30 s at P M = 5000 points, both outcomes are ordinary optimal solves.

    Args:
      x: (n_points, n_features) points.
      y: (n_points,) labels in {-1, +1}.
      bias: allow an offset b (reference: yes); otherwise the plane passes through the origin.

    Returns:
      True if separable.

    Raises:
      RuntimeError: if no HiGHS variant reaches an optimum.
    """
    n_points, n = x.shape
    a = x if not bias else np.hstack([x, np.ones((n_points, 1))])
    a_ub = np.hstack([-y[:, None] * a, np.ones((n_points, 1))])
    bounds = [(-1.0, 1.0)] * n + ([(None, None)] if bias else []) + [(None, 1.0)]
    cost = np.zeros(a.shape[1] + 1)
    cost[-1] = -1.0
    tol = _MARGIN_RTOL * max(1.0, float(np.abs(x).max(initial=0.0)))
    messages = []
    for method in _LP_METHODS:
        res = scipy.optimize.linprog(
            cost, A_ub=a_ub, b_ub=np.zeros(n_points), bounds=bounds, method=method
        )
        if res.status == 0:
            return bool(-res.fun > tol)
        messages.append(f'{method}: status {res.status}, {res.message}')
    raise RuntimeError('linprog failed on the separability LP: ' + '; '.join(messages))


def empirical_capacity(
    points: np.ndarray | Sequence[np.ndarray],
    n_rep: int = 100,
    seed: int | None = None,
    bias: bool = True,
) -> EmpiricalCapacity:
    """Simulated manifold capacity alpha_sim = P / N_c (Stephenson et al. 2021, Fig. 1B).

    Args:
      points: float array [P, M, N] or a list of P arrays [M_p, N] of raw points.
      n_rep: random trials (dichotomy + projection); the Monte-Carlo error of N_c shrinks like
        1 / sqrt(n_rep).
      seed: seed of the trials' random numbers.
      bias: separate with an affine hyperplane (reference) or a linear one.

    Returns:
      `EmpiricalCapacity`.
    """
    manifolds = mftma.as_point_clouds(points, min_manifolds=2, min_points=1, purpose=' for dichotomies')
    p = len(manifolds)
    n_feat = manifolds[0].shape[1]
    x_all = np.concatenate(manifolds, axis=0)
    owner = np.concatenate([np.full(x.shape[0], i) for i, x in enumerate(manifolds)])
    rng = np.random.RandomState(seed)
    crit = np.full(n_rep, np.inf)
    num_lps = 0
    for r in range(n_rep):
        positive = rng.choice(p, size=p // 2, replace=False)
        labels = -np.ones(p)
        labels[positive] = 1.0
        y = labels[owner]
        proj = rng.randn(n_feat, n_feat)
        proj /= np.linalg.norm(proj, axis=0, keepdims=True)
        feats = x_all @ proj  # column n-1 is the n-th random feature

        def separable(n: int) -> bool:
            return is_linearly_separable(feats[:, :n], y, bias=bias)

        # Bracket the trial's critical n by galloping from the running median of earlier
        # trials (the critical counts cluster), then bisect: lo not separable, hi separable
        # (hi = n_feat is verified only if the search ends there).
        found = crit[:r][np.isfinite(crit[:r])]
        guess = int(np.median(found)) if found.size else n_feat // 2
        guess = min(max(guess, 1), n_feat)
        lo, hi = 0, n_feat
        num_lps += 1
        if separable(guess):
            hi, step = guess, 1
            while hi - step > lo:
                num_lps += 1
                if separable(hi - step):
                    hi, step = hi - step, 2 * step
                else:
                    lo = hi - step
                    break
        else:
            lo, step = guess, 1
            while lo + step < hi:
                num_lps += 1
                if separable(lo + step):
                    hi = lo + step
                    break
                lo, step = lo + step, 2 * step
            else:
                if lo < n_feat:
                    num_lps += 1
                    if not separable(n_feat):
                        continue
                else:
                    continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            num_lps += 1
            if separable(mid):
                hi = mid
            else:
                lo = mid
        crit[r] = hi
    finite = np.sort(crit[np.isfinite(crit)])
    n_values = np.unique(finite)
    p_values = np.array([np.mean(crit <= n) for n in n_values])
    if n_values.size == 0 or p_values[-1] < 0.5:
        critical = np.nan
    else:
        # p(n) is a step function of the integer n; interpolate between n_hi - 1 and n_hi,
        # the integers around its crossing of 1/2.
        n_hi = n_values[int(np.argmax(p_values >= 0.5))]
        n_lo = n_hi - 1
        p_hi, p_lo = np.mean(crit <= n_hi), np.mean(crit <= n_lo)
        critical = float(np.interp(0.5, [p_lo, p_hi], [n_lo, n_hi]))
    return EmpiricalCapacity(
        capacity=p / critical if np.isfinite(critical) else np.nan,
        critical_n=critical,
        trial_critical_n=crit,
        n_values=n_values,
        p_values=p_values,
        num_lps=num_lps,
    )
