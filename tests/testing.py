"""Shared fakes for tests: tiny synthetic datasets, fake step outputs, and a clean gin state.

- `blobs`: a linearly separable Gaussian-blob `Data` for training tests.
- `step_outputs`, `grad_stats_from`, `identical`: literal `StepOutputs` and per-example gradient
  statistics for metric-plugin tests (tests/metrics/).
- `GinCleanMixin`: clears gin's global state around each test.
"""

import gin
import numpy as np
import tensorflow as tf

from extreme_mem.data import base
from extreme_mem.pergrad import stats
from extreme_mem.train import outputs

SHARED = __import__('pathlib').Path(__file__).resolve().parents[1].parent / 'shared'


def blobs(num_train: int = 64, num_test: int = 32, num_classes: int = 3, dim: int = 5, seed: int = 0,
          separation: float = 3.0) -> base.Data:
    """Gaussian blobs, one per class: linearly separable for large `separation`."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(num_classes, dim)) * separation

    def split(n, offset):
        labels = (np.arange(n) % num_classes).astype(np.int32)
        images = (centers[labels] + rng.normal(size=(n, dim))).astype(np.float32)
        return base.Split(images, labels, labels.copy(), np.arange(n, dtype=np.int64))

    return base.Data(split(num_train, 0), split(num_test, 1), base.DatasetInfo('blobs', num_classes, (dim,)))


def grad_stats_from(per_layer_vectors: dict, labels, num_classes: int, compute_gram: bool = True) -> dict:
    """Variable path -> `GradStats` of literal per-example gradients [n, d]."""
    return {
        path: stats.from_vectors(tf.constant(v, tf.float32), labels, num_classes, compute_gram)
        for path, v in per_layer_vectors.items()
    }


def step_outputs(labels, num_classes: int = 3, **fields) -> outputs.StepOutputs:
    """A `StepOutputs` for a batch with `labels`; other fields default to None (logits, loss: zeros)."""
    labels = np.asarray(labels)
    n = len(labels)
    return outputs.StepOutputs(
        step=tf.constant(0, tf.int64),
        index=tf.range(n),
        labels=tf.constant(labels),
        logits=fields.pop('logits', tf.zeros([n, num_classes])),
        per_example_loss=tf.zeros([n]),
        **fields,
    )


def identical(n: int, vector) -> np.ndarray:
    """[n, d] copies of `vector`."""
    return np.tile(np.asarray(vector, np.float32)[np.newaxis], (n, 1))


class GinCleanMixin:
    """Clears gin before and after each test (gin is global state)."""

    def setUp(self):
        super().setUp()
        gin.clear_config(clear_constants=True)
        gin.enter_interactive_mode()

    def tearDown(self):
        gin.clear_config(clear_constants=True)
        gin.exit_interactive_mode()
        super().tearDown()


def set_notebook_parameters(nb, **params) -> None:
    """Replaces the source of the notebook cell tagged `parameters` (as papermill does)."""
    cells = [c for c in nb.cells if 'parameters' in c.get('metadata', {}).get('tags', [])]
    if len(cells) != 1:
        raise ValueError(f'Expected one cell tagged "parameters", found {len(cells)}.')
    cells[0].source = '\n'.join(f'{k} = {v!r}' for k, v in params.items())


def run_notebook(path: str, timeout: int = 180, **params) -> list:
    """Executes the notebook at `path` headless (its folder as working directory) with its
    `parameters` cell replaced by `params`; returns every code cell's outputs, in order."""
    import os  # pylint: disable=g-import-not-at-top

    import nbformat  # pylint: disable=g-import-not-at-top
    from nbclient import NotebookClient  # pylint: disable=g-import-not-at-top

    nb = nbformat.read(path, as_version=4)
    set_notebook_parameters(nb, **params)
    NotebookClient(nb, timeout=timeout, kernel_name='python3',
                   resources={'metadata': {'path': os.path.dirname(os.path.abspath(path))}}).execute()
    return [o for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', [])]
