"""Fake `StepOutputs` for metric-plugin tests (shared by tests/metrics/*_test.py)."""

import numpy as np
import tensorflow as tf

from extreme_mem.pergrad import stats
from extreme_mem.train import outputs


def grad_stats_from(per_layer_vectors: dict, labels, num_classes: int, compute_gram: bool = True) -> dict:
    """Variable path -> GradStats of literal per-example gradients [n, d]."""
    return {
        path: stats.from_vectors(tf.constant(v, tf.float32), labels, num_classes, compute_gram)
        for path, v in per_layer_vectors.items()
    }


def step_outputs(labels, num_classes: int = 3, **fields) -> outputs.StepOutputs:
    """A StepOutputs for a batch with `labels`; other fields default to None (or zeros)."""
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
