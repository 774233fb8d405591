"""What the trainer hands outward: `StepOutputs`, and the `Need` names a step may be asked for."""

from typing import Any, NamedTuple, Optional

import tensorflow as tf


class Need:
    """What an observed step may be asked to compute (a plugin's `needs` is a set of these).

    The trainer runs its cheap multi-step program on steps with no needs, and a compiled
    observed step (one per distinct set of needs) on the others.
    """

    OUTPUTS = 'outputs'  # logits, labels, per-example loss of the batch (every observed step has them)
    REPRESENTATIONS = 'representations'  # probe-layer activations of the batch
    GRAD_STATS = 'grad_stats'  # per-example gradient statistics (pergrad/), without the Gram matrix
    GRAM = 'gram'  # also the n×n per-example gradient Gram matrix (implies GRAD_STATS)
    WEIGHTS = 'weights'  # variable values before the update, and the mean gradients

    ALL = frozenset({OUTPUTS, REPRESENTATIONS, GRAD_STATS, GRAM, WEIGHTS})


def check_needs(needs, owner: str = 'needs') -> frozenset:
    """`needs` as a frozenset, with GRAM implying GRAD_STATS.

    Raises:
      ValueError: an entry is not one of `Need.ALL`.
    """
    needs = frozenset(needs)
    unknown = needs - Need.ALL
    if unknown:
        raise ValueError(f'{owner} has unknown entries {sorted(unknown)}; valid: {sorted(Need.ALL)}.')
    if Need.GRAM in needs:
        needs |= {Need.GRAD_STATS}
    return needs


class StepOutputs(NamedTuple):
    """What one training (or diagnostic) step produced, for the global batch.

    A NamedTuple so it passes through `tf.function`. Fields a step did not compute are None.
    """

    step: tf.Tensor  # [] optimizer steps taken *before* this update
    index: tf.Tensor  # [batch] example ids, for per-example bookkeeping
    labels: tf.Tensor  # [batch] training labels (after any label transform)
    logits: tf.Tensor  # [batch, num_classes]
    per_example_loss: tf.Tensor  # [batch]
    # Need.GRAD_STATS only (pergrad/): variable path -> pergrad GradStats (with `gram` under Need.GRAM).
    grad_stats: Optional[dict] = None
    # Need.GRAD_STATS only: GradStats of d loss_i / d logits.
    logit_stats: Optional[Any] = None
    # Need.REPRESENTATIONS only: probe name -> [batch, ...] representation.
    representations: Optional[dict] = None
    # Need.WEIGHTS only: variable path -> gradient of the mean loss (same shape as variable).
    grads: Optional[dict] = None
    # Need.WEIGHTS only: variable path -> variable value *before* the update.
    weights: Optional[dict] = None
