"""Writer plugins: where `{tag: value}` results go (TensorBoard, console).

A writer has `write(results, step)`, `flush()`, `close()` (Dopamine collector shape).
TensorBoard events go to `<workdir>/tensorboard/<split>/`, the split being the tag's first part
(`train/accuracy` -> `train/` directory, scalar `accuracy`). `results.json` is kept by
`summaries/results.py`, not by a writer, since every run must have it.

A metric plugin may ask for histograms (of weights or activations) by returning an optional
`HISTOGRAMS` entry `{tag: array}` among its results: the TensorBoard writer writes each as a
histogram in the tag's split directory, the other writers ignore it. Keep these few and small;
`scalars` drops the entry for writers of numbers (and results.json).
"""

import collections
import os

import gin
import tensorflow as tf
from absl import logging

from extreme_mem import registry
from extreme_mem.summaries import tensorboard as tensorboard_lib

HISTOGRAMS = 'histograms'  # optional results entry: {tag: array} drawn as TensorBoard histograms


def scalars(results: dict) -> dict:
    """`results` without its optional `HISTOGRAMS` entry."""
    return {k: v for k, v in results.items() if k != HISTOGRAMS}


@registry.WRITERS.register('tensorboard')
@gin.configurable(module='summaries', denylist=['workdir'])
class TensorBoardWriter:
    """Scalars per split directory: tag `split/quantity[/layer]` -> scalar `quantity[/layer]`."""

    name = 'tensorboard'

    def __init__(self, workdir: str):
        self._root = os.path.join(workdir, 'tensorboard')
        self._writers: dict = {}

    def _writer(self, split: str):
        if split not in self._writers:
            self._writers[split] = tf.summary.create_file_writer(os.path.join(self._root, split))
        return self._writers[split]

    def write(self, results: dict, step: int) -> None:
        by_split = collections.defaultdict(dict)
        for tag, value in scalars(results).items():
            split, _, name = tag.partition('/')
            by_split[split][name or split] = value
        for split, values in by_split.items():
            with self._writer(split).as_default(step=int(step)):
                for name, value in values.items():
                    tf.summary.scalar(name, float(value))
        hists = collections.defaultdict(dict)
        for tag, values in (results.get(HISTOGRAMS) or {}).items():
            split, _, name = tag.partition('/')
            hists[split][name or split] = values
        for split, values in hists.items():
            tensorboard_lib.write_histograms(self._writer(split), values, step)

    def flush(self) -> None:
        for w in self._writers.values():
            w.flush()

    def close(self) -> None:
        for w in self._writers.values():
            w.close()


@registry.WRITERS.register('console')
@gin.configurable(module='summaries', denylist=['workdir'])
class ConsoleWriter:
    """Logs metric results (evaluation lines are logged by the trainer itself)."""

    name = 'console'

    def __init__(self, workdir: str):
        del workdir

    def write(self, results: dict, step: int) -> None:
        extra = {k: v for k, v in scalars(results).items() if not k.endswith(('/loss', '/accuracy'))}
        if extra:
            logging.info('step %d: %s', step, '  '.join(f'{k} {v:.4g}' for k, v in sorted(extra.items())))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Writers:
    """Dispatches results to every configured writer."""

    def __init__(self, names, workdir: str):
        self._writers = [registry.WRITERS.get(n)(workdir=workdir) for n in names]

    def write(self, results: dict, step: int) -> None:
        for w in self._writers:
            w.write(results, step)

    def flush(self) -> None:
        for w in self._writers:
            w.flush()

    def close(self) -> None:
        for w in self._writers:
            w.close()
