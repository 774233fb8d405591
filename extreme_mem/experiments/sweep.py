"""Sweeps: expand axes into runs, run several at once, skip finished runs, aggregate.

A sweep only generates gin bindings (`--gin_param` lists); each run is a separate process of
`launch/train.py` in `<workdir>/runs/<run_name>/`, so runs never share gin or TF state and a
killed sweep resumes by rerunning: finished runs (`status: done`) are skipped, others resume
from their checkpoints. Axes are a grid, or random samples (log-uniform / uniform / choice, as
in the random-labels paper, appendix B).
"""

import dataclasses
import itertools
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time
from concurrent import futures
from typing import Optional, Sequence

import numpy as np
from absl import logging

from extreme_mem import config
from extreme_mem.summaries import report
from extreme_mem.summaries import results as results_lib

TRAIN_SCRIPT = config.REPO_ROOT / 'launch' / 'train.py'


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its directory name, axis values and gin bindings."""

    name: str
    values: dict
    bindings: tuple


def _binding(key: str, value) -> str:
    return f'{key} = {value!r}'


def _run_name(values: dict) -> str:
    parts = [f'{k.split(".")[-1]}={v:g}' if isinstance(v, float) else f'{k.split(".")[-1]}={v}'
             for k, v in values.items()]
    return re.sub(r'[^A-Za-z0-9_.=,+-]', '_', ','.join(parts)) or 'run'


def make_spec(values: dict) -> RunSpec:
    return RunSpec(_run_name(values), dict(values), tuple(_binding(k, v) for k, v in values.items()))


def grid(axes: dict) -> list:
    """Every combination of `axes` (`{binding_key: [values]}`), in order."""
    keys = list(axes)
    return [make_spec(dict(zip(keys, combo))) for combo in itertools.product(*(axes[k] for k in keys))]


def parse_axis(text: str):
    """`'KEY=v1,v2'` -> `('KEY', [v1, v2])` with Python literals (numbers, strings, bools)."""
    if '=' not in text:
        raise ValueError(f'Sweep axis {text!r} must look like KEY=v1,v2,...')
    key, _, values = text.partition('=')
    import ast  # pylint: disable=g-import-not-at-top

    parsed = []
    for v in values.split(','):
        v = v.strip()
        try:
            parsed.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            parsed.append(v)
    return key.strip(), parsed


DISTRIBUTIONS = ('loguniform', 'uniform', 'choice')


def random_search(space: dict, num_samples: int, seed: int = 0) -> list:
    """`num_samples` random points of `space`.

    Args:
      space: `{binding_key: (kind, args)}`, kind in `DISTRIBUTIONS`: `('loguniform', (lo, hi))`,
        `('uniform', (lo, hi))`, `('choice', [values])`.
      num_samples: number of runs.
      seed: sampling seed.
    """
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(num_samples):
        values = {}
        for key, (kind, args) in space.items():
            if kind == 'loguniform':
                lo, hi = args
                values[key] = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            elif kind == 'uniform':
                values[key] = float(rng.uniform(*args))
            elif kind == 'choice':
                values[key] = args[int(rng.integers(len(args)))]
            else:
                raise ValueError(f'Unknown distribution {kind!r} for {key}; valid: {list(DISTRIBUTIONS)}.')
        spec = make_spec(values)
        specs.append(dataclasses.replace(spec, name=f'{i:03d}_{spec.name}'))
    return specs


def run_dir(workdir: os.PathLike, spec: RunSpec) -> pathlib.Path:
    return pathlib.Path(workdir) / 'runs' / spec.name


def _run_one(spec: RunSpec, workdir, experiment, gin_files, gin_params, seed, timeout) -> dict:
    directory = run_dir(workdir, spec)
    record = results_lib.read(directory)
    if record and record.get('status') == 'done':
        logging.info('skip %s (done)', spec.name)
        return record
    directory.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(TRAIN_SCRIPT), f'--experiment={experiment}', f'--workdir={directory}',
           f'--seed={seed}']
    cmd += [f'--gin_file={f}' for f in gin_files]
    cmd += [f'--gin_param={p}' for p in list(gin_params) + list(spec.bindings)]
    logging.info('start %s', spec.name)
    start = time.time()
    try:
        with open(directory / 'log.txt', 'a') as log:
            returncode = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                        check=False).returncode
    except subprocess.TimeoutExpired:
        returncode = f'timed out after {timeout} s'  # the run resumes from its checkpoint next time
    record = results_lib.read(directory) or {'status': 'failed', 'final': {}, 'history': []}
    if returncode != 0:
        logging.error('%s failed (%s); see %s', spec.name, returncode, directory / 'log.txt')
        record['status'] = 'failed'
    logging.info('end %s: %s in %.0f s', spec.name, record.get('status'), time.time() - start)
    return record


def run_sweep(
    specs: Sequence[RunSpec],
    workdir: str,
    experiment: str = 'single_run',
    gin_files: Sequence[str] = (),
    gin_params: Sequence[str] = (),
    seed: int = 0,
    parallel: int = 2,
    timeout: Optional[float] = None,
) -> list:
    """Runs every spec (skipping finished ones), `parallel` at once; returns `[(spec, record)]`."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f'Sweep run names collide: {names}')
    os.makedirs(workdir, exist_ok=True)
    gin_files = [str(config._resolve(f)) for f in gin_files]  # pylint: disable=protected-access
    with futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        jobs = [pool.submit(_run_one, s, workdir, experiment, gin_files, gin_params, seed, timeout) for s in specs]
        return [(s, j.result()) for s, j in zip(specs, jobs)]


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
