"""Tests for extreme_mem/metrics/subset_accuracy.py with hand-computed subsets."""

import numpy as np
from absl.testing import absltest

from extreme_mem import registry
from extreme_mem.data import base as data_base
from extreme_mem.metrics import base, subset_accuracy


class SubsetAccuracyTest(absltest.TestCase):

    def test_hand_computed(self):
        true = np.array([0, 1, 2, 0, 1, 2])
        labels = np.array([0, 1, 0, 0, 2, 1])  # positions 2, 4, 5 relabeled; position 3 re-drawn to its own class
        relabeled = np.array([False, False, True, True, True, True])
        split = data_base.RelabeledSplit(np.zeros((6, 1), np.float32), labels, true, np.arange(6), relabeled)
        predictions = np.array([0, 2, 0, 0, 1, 2])
        # unpermuted: positions 0, 1 -> 1/2. permuted: predictions 0,0,1,2 vs labels 0,0,2,1 -> 2/4.
        # restored: predictions 0,0,1,2 vs true labels 2,0,1,2 -> 3/4.
        expected = {'unpermuted': 0.5, 'permuted': 0.5, 'restored': 0.75}
        self.assertEqual(subset_accuracy.subset_accuracies(predictions, split), expected)
        evals = {'train': type('EvalResult', (), {'predictions': predictions})()}
        ctx = base.EvalContext(step=0, model=None, data=data_base.Data(split, split, None), evals=evals)
        self.assertEqual(subset_accuracy.SubsetAccuracy().evaluate(ctx),
                         {f'train/accuracy/{k}': v for k, v in expected.items()})

    def test_clean_labels_have_only_unpermuted(self):
        split = data_base.Split(np.zeros((3, 1), np.float32), np.array([0, 1, 1]), np.array([0, 1, 1]), np.arange(3))
        self.assertEqual(subset_accuracy.subset_accuracies(np.array([0, 0, 1]), split), {'unpermuted': 2 / 3})

    def test_registered(self):
        self.assertIs(registry.METRICS.get('subset_accuracy'), subset_accuracy.SubsetAccuracy)


if __name__ == '__main__':
    absltest.main()
