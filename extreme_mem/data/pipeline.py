"""`tf.data` pipelines over an in-memory `Split`.

Training batches are a pure function of `(seed, step)`: epoch `e` visits the examples in the
order `stateless_shuffle(range(n), seed=[seed, e])`, in full batches. So a run resumed at step
`s` sees exactly the batches an uninterrupted run sees, without storing iterator state.
"""

import numpy as np
import tensorflow as tf

from extreme_mem.data import base


def _gather_fn(split: base.Split):
    images = tf.constant(split.images)
    labels = tf.constant(split.labels)
    index = tf.constant(split.index, dtype=tf.int64)

    def gather(positions):
        return {
            'image': tf.gather(images, positions),
            'label': tf.gather(labels, positions),
            'index': tf.gather(index, positions),
        }

    return gather


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
    """Full batches per epoch (the remainder of each epoch's permutation is dropped)."""
    return max(num_examples // batch_size, 1)


def train_batches(split: base.Split, batch_size: int, seed: int, start_step: int = 0) -> tf.data.Dataset:
    """Infinite, shuffled, full batches of `{'image', 'label', 'index'}` from step `start_step`.

    Args:
      split: the training split.
      batch_size: examples per batch; larger than the split means the whole split per batch.
      seed: shuffling seed.
      start_step: the first optimizer step this pipeline feeds (for exact resume).
    """
    n = split.num_examples
    if n == 0:
        raise base.DataError('Cannot train on an empty split.')
    batch_size = min(batch_size, n)
    per_epoch = steps_per_epoch(n, batch_size)
    first_epoch, skip = divmod(int(start_step), per_epoch)

    def epoch(e):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(n, dtype=tf.int64), seed=tf.stack([tf.cast(seed, tf.int64), e])
        )
        return tf.data.Dataset.from_tensor_slices(order).batch(batch_size, drop_remainder=True)

    ds = tf.data.Dataset.range(first_epoch, np.iinfo(np.int64).max).flat_map(epoch).skip(skip)
    return ds.map(_gather_fn(split), num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def eval_batches(split: base.Split, batch_size: int) -> tf.data.Dataset:
    """One ordered pass over `split` in batches (the last may be smaller)."""
    positions = tf.data.Dataset.range(split.num_examples).batch(batch_size)
    return positions.map(_gather_fn(split)).prefetch(2)
