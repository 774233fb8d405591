"""`results.json`: the run record every reader (reports, colabs, sweeps) uses.

Layout (DESIGN.md section 3): `{"experiment", "config", "status", "final": {tag: value},
"history": [{"step": s, tag: value, ...}]}`. Always written atomically (temp file + rename).
"""

import json
import math
import os
import pathlib
from typing import Optional

from extreme_mem import config

FILENAME = 'results.json'


def _clean(value):
    """JSON has no NaN/Inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunRecord:
    """In-memory `results.json` of one run; `save()` writes it atomically."""

    def __init__(self, run_dir: os.PathLike, experiment: str, run_config: Optional[dict] = None):
        self.path = pathlib.Path(run_dir) / FILENAME
        self.data = {'experiment': experiment, 'config': run_config or {}, 'status': 'running',
                     'final': {}, 'history': []}

    def resume(self, step: int) -> None:
        """Keeps the history of an earlier attempt up to `step` (the restored checkpoint)."""
        previous = read(self.path.parent)
        if previous:
            self.data['history'] = [h for h in previous.get('history', []) if h['step'] <= step]

    def add(self, step: int, values: dict) -> None:
        """Merges `values` into the history entry of `step`."""
        values = {k: _clean(float(v)) for k, v in values.items()}
        history = self.data['history']
        if history and history[-1]['step'] == step:
            history[-1].update(values)
        else:
            history.append({'step': int(step), **values})

    def finish(self, status: str, final: dict) -> None:
        """Sets the status and `final`: the last logged value of every tag, then `final` over it."""
        last = {}
        for h in self.data['history']:
            last.update({k: v for k, v in h.items() if k != 'step' and v is not None})
        self.data['status'] = status
        self.data['final'] = {**last, **{k: _clean(float(v)) for k, v in final.items()}}
        self.save()

    def save(self) -> None:
        config.write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=False))


def read(run_dir: os.PathLike) -> Optional[dict]:
    """The run's results, or None if it has none yet."""
    path = pathlib.Path(run_dir) / FILENAME
    if not path.exists():
        return None
    with open(path) as f:
        return json.load(f)


def series(record: dict, tag: str) -> tuple[list, list]:
    """`(steps, values)` of `tag` over a run's history (entries without the tag are skipped)."""
    steps, values = [], []
    for h in record.get('history', []):
        if tag in h and h[tag] is not None:
            steps.append(h['step'])
            values.append(h[tag])
    return steps, values
