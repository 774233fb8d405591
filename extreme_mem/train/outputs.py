"""`StepOutputs`: the only object the trainer hands outward to metric plugins."""

from typing import Any, NamedTuple, Optional

import tensorflow as tf


class StepOutputs(NamedTuple):
    """What one training (or diagnostic) step produced, for the global batch.

    A NamedTuple so it passes through `tf.function`. Fields a step did not compute are None.
    """

    step: tf.Tensor  # [] optimizer steps taken *before* this update
    index: tf.Tensor  # [batch] example ids, for per-example bookkeeping
    labels: tf.Tensor  # [batch] training labels (after any label transform)
    logits: tf.Tensor  # [batch, num_classes]
    per_example_loss: tf.Tensor  # [batch]
    # Diagnostic steps only (pergrad/): variable path -> pergrad GradStats.
    grad_stats: Optional[dict] = None
    # Diagnostic steps only: GradStats of d loss_i / d logits.
    logit_stats: Optional[Any] = None
    # Diagnostic steps only: probe name -> [batch, ...] representation.
    representations: Optional[dict] = None
    # Diagnostic steps only: variable path -> gradient of the mean loss (same shape as variable).
    grads: Optional[dict] = None
    # Diagnostic steps only: variable path -> variable value *before* the update.
    weights: Optional[dict] = None
