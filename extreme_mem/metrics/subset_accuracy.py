"""Accuracy on the label-provenance subsets of the training set, at evaluation time.

Stephenson et al. (ICLR 2021) Fig. 2A: `unpermuted` (label kept), `permuted` (accuracy on the
random training label), `restored` (the permuted examples scored against their true label).
Tags `train/accuracy/<subset>`. Reads the trainer's full-split predictions: no extra pass.
"""

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.data import transforms
from extreme_mem.metrics import base


def subset_accuracies(predictions: np.ndarray, split) -> dict:
    """`{subset: accuracy}` for unpermuted / permuted / restored (subsets with no examples are absent)."""
    relabeled = transforms.relabeled_mask(split)
    predictions, labels, true = np.asarray(predictions), np.asarray(split.labels), np.asarray(split.true_labels)
    out = {}
    if (~relabeled).any():
        out['unpermuted'] = float(np.mean(predictions[~relabeled] == labels[~relabeled]))
    if relabeled.any():
        out['permuted'] = float(np.mean(predictions[relabeled] == labels[relabeled]))
        out['restored'] = float(np.mean(predictions[relabeled] == true[relabeled]))
    return out


@registry.METRICS.register('subset_accuracy')
@gin.configurable(module='metrics')
class SubsetAccuracy(base.MetricPlugin):
    """Unpermuted / permuted / restored training accuracy at every evaluation."""

    needs = frozenset()  # evaluation only: reads the trainer's full-split predictions

    def __init__(self):
        super().__init__(every_n_steps=None)

    def evaluate(self, context: base.EvalContext) -> dict:
        accs = subset_accuracies(context.evals['train'].predictions, context.data.train)
        return {f'train/accuracy/{k}': v for k, v in accs.items()}
