"""Tests for extreme_mem/data/pipeline.py with a hand-built `Split`."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.data import base
from extreme_mem.data import pipeline


def _split(n):
    ids = np.arange(100, 100 + n, dtype=np.int64)  # ids differ from positions on purpose
    images = np.stack([np.full((2, 2, 1), i, np.float32) for i in range(n)])
    labels = (np.arange(n) % 3).astype(np.int32)
    return base.Split(images, labels, labels.copy(), ids)


def _take(ds, k):
    return [{key: v.numpy() for key, v in b.items()} for b in ds.take(k)]


class PipelineTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters((10, 3), (12, 4), (7, 7), (5, 9))
    def test_each_epoch_visits_each_example_at_most_once(self, n, batch_size):
        split = _split(n)
        per_epoch = pipeline.steps_per_epoch(n, batch_size)
        epochs = 3
        batches = _take(pipeline.train_batches(split, batch_size, seed=1), per_epoch * epochs)
        effective = min(batch_size, n)
        for e in range(epochs):
            ids = np.concatenate([b['index'] for b in batches[e * per_epoch : (e + 1) * per_epoch]])
            self.assertLen(ids, per_epoch * effective)
            self.assertLen(np.unique(ids), len(ids))
            self.assertTrue(np.all(np.isin(ids, split.index)))
        for b in batches:  # images and labels travel with their ids
            pos = b['index'] - 100
            self.assertAllEqual(b['image'][:, 0, 0, 0], pos.astype(np.float32))
            self.assertAllEqual(b['label'], split.labels[pos])

    def test_resume_sees_the_same_batches(self):
        split = _split(10)
        full = _take(pipeline.train_batches(split, 3, seed=4), 8)
        resumed = _take(pipeline.train_batches(split, 3, seed=4, start_step=5), 3)
        for a, b in zip(full[5:], resumed):
            self.assertAllEqual(a['index'], b['index'])

    def test_eval_batches_one_ordered_pass(self):
        split = _split(7)
        batches = _take(pipeline.eval_batches(split, 3), 10)
        self.assertEqual([len(b['index']) for b in batches], [3, 3, 1])
        self.assertAllEqual(np.concatenate([b['index'] for b in batches]), split.index)


if __name__ == '__main__':
    tf.test.main()
