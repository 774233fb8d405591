"""Restoring a run's newest *readable* checkpoint.

A killed process can leave the newest checkpoint truncated, and a user can delete checkpoint
files while the `checkpoint` index still names them. `restore_newest` tries every checkpoint in
`checkpoints/` (from the index and from the `ckpt-<step>.index` files present), newest first;
unreadable ones are logged and moved to `checkpoints/unreadable/` (kept, not deleted) once a
readable one is found, and the index is rewritten to list the readable ones. If none can be
read it raises `CheckpointError`, or, when asked to, starts over from the initial weights.
"""

import os
import pathlib
import re
import shutil
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

UNREADABLE_DIR = 'unreadable'
_PREFIX = re.compile(r'^(.*-(\d+))\.index$')


class CheckpointError(RuntimeError):
    """A run directory has checkpoints but none of them can be read."""


def step_of(prefix: str) -> int:
    """The step number in a checkpoint prefix `.../ckpt-<step>`."""
    return int(str(prefix).rsplit('-', 1)[-1])


def candidates(directory: os.PathLike) -> list[str]:
    """Checkpoint prefixes named by the index or present as `<prefix>.index`, newest first."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = set()
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except Exception as e:  # pylint: disable=broad-except  (a garbled index file is one more failure)
        logging.warning('Checkpoint index %s is unreadable (%s); scanning the directory instead.',
                        directory / 'checkpoint', e)
        state = None
    if state is not None:
        for p in list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path]:
            if p:
                p = p if os.path.isabs(p) else str(directory / p)
                if re.search(r'-\d+$', p):
                    found.add(p)
    for f in directory.iterdir():
        m = _PREFIX.match(f.name)
        if m:
            found.add(str(directory / m.group(1)))
    return sorted(found, key=step_of, reverse=True)


def restore_newest(
    checkpoint: tf.train.Checkpoint,
    directory: os.PathLike,
    variables: Sequence[tf.Variable],
    start_over: bool = False,
) -> Optional[str]:
    """Restores the newest readable checkpoint in `directory` into `checkpoint`.

    Args:
      checkpoint: the run's checkpoint object.
      directory: the run's `checkpoints/` directory.
      variables: every variable `checkpoint` holds; their values are put back when a failed
        restore leaves them half-written and the run starts over.
      start_over: when no checkpoint is readable, move them all aside and return None instead
        of raising.

    Returns:
      The restored prefix, or None when there is nothing to restore (or the run starts over).

    Raises:
      CheckpointError: checkpoints exist, none is readable, and `start_over` is False.
    """
    found = candidates(directory)
    if not found:
        return None
    initial = [v.numpy() for v in variables]
    failures = []
    for prefix in found:
        try:
            if not tf.io.gfile.exists(prefix + '.index'):
                raise FileNotFoundError(f'{prefix}.index does not exist')
            checkpoint.restore(prefix).assert_existing_objects_matched()
        except Exception as e:  # pylint: disable=broad-except  (any failure makes it unreadable)
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            logging.warning('Checkpoint %s is unreadable (%s: %s); trying an older one.', prefix,
                            type(e).__name__, reason)
            failures.append((prefix, f'{type(e).__name__}: {reason}'))
            continue
        if failures:
            logging.warning('Resuming from %s (step %d), the newest readable checkpoint; unreadable: %s.',
                            prefix, step_of(prefix), [p for p, _ in failures])
            _set_aside([p for p, _ in failures], directory)
            _rewrite_index(directory, [p for p in found if p not in dict(failures)])
        return prefix
    for v, value in zip(variables, initial):
        v.assign(value)
    listing = '; '.join(f'{os.path.basename(p)}: {why}' for p, why in failures)
    if not start_over:
        raise CheckpointError(
            f'No checkpoint in {directory} can be read ({listing}). To start the run over from step 0, '
            'rerun with the force flag (train.Trainer.start_over_if_unreadable = True); or use a new workdir.')
    logging.warning('No checkpoint in %s can be read (%s); starting over from step 0 as asked.', directory, listing)
    _set_aside([p for p, _ in failures], directory)
    _rewrite_index(directory, [])
    return None


def _set_aside(prefixes: Sequence[str], directory: os.PathLike) -> None:
    """Moves the files of `prefixes` to `directory/unreadable/` (evidence is kept, never deleted)."""
    target = pathlib.Path(directory) / UNREADABLE_DIR
    for prefix in prefixes:
        for f in tf.io.gfile.glob(prefix + '.*'):
            target.mkdir(exist_ok=True)
            shutil.move(f, str(target / os.path.basename(f)))
            logging.warning('Moved unreadable checkpoint file %s to %s.', f, target)


def _rewrite_index(directory: os.PathLike, prefixes: Sequence[str]) -> None:
    """Makes the `checkpoint` index list exactly `prefixes` (newest last), or removes it."""
    index = pathlib.Path(directory) / 'checkpoint'
    keep = sorted(prefixes, key=step_of)
    if not keep:
        if index.exists():
            index.unlink()
        return
    tf.compat.v1.train.update_checkpoint_state(
        str(directory), keep[-1], all_model_checkpoint_paths=keep,
        all_model_checkpoint_timestamps=[float(np.float64(os.path.getmtime(p + '.index'))) for p in keep])
