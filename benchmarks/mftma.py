"""Benchmark of extreme_mem.geometry.mftma at paper scale against per-sample QP baselines.

Runs, on the fixture `e_paper_P100_M50_N512` (P = 100 manifolds, M = 50 points, N = 512,
n_t = 200, kappa = 0; the scale of Stephenson et al. 2021), side by side:
  * ours: `manifold_analysis` (all P x n_t anchor problems solved together), split by stage;
  * baseline A: one scipy SLSQP QP per sample (`anchor_qp.project_qp_scipy`) on the same S
    matrices and t vectors, measured on a subset of manifolds and extrapolated (labelled);
  * baseline B: one `scipy.optimize.nnls` call per sample, measured on all manifolds;
  * the reference implementation's recorded CPU time (the fixture's `<stem>.ref.json`, mean over
    its seeds; docs/mftma_algorithm.md §8), cvxopt QPs + pymanopt CG.
All timings are process CPU seconds with single-threaded BLAS, like the reference's. The
fixtures live outside the repository, in ../shared/fixtures/mftma/ (override with --fixtures).

Usage: python benchmarks/mftma.py [--seeds=5] [--baseline-manifolds=10]
           [--fixture=e_paper_P100_M50_N512] [--json=PATH]

--json=PATH also writes the rows as a JSON list of
`{"model", "variant", "seconds_per_step", "ratio", "note"}`. `model` is the fixture stem. A
"step" here is one complete manifold analysis of that fixture (`manifold_analysis`, n_t = 200),
or the named stage of one: `seconds_per_step` is process CPU seconds per analysis. Variants:
`ours` (median over --seeds; the baseline row), `ours: centre step` (§2), `ours: frames` (§3
and the t draws), `ours: anchor stage` (§4), `SLSQP per QP` (anchor stage only; extrapolated
from --baseline-manifolds manifolds), `nnls per QP` (anchor stage only), `reference`,
`reference: centre step`, `reference: manifold loop` (recorded). `ratio` is the row's seconds
divided by the `ours` row's, so stage rows compare stage to whole analysis; divide two rows for
a stage-to-stage comparison (e.g. `SLSQP per QP` / `ours: anchor stage`).
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

from extreme_mem import config  # noqa: E402
from extreme_mem.geometry import anchor_qp, center_correlation, mftma  # noqa: E402

FIXTURES = REPO.parent / 'shared' / 'fixtures' / 'mftma'
PAPER_STEM = 'e_paper_P100_M50_N512'
TARGET_SPEEDUP = 30.0  # at paper scale only


def reference_cpu_seconds(reference: dict) -> tuple[float, float, float]:
    """(total, centre step, manifold loop) mean CPU s of the reference's n_t = 200 runs.

    Args:
      reference: the parsed `<stem>.ref.json` (keys cpu_s, cpu_fun_FA_s, cpu_manifold_loop_s of
        `by_n_t["200"]["summary_over_seeds"]`).
    """
    summary = reference['by_n_t']['200']['summary_over_seeds']
    return tuple(summary[k]['mean'] for k in ('cpu_s', 'cpu_fun_FA_s', 'cpu_manifold_loop_s'))


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


def json_rows(stem: str, timings: list, ours: float) -> list:
    """Row objects of --json: one per (variant, CPU s per analysis, note); ratio to `ours`."""
    return [
        {'model': stem, 'variant': v, 'seconds_per_step': sec, 'ratio': sec / ours, 'note': note}
        for v, sec, note in timings
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=5, help='pipeline runs (seeds 0..n-1)')
    parser.add_argument(
        '--baseline-manifolds',
        type=int,
        default=10,
        help='manifolds measured for the SLSQP baseline (extrapolated to all P)',
    )
    parser.add_argument('--fixture', default=PAPER_STEM, help='fixture stem under <fixtures>/data/')
    parser.add_argument('--fixtures', type=Path, default=FIXTURES, help='the MFTMA fixture directory')
    parser.add_argument('--json', type=Path, default=None, help='also write the rows to this JSON file')
    args = parser.parse_args()
    if args.seeds < 1 or args.baseline_manifolds < 1:
        parser.error(
            f'--seeds and --baseline-manifolds must be >= 1; got {args.seeds}, {args.baseline_manifolds}'
        )
    if not args.fixtures.is_dir():
        sys.exit(f'fixtures not found at {args.fixtures}')
    stems = sorted(f.name[: -len('.npz')] for f in (args.fixtures / 'data').glob('*.npz'))
    if args.fixture not in stems:
        parser.error(f'--fixture={args.fixture!r} not found; choose from {stems}')
    stem = args.fixture
    x = np.load(args.fixtures / 'data' / f'{stem}.npz')['X']
    p, m, n = x.shape
    with open(args.fixtures / 'data' / f'{stem}.ref.json') as f:
        reference = json.load(f)
    ref_total, ref_centre, ref_loop = reference_cpu_seconds(reference)
    ref_runs = {r['seed']: r for r in reference['by_n_t']['200']['runs']}

    mftma.manifold_analysis(x[:10, :, :20], seed=0, n_t=10)  # warm-up (imports, caches)
    runs = [run_ours(x, seed) for seed in range(args.seeds)]
    totals = np.array([r['total'] for r in runs])
    first = runs[0]
    stage = first['stage_result']
    solved = stage.solved
    n_qp_all = int(solved.sum())

    sub = list(range(min(args.baseline_manifolds, p)))
    slsqp_s, slsqp_n, slsqp_res = baseline_slsqp(first['s'], first['t'], solved, sub)
    slsqp_all = slsqp_s * n_qp_all / max(slsqp_n, 1)
    dv = max(
        (np.abs(v - (first['t'][i][:, j] - first['s'][i] @ stage.coef[i, j])).max()
         for i, j, v in slsqp_res),
        default=0.0,
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
        ('reference, recorded (ref.json cpu_s; cvxopt QPs + pymanopt CG)', f'{ref_total:8.1f}',
         f'{ref_total / med:.1f}x'),
        ('  centre step (ref.json cpu_fun_FA_s)', f'{ref_centre:8.2f}',
         f'{ref_centre / centre_med:.1f}x our centre step'),
        ('  manifold loop (ref.json cpu_manifold_loop_s)', f'{ref_loop:8.2f}',
         f'{ref_loop / stage_med:.1f}x our stage'),
    ]
    n_t = first['t'].shape[2]
    print(f'MFTMA benchmark: {stem} (P={p}, M={m}, N={n}, n_t={n_t}, kappa=0)')
    print(f'process CPU seconds, single-threaded BLAS (OPENBLAS_NUM_THREADS={threads})')
    print()
    width = max(len(r[0]) for r in rows) + 2
    print(f'{"":{width}}{"CPU s":>14}  ratio')
    for label, value, ratio in rows:
        print(f'{label:{width}}{value:>14}  {ratio}')
    print()
    speedup = ref_total / med
    worst = ref_total / totals.max()
    verdict = ''
    if stem == PAPER_STEM:
        met = 'MET' if speedup >= TARGET_SPEEDUP else 'NOT MET'
        verdict = f' (target >= {TARGET_SPEEDUP:.0f}x: {met})'
    print(f'speed-up vs reference: {speedup:.1f}x median, {worst:.1f}x slowest seed{verdict}')
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
    if args.json is not None:
        num_ref = reference['by_n_t']['200']['summary_over_seeds']['cpu_s'].get('n', '?')
        timings = [
            ('ours', med, f'median of {args.seeds} seeds'),
            ('ours: centre step', centre_med, 'section 2, median over seeds'),
            ('ours: frames', frames_med, 'section 3 and the t draws, median over seeds'),
            ('ours: anchor stage', stage_med, f'section 4, {n_qp_all} QPs, median over seeds'),
            ('SLSQP per QP', slsqp_all,
             f'anchor stage only; extrapolated from {slsqp_n} QPs on {len(sub)}/{p} manifolds'),
            ('nnls per QP', nnls_s, f'anchor stage only; all {nnls_n} QPs'),
            ('reference', ref_total, f'recorded, mean of {num_ref} seeds'),
            ('reference: centre step', ref_centre, 'recorded cpu_fun_FA_s'),
            ('reference: manifold loop', ref_loop, 'recorded cpu_manifold_loop_s'),
        ]
        config.write_atomic(args.json, json.dumps(json_rows(stem, timings, med), indent=1) + '\n')
        print(f'wrote {args.json}')


if __name__ == '__main__':
    main()
