"""Shared fixtures of the geometry tests: the MFTMA reference fixtures in /work/shared.

The fixtures sit beside the repository root (/work/shared next to /work/main); tests that need
them are skipped with a clear message when the directory is missing.
"""

import json
from pathlib import Path

import numpy as np
import pytest

FIXTURE_DIR = Path(__file__).resolve().parents[2].parent / 'shared' / 'fixtures' / 'mftma'


def _require_dir() -> Path:
    if not FIXTURE_DIR.is_dir():
        pytest.skip(f'MFTMA reference fixtures not found at {FIXTURE_DIR}')
    return FIXTURE_DIR


@pytest.fixture(scope='session')
def mftma_dir() -> Path:
    """Directory of the reference fixtures (skips the test when missing)."""
    return _require_dir()


@pytest.fixture(scope='session')
def load_points():
    """stem -> X (P, M, N) float64."""

    def load(stem: str) -> np.ndarray:
        return np.load(_require_dir() / 'data' / f'{stem}.npz')['X']

    return load


@pytest.fixture(scope='session')
def load_reference():
    """stem -> parsed <stem>.ref.json."""

    def load(stem: str) -> dict:
        with open(_require_dir() / 'data' / f'{stem}.ref.json') as f:
            return json.load(f)

    return load


@pytest.fixture(scope='session')
def load_stages():
    """stem -> dict of the seed-0, n_t = 200 stage arrays, with 's'/'t' lists per manifold."""

    def load(stem: str) -> dict:
        path = _require_dir() / 'data' / 'stages' / f'{stem}.seed0.nt200.stages.npz'
        raw = np.load(path)
        out = {k: raw[k] for k in raw.files if not k.startswith(('sD1_', 't_'))}
        p = len(out['alpha_M_vec'])
        out['s'] = [raw[f'sD1_{i}'] for i in range(p)]
        out['t'] = [raw[f't_{i}'] for i in range(p)]
        return out

    return load
