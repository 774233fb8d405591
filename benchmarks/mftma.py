"""Benchmark of extreme_mem.geometry.mftma at paper scale against per-sample QP baselines.

Runs, on the fixture `e_paper_P100_M50_N512` (P = 100 manifolds, M = 50 points, N = 512,
n_t = 200, kappa = 0; the scale of Stephenson et al. 2021), side by side:
  * ours: `manifold_analysis` (all P x n_t anchor problems solved together), split by stage;
  * baseline A: one scipy SLSQP QP per sample (`anchor_qp.project_qp_scipy`) on the same S
    matrices and t vectors, measured on a subset of manifolds and extrapolated (labelled);
  * baseline B: one `scipy.optimize.nnls` call per sample, measured on all manifolds;
  * the reference implementation's recorded CPU time from RESULTS.md (cvxopt + pymanopt).
All timings are process CPU seconds with single-threaded BLAS, like the reference's.

Usage: python benchmarks/mftma.py [--seeds 5] [--baseline-manifolds 10]
"""

import os

for _var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')  # before numpy: the reference was timed single-threaded

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extreme_mem.geometry import anchor_qp, center_correlation, mftma  # noqa: E402

FIXTURES = REPO.parent / 'shared' / 'fixtures' / 'mftma'
STEM = 'e_paper_P100_M50_N512'
TARGET_SPEEDUP = 30.0


def reference_cpu_seconds() -> tuple[float, float, float]:
    """(total, centre step, manifold loop) CPU s of the reference at paper scale.

    The total is read from the RESULTS.md table row 'e paper scale' (last column); the split
    from the ref.json summary (cpu_fun_FA_s, cpu_manifold_loop_s).
    """
    text = (FIXTURES / 'RESULTS.md').read_text()
    row = next(line for line in text.splitlines() if line.startswith('| e paper scale'))
    total = float(row.strip().strip('|').split('|')[-1])
    with open(FIXTURES / 'data' / f'{STEM}.ref.json') as f:
        summary = json.load(f)['by_n_t']['200']['summary_over_seeds']
    return total, summary['cpu_fun_FA_s']['mean'], summary['cpu_manifold_loop_s']['mean']


def run_ours(x: np.ndarray, seed: int) -> dict:
    """The pipeline of `mftma.manifold_analysis`, stage by stage, with CPU times."""
    cpu = time.process_time
    t0 = cpu()
    geo = mftma.manifold_analysis(x, seed=seed)
    total = cpu() - t0
    # Same computation again, split into stages (same seed, hence same random numbers).
    rng = np.random.RandomState(seed)
    manifolds = list(x)
    t0 = cpu()
    cc = center_correlation.remove_center_correlations(x.mean(axis=1), rng)
    t1 = cpu()
    s, dims, num_points = mftma.manifold_frames(manifolds, cc.removed_basis)
    t = np.zeros((x.shape[0], s.shape[1], 200))
    for i, d in enumerate(dims):
        draw = rng.randn(d + 1, 200)
        t[i, :d], t[i, -1] = draw[:d], draw[d]
    t2 = cpu()
    stage = mftma.manifold_stages(s, t, dims, num_points)
    t3 = cpu()
    assert np.allclose(stage.capacities, geo.capacities, rtol=1e-12)
    return dict(
        geo=geo,
        total=total,
        centre=t1 - t0,
        frames=t2 - t1,
        stage=t3 - t2,
        s=s,
        t=t,
        stage_result=stage,
    )


def baseline_slsqp(s, t, solved, manifolds) -> tuple[float, int, list]:
    """One SLSQP QP per QP-branch sample of the given manifolds: (CPU s, #QPs, [(i, j, v)])."""
    results = []
    t0 = time.process_time()
    for i in manifolds:
        for j in np.flatnonzero(solved[i]):
            v, _ = anchor_qp.project_qp_scipy(s[i], t[i][:, j])
            results.append((i, j, v))
    return time.process_time() - t0, len(results), results


def baseline_nnls(s, t, solved) -> tuple[float, int, np.ndarray]:
    """One scipy.optimize.nnls call per QP-branch sample of every manifold."""
    coef = np.zeros((s.shape[0], t.shape[2], s.shape[2]))
    n_qp = 0
    t0 = time.process_time()
    for i in range(s.shape[0]):
        for j in np.flatnonzero(solved[i]):
            coef[i, j], _ = scipy.optimize.nnls(s[i], t[i][:, j])
            n_qp += 1
    return time.process_time() - t0, n_qp, coef


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=5, help='pipeline runs (seeds 0..n-1)')
    parser.add_argument(
        '--baseline-manifolds',
        type=int,
        default=10,
        help='manifolds measured for the SLSQP baseline (extrapolated to all P)',
    )
    args = parser.parse_args()
    if not FIXTURES.is_dir():
        sys.exit(f'fixtures not found at {FIXTURES}')
    x = np.load(FIXTURES / 'data' / f'{STEM}.npz')['X']
    p, m, n = x.shape
    ref_total, ref_centre, ref_loop = reference_cpu_seconds()
    with open(FIXTURES / 'data' / f'{STEM}.ref.json') as f:
        ref_runs = {r['seed']: r for r in json.load(f)['by_n_t']['200']['runs']}

    mftma.manifold_analysis(x[:10, :, :20], seed=0, n_t=10)  # warm-up (imports, caches)
    runs = [run_ours(x, seed) for seed in range(args.seeds)]
    totals = np.array([r['total'] for r in runs])
    first = runs[0]
    stage = first['stage_result']
    solved = stage.solved
    n_qp_all = int(solved.sum())

    sub = list(range(min(args.baseline_manifolds, p)))
    slsqp_s, slsqp_n, slsqp_res = baseline_slsqp(first['s'], first['t'], solved, sub)
    slsqp_all = slsqp_s * n_qp_all / slsqp_n
    dv = max(
        np.abs(v - (first['t'][i][:, j] - first['s'][i] @ stage.coef[i, j])).max()
        for i, j, v in slsqp_res
    )
    nnls_s, nnls_n, nnls_coef = baseline_nnls(first['s'], first['t'], solved)
    dcoef = np.abs(
        np.einsum('pdm,pnm->pdn', first['s'], nnls_coef - stage.coef)
    ).max()

    med = float(np.median(totals))
    stage_med = float(np.median([r['stage'] for r in runs]))
    centre_med = float(np.median([r['centre'] for r in runs]))
    frames_med = float(np.median([r['frames'] for r in runs]))
    threads = os.environ['OPENBLAS_NUM_THREADS']
    rows = [
        (f'ours: manifold_analysis, median of {args.seeds} seeds', f'{med:8.3f}', '1.0x'),
        ('  min .. max over seeds', f'{totals.min():.3f}..{totals.max():.3f}', ''),
        ('  centre-correlation step (§2, batched Riemannian CG)', f'{centre_med:8.3f}', ''),
        ('  per-manifold frames + t draws (§3)', f'{frames_med:8.3f}', ''),
        (
            f'  anchor stage (§4): batched active-set NNLS, {n_qp_all:,} QPs',
            f'{stage_med:8.3f}',
            '',
        ),
        (
            f'baseline A: 1 SLSQP QP/sample; measured {slsqp_n:,} QPs on {len(sub)}/{p} '
            f'manifolds: {slsqp_s:.2f} s,',
            '',
            '',
        ),
        (
            f'  EXTRAPOLATED to all {n_qp_all:,} QPs (anchor stage only)',
            f'{slsqp_all:8.2f}',
            f'{slsqp_all / stage_med:.1f}x our stage',
        ),
        (
            f'baseline B: 1 scipy.optimize.nnls call/sample, all {nnls_n:,} QPs',
            f'{nnls_s:8.3f}',
            f'{nnls_s / stage_med:.1f}x our stage',
        ),
        ('reference, recorded (RESULTS.md; cvxopt QPs + pymanopt CG)', f'{ref_total:8.1f}',
         f'{ref_total / med:.1f}x'),
        ('  centre step (ref.json cpu_fun_FA_s)', f'{ref_centre:8.2f}',
         f'{ref_centre / centre_med:.1f}x our centre step'),
        ('  manifold loop (ref.json cpu_manifold_loop_s)', f'{ref_loop:8.2f}',
         f'{ref_loop / stage_med:.1f}x our stage'),
    ]
    print(f'MFTMA benchmark: {STEM} (P={p}, M={m}, N={n}, n_t=200, kappa=0)')
    print(f'process CPU seconds, single-threaded BLAS (OPENBLAS_NUM_THREADS={threads})')
    print()
    width = max(len(r[0]) for r in rows) + 2
    print(f'{"":{width}}{"CPU s":>14}  ratio')
    for label, value, ratio in rows:
        print(f'{label:{width}}{value:>14}  {ratio}')
    print()
    speedup = ref_total / med
    worst = ref_total / totals.max()
    verdict = 'MET' if speedup >= TARGET_SPEEDUP else 'NOT MET'
    print(
        f'speed-up vs reference: {speedup:.1f}x median, {worst:.1f}x slowest seed '
        f'(target >= {TARGET_SPEEDUP:.0f}x: {verdict})'
    )
    print(
        f'agreement: max |v_ours - v_SLSQP| = {dv:.1e}; max |S a_ours - S a_nnls| = {dcoef:.1e}; '
        f'fast-solver KKT max = {stage.kkt.max():.1e}, fallbacks = {stage.num_fallback}'
    )
    geo0, ref0 = first['geo'], ref_runs.get(0)
    if ref0 is not None:
        print(
            f'seed 0 vs reference seed-0 run: alpha_M {geo0.capacity:.4f} / '
            f'{ref0["alpha_M"]:.4f}, R_M {geo0.radius:.4f} / {ref0["R_M"]:.4f}, '
            f'D_M {geo0.dimension:.3f} / {ref0["D_M"]:.3f}, K {geo0.num_removed} / {ref0["K"]}'
        )


if __name__ == '__main__':
    main()
