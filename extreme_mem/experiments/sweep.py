"""Sweeps: expand axes into run specs, run them (several at once), aggregate their finals.

A sweep only generates gin bindings: each run is `launch/train.py --experiment=single_run` in
`<workdir>/runs/<run_name>/`, started with the gin files and `--gin_param`s the sweep itself
was launched with (`config.parsed_files_and_bindings`) plus the run's own bindings. Runs
therefore never share gin or TF state, and a rerun of the sweep reruns every run's process:
each one checks its recorded configuration and skips (done), resumes (from its checkpoints)
or refuses (another configuration; `--overwrite` starts it over). Children die with the
sweep: they get SIGTERM when the sweep process dies, even by SIGKILL.

Axes: a grid (`{key: [values]}`; a key `'A, B'` with tuple values is a *zipped* axis), named
variants crossed with the grid, random samples (log-uniform / uniform / choice, as in the
random-labels paper, appendix B), and seeds.
"""

import ast
import ctypes
import dataclasses
import itertools
import json
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from typing import Mapping, Optional, Sequence

import numpy as np
from absl import logging

from extreme_mem import config
from extreme_mem.summaries import report
from extreme_mem.summaries import results as results_lib
from extreme_mem.summaries import tensorboard as tensorboard_lib

TRAIN_SCRIPT = config.REPO_ROOT / 'launch' / 'train.py'
DISTRIBUTIONS = ('loguniform', 'uniform', 'choice')
STATUSES = ('done', 'failed', 'diverged', 'running', 'missing')


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a sweep.

    Attributes:
      name: directory name under `<workdir>/runs/`.
      values: axis values (and `variant`, `seed` when the sweep has them), for tables.
      bindings: gin binding strings applied after the sweep's own config.
      seed: the run's seed (None: the sweep's seed).
    """

    name: str
    values: dict
    bindings: tuple
    seed: Optional[int] = None


def _format(value) -> str:
    return f'{value:g}' if isinstance(value, float) else str(value)


def safe_name(text: str) -> str:
    return re.sub(r'[^A-Za-z0-9_.=,+-]', '_', text) or 'run'


def _run_name(values: dict) -> str:
    return safe_name(','.join(f'{k.split(".")[-1]}={_format(v)}' for k, v in values.items()))


def expand_axes(axes: Optional[Mapping[str, Sequence]]) -> list:
    """Grid points of `axes` as `{binding_key: value}` dicts, in order.

    Args:
      axes: binding key -> values. A key made of comma-separated binding keys is a zipped axis
        whose values are tuples, one entry per key, e.g.
        `{'INIT_SCALE, losses.hinge.margin': [(0.001, 1.0), (0.01, 10.0)]}`. None or {} is a
        single point without bindings.

    Raises:
      ValueError: an axis without values, or a zipped value of the wrong length.
    """
    choices = []
    for key, values in (axes or {}).items():
        keys = [k.strip() for k in key.split(',') if k.strip()]
        values = list(values)
        if not keys or not values:
            raise ValueError(f'Sweep axis {key!r} needs a binding key and at least one value, got {values!r}.')
        points = []
        for v in values:
            if len(keys) == 1:
                points.append({keys[0]: v})
            elif not isinstance(v, (tuple, list)) or len(v) != len(keys):
                raise ValueError(f'Zipped sweep axis {key!r} needs {len(keys)}-tuples, got {v!r}.')
            else:
                points.append(dict(zip(keys, v)))
        choices.append(points)
    return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*choices)]


def make_specs(
    axes: Optional[Mapping[str, Sequence]] = None,
    variants: Optional[Mapping[str, Mapping]] = None,
    seeds: Optional[Sequence[int]] = None,
    points: Optional[Sequence[dict]] = None,
) -> list:
    """One `RunSpec` per (variant, grid point, seed).

    Args:
      axes: see `expand_axes`.
      variants: variant name -> `{binding_key: value}` applied before the axis values; None: one
        unnamed variant without bindings.
      seeds: every spec is crossed with these seeds (name suffix `seed=N`); None: the sweep's seed.
      points: explicit points (e.g. `random_points`) used instead of the grid of `axes`.

    Returns:
      RunSpecs named `<variant>,<axis>=<value>,...[,seed=N]`; `values` holds `variant` (if any),
      the axis values and `seed` (if any).
    """
    points = list(points) if points is not None else expand_axes(axes)
    named = bool(variants)
    specs = []
    for variant, variant_bindings in (variants or {'': {}}).items():
        for values in points:
            for seed in (seeds if seeds else [None]):
                parts = ([str(variant)] if named else []) + ([_run_name(values)] if values else [])
                parts += [f'seed={seed}'] if seed is not None else []
                bindings = {**dict(variant_bindings or {}), **values}
                specs.append(RunSpec(
                    name=safe_name(','.join(parts)),
                    values={**({'variant': variant} if named else {}), **values,
                            **({'seed': seed} if seed is not None else {})},
                    bindings=tuple(f'{k} = {v!r}' for k, v in bindings.items()),
                    seed=seed,
                ))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f'Sweep run names collide: {names}')
    return specs


def grid(axes: dict) -> list:
    """Every combination of `axes` (`{binding_key: [values]}`), in order."""
    return make_specs(axes)


def parse_axis(text: str):
    """`'KEY=v1,v2'` -> `('KEY', [v1, v2])` with Python literals (numbers, strings, bools)."""
    if '=' not in text:
        raise ValueError(f'Sweep axis {text!r} must look like KEY=v1,v2,...')
    key, _, values = text.partition('=')
    parsed = []
    for v in values.split(','):
        v = v.strip()
        try:
            parsed.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            parsed.append(v)
    return key.strip(), parsed


def random_points(space: Mapping, num_samples: int, seed: int = 0) -> list:
    """`num_samples` random points `{binding_key: value}` of `space`.

    Args:
      space: `{binding_key: (kind, args)}`, kind in `DISTRIBUTIONS`: `('loguniform', (lo, hi))`,
        `('uniform', (lo, hi))`, `('choice', [values])`.
      num_samples: number of points.
      seed: sampling seed.
    """
    for key, (kind, _) in space.items():
        if kind not in DISTRIBUTIONS:
            raise ValueError(f'Unknown distribution {kind!r} for {key}; valid: {list(DISTRIBUTIONS)}.')
    rng = np.random.default_rng(seed)
    points = []
    for _ in range(num_samples):
        values = {}
        for key, (kind, args) in space.items():
            if kind == 'loguniform':
                lo, hi = args
                values[key] = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            elif kind == 'uniform':
                values[key] = float(rng.uniform(*args))
            else:
                values[key] = args[int(rng.integers(len(args)))]
        points.append(values)
    return points


def random_search(space: Mapping, num_samples: int, seed: int = 0, variants=None, seeds=None) -> list:
    """Specs of `random_points(space, num_samples, seed)` (× variants × seeds), named `<i>_<values>`."""
    specs = []
    for i, point in enumerate(random_points(space, num_samples, seed)):
        specs += [dataclasses.replace(s, name=f'{i:03d}_{s.name}')
                  for s in make_specs(variants=variants, seeds=seeds, points=[point])]
    return specs


def run_dir(workdir: os.PathLike, spec: RunSpec) -> pathlib.Path:
    return pathlib.Path(workdir) / 'runs' / spec.name


def tensorboard_dir(workdir: os.PathLike) -> pathlib.Path:
    """`<workdir>/tensorboard`: one link per run (`<run name>` -> `../runs/<run name>/tensorboard`)
    and the report's figures (`report/`), for `tensorboard --logdir=<workdir>/tensorboard`."""
    return pathlib.Path(workdir) / 'tensorboard'


def link_tensorboard(workdir: os.PathLike, specs: Sequence[RunSpec]) -> None:
    """Links every spec's TensorBoard directory under `tensorboard_dir(workdir)` (short run names)."""
    for spec in specs:
        tensorboard_lib.link_run(tensorboard_dir(workdir), spec.name, run_dir(workdir, spec))


# ---- running ------------------------------------------------------------------------------------

_LIBC = None


def _die_with_parent() -> None:
    """In the child before exec: receive SIGTERM when the sweep process dies (Linux)."""
    global _LIBC
    try:
        _LIBC = _LIBC or ctypes.CDLL(None, use_errno=True)
        _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Children:
    """The sweep's live child processes, so a signal to the sweep reaches them too."""

    def __init__(self):
        self._procs, self._lock = set(), threading.Lock()

    def add(self, proc):
        with self._lock:
            self._procs.add(proc)

    def remove(self, proc):
        with self._lock:
            self._procs.discard(proc)

    def signal_all(self, signum):
        with self._lock:
            for proc in self._procs:
                try:
                    os.killpg(proc.pid, signum)
                except ProcessLookupError:
                    pass


_CHILDREN = _Children()


def _forward_signals():
    """Installs SIGTERM/SIGINT handlers that pass the signal to every child, then exit."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        del frame
        _CHILDREN.signal_all(signum)
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)


def read_record(directory: os.PathLike) -> Optional[dict]:
    """A run's results.json, or None (logged) when it is missing or not a valid record."""
    return results_lib.read_or_none(directory)


def _run_process(spec, workdir, gin_files, gin_params, seed, timeout, overwrite) -> dict:
    directory = run_dir(workdir, spec)
    directory.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(TRAIN_SCRIPT), '--experiment=single_run', f'--workdir={directory}',
           f'--seed={spec.seed if spec.seed is not None else seed}']
    cmd += [f'--gin_file={f}' for f in gin_files]
    cmd += [f'--gin_param={p}' for p in list(gin_params) + list(spec.bindings)]
    cmd += ['--overwrite'] if overwrite else []
    start = time.time()
    with open(directory / 'log.txt', 'a') as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
                                start_new_session=True)
        _CHILDREN.add(proc)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            returncode = f'timed out after {timeout} s'  # the run resumes from its checkpoint next time
        finally:
            _CHILDREN.remove(proc)
    record = read_record(directory) or {'final': {}, 'history': []}
    if returncode != 0:
        tail = _last_line(directory / 'log.txt')
        logging.error('%s failed (%s): %s (log: %s)', spec.name, returncode, tail, directory / 'log.txt')
        record = {**record, 'status': 'failed', 'error': tail}
    record['seconds'] = time.time() - start
    return record


def _last_line(path: pathlib.Path) -> str:
    try:
        lines = [l for l in path.read_text(errors='replace').splitlines() if l.strip()]
    except OSError:
        return ''
    return lines[-1].strip() if lines else ''


def run_in_process(spec, workdir, gin_files, gin_params, seed, overwrite) -> dict:
    """Runs one spec as a `SingleRun` in this process (tests, debugging); leaves the run's gin config."""
    import gin  # pylint: disable=g-import-not-at-top
    import keras  # pylint: disable=g-import-not-at-top

    from extreme_mem import registry  # pylint: disable=g-import-not-at-top

    directory = run_dir(workdir, spec)
    start = time.time()
    gin.clear_config()
    config.parse_gin(gin_files, list(gin_params) + list(spec.bindings))
    try:
        record = registry.EXPERIMENTS.get('single_run')(
            workdir=str(directory), seed=spec.seed if spec.seed is not None else seed, overwrite=overwrite).run()
    except Exception as e:  # pylint: disable=broad-except  (a failed run must not stop the sweep)
        logging.exception('Run %s failed.', spec.name)
        record = {**(read_record(directory) or {'final': {}, 'history': []}), 'status': 'failed', 'error': str(e)}
    keras.backend.clear_session()
    return {**record, 'seconds': time.time() - start}


def run_sweep(
    specs: Sequence[RunSpec],
    workdir: str,
    gin_files: Sequence[str] = (),
    gin_params: Sequence[str] = (),
    seed: int = 0,
    parallel: int = 2,
    timeout: Optional[float] = None,
    overwrite: bool = False,
    in_process: bool = False,
) -> list:
    """Runs every spec, `parallel` at once; returns `[(spec, record)]` in spec order.

    Each run's own process decides whether it is done, resumes or is refused (module docstring).
    Progress lines give `k/N`, the run's status and time, and an overall ETA.

    Args:
      in_process: run the specs one after another in this process (tests and debugging: they
        then share TF state, and the caller's gin config is replaced).
    """
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f'Sweep run names collide: {names}')
    if parallel < 1:
        raise ValueError(f'parallel must be >= 1, got {parallel}.')
    os.makedirs(workdir, exist_ok=True)
    gin_files = [str(pathlib.Path(config._resolve(f)).resolve()) for f in gin_files]  # pylint: disable=protected-access
    link_tensorboard(workdir, specs)
    progress = _Progress(len(specs), 1 if in_process else parallel)
    if in_process:
        import gin  # pylint: disable=g-import-not-at-top

        results = []
        try:
            for spec in specs:
                progress.start()
                record = run_in_process(spec, workdir, gin_files, gin_params, seed, overwrite)
                progress.done(spec, record)
                results.append((spec, record))
        finally:  # the caller's config again (each run replaced it with its own)
            gin.clear_config()
            config.parse_gin(gin_files, gin_params, finalize=False)
        return results
    _forward_signals()

    def one(spec):
        progress.start()
        record = _run_process(spec, workdir, gin_files, gin_params, seed, timeout, overwrite)
        progress.done(spec, record)
        return record

    with futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        jobs = [pool.submit(one, s) for s in specs]
        return [(s, j.result()) for s, j in zip(specs, jobs)]


class _Progress:
    """'[k/N done, m running] name: status in 12 s; sweep ETA 0:03:10' lines as runs finish.

    The ETA is the mean time of the runs finished so far times the runs left, divided by the
    runs at once; runs that stop early (`stop_accuracy`) shorten it as they finish.
    """

    def __init__(self, total: int, parallel: int = 1):
        self._total, self._parallel = total, max(1, parallel)
        self._started = self._finished = 0
        self._run_seconds = 0.0
        self._lock = threading.Lock()

    def start(self):
        with self._lock:
            self._started += 1

    def done(self, spec, record):
        with self._lock:
            self._finished += 1
            seconds = float((record or {}).get('seconds', 0.0))
            self._run_seconds += seconds
            left = self._total - self._finished
            eta = self._run_seconds / self._finished * left / min(self._parallel, max(left, 1))
            logging.info('[%d/%d done, %d running] %s: %s in %.0f s; sweep ETA %s', self._finished, self._total,
                         self._started - self._finished, spec.name, (record or {}).get('status', 'missing'),
                         seconds, time.strftime('%H:%M:%S', time.gmtime(eta)))


def status_counts(results: Sequence) -> dict:
    """`{status: count}` over `[(spec, record)]`, every status in `STATUSES` present."""
    counts = {s: 0 for s in STATUSES}
    for _, record in results:
        status = (record or {}).get('status', 'missing')
        counts[status if status in counts else 'failed'] += 1
    return counts


def status_line(results: Sequence) -> str:
    """'k done, m failed, d diverged' (plus running/missing when any)."""
    counts = status_counts(results)
    parts = [f'{counts[s]} {s}' for s in ('done', 'failed', 'diverged')]
    parts += [f'{counts[s]} {s}' for s in ('running', 'missing') if counts[s]]
    return ', '.join(parts)


def all_ok(results: Sequence) -> bool:
    """True when every run finished (`done`; a `diverged` run also finished, and is reported)."""
    counts = status_counts(results)
    return counts['failed'] == counts['running'] == counts['missing'] == 0


DEFAULT_COLUMNS = ('train/accuracy', 'test/accuracy', 'train/loss', 'test/loss')


def aggregate(results: Sequence, workdir: str, columns: Sequence[str] = DEFAULT_COLUMNS) -> str:
    """Writes `sweep.json` and `sweep.md` (one row per run) under `workdir`; returns the table."""
    rows = []
    for spec, record in results:
        final = record.get('final', {}) if record else {}
        rows.append({'run': spec.name, **spec.values, 'status': (record or {}).get('status', 'missing'),
                     'steps': (record or {}).get('final_step'), **{c: final.get(c) for c in columns}})
    config.write_atomic(pathlib.Path(workdir) / 'sweep.json', json.dumps(rows, indent=1))
    table = report.markdown_table(rows)
    config.write_atomic(pathlib.Path(workdir) / 'sweep.md', table + '\n')
    return table
