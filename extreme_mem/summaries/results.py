"""`results.json`: the run record every reader (reports, colabs, sweeps) uses.

Layout (DESIGN.md section 3): `{"experiment", "config", "config_hash", "status",
"final": {tag: value}, "history": [{"step": s, tag: value, ...}]}`. `config_hash` identifies the
run's effective bindings (absent when the caller computed none). Always written atomically
(temp file + rename). `read` raises `ResultsError` naming the file when it is not a results
record; `read_or_none` logs that and returns None, for callers that must survive one bad run.
"""

import json
import math
import os
import pathlib
from typing import Optional

from absl import logging

from extreme_mem import config

FILENAME = 'results.json'


class ResultsError(ValueError):
    """A `results.json` exists but is not a valid run record."""


def _clean(value):
    """JSON has no NaN/Inf: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunRecord:
    """In-memory `results.json` of one run; `save()` writes it atomically.

    Args:
      run_dir: the run directory.
      experiment: registered experiment name.
      run_config: the run's bindings `{binding: value}`.
      config_hash: a hash of the effective bindings, written as `config_hash` (omitted when None).
    """

    def __init__(self, run_dir: os.PathLike, experiment: str, run_config: Optional[dict] = None,
                 config_hash: Optional[str] = None):
        self.path = pathlib.Path(run_dir) / FILENAME
        # An earlier attempt's history is kept as is (a save before training erases nothing) until
        # `resume` cuts it at the step training restarts from.
        previous = read_or_none(run_dir)
        self._previous_history = list(previous.get('history', [])) if previous else []
        self.data = {'experiment': experiment, 'config': run_config or {}}
        if config_hash is not None:
            self.data['config_hash'] = str(config_hash)
        self.data.update(status='running', final={}, history=[dict(h) for h in self._previous_history])

    def resume(self, step: int) -> None:
        """Keeps the earlier attempt's history up to `step` (the restored checkpoint; 0 when the
        run starts over), dropping what training will redo."""
        self.data['history'] = [dict(h) for h in self._previous_history if h['step'] <= step]

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
    """The run's results, or None if it has none yet.

    Raises:
      ResultsError: the file is unreadable, not JSON, not an object, or its `history` is not a
        list of `{"step": int, ...}` entries; the message names the path.
    """
    path = pathlib.Path(run_dir) / FILENAME
    if not path.exists():
        return None
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsError(f'{path} is not a readable results record: {e}.') from e
    if not isinstance(data, dict):
        raise ResultsError(f'{path} is not a results record: expected a JSON object, got {type(data).__name__}.')
    history = data.get('history', [])
    if not isinstance(history, list) or not all(isinstance(h, dict) and isinstance(h.get('step'), int)
                                                 for h in history):
        raise ResultsError(f'{path} is not a results record: "history" must be a list of {{"step": int, ...}}.')
    if not isinstance(data.get('final', {}), dict):
        raise ResultsError(f'{path} is not a results record: "final" must be an object.')
    return data


def read_or_none(run_dir: os.PathLike) -> Optional[dict]:
    """Like `read`, but an invalid record is logged as a warning and read as None."""
    try:
        return read(run_dir)
    except ResultsError as e:
        logging.warning('Ignoring %s', e)
        return None


def series(record: dict, tag: str) -> tuple[list, list]:
    """`(steps, values)` of `tag` over a run's history (entries without the tag are skipped)."""
    steps, values = [], []
    for h in record.get('history', []):
        if tag in h and h[tag] is not None:
            steps.append(h['step'])
            values.append(h[tag])
    return steps, values
