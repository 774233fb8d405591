"""`digits`: scikit-learn's bundled 8x8 handwritten digits, the embedded default dataset.

1,797 grayscale 8x8 images with integer values 0..16 and 10 classes, shipped inside
scikit-learn (no download). The train/test split is stratified and deterministic given
`split_seed`, which is fixed by default and independent of the run seed, so every run of a sweep
sees the same split.

Gin bindings (module `data`):
  data.Digits.train_size = 1200        # examples in the train split
  data.Digits.test_size = None         # None: the remaining 597
  data.Digits.split_seed = 0           # train/test split seed (not the run seed)
plus every `ArraySource` option, e.g. `data.Digits.image_size = 32`, `data.Digits.channels = 3`,
`data.Digits.label_noise = 0.2`, `data.Digits.preprocess = 'standardize'` (default 'unit':
values / 16).
"""

from typing import Optional, Tuple

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.data import array_source
from extreme_mem.data import base

NUM_EXAMPLES = 1797
NUM_CLASSES = 10
MAX_VALUE = 16.0


def _largest_remainder(counts: np.ndarray, total: int) -> np.ndarray:
    """Integer allocation of `total` proportional to `counts` (Hamilton's method).

    Returns:
      [len(counts)] int64 summing to `total`, each within 1 of `counts * total / counts.sum()`
      and at most `counts`.
    """
    ideal = counts * total / counts.sum()
    alloc = np.floor(ideal).astype(np.int64)
    remainder = ideal - alloc
    order = np.argsort(-remainder, kind='stable')
    alloc[order[: total - alloc.sum()]] += 1
    return alloc


def stratified_split(
    labels: np.ndarray, train_size: int, test_size: Optional[int], seed: int
) -> Tuple[np.ndarray, np.ndarray]:
    """Stratified, seeded train/test positions.

    Each class contributes to each split in proportion to its size (within one example).

    Args:
      labels: [n] class ids.
      train_size: examples in the train split.
      test_size: examples in the test split; None means all the rest.
      seed: split seed.

    Returns:
      `(train_positions, test_positions)`, sorted disjoint int64 arrays.

    Raises:
      base.DataError: sizes that are non-positive or exceed n together.
    """
    labels = np.asarray(labels)
    n = len(labels)
    test_size = n - train_size if test_size is None else test_size
    if train_size < 1 or test_size < 1 or train_size + test_size > n:
        raise base.DataError(
            f'Need train_size, test_size >= 1 with train_size + test_size <= {n}; got {train_size}, {test_size}.'
        )
    classes, counts = np.unique(labels, return_counts=True)
    test_counts = _largest_remainder(counts, test_size)
    train_counts = _largest_remainder(counts - test_counts, train_size)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c, n_test, n_train in zip(classes, test_counts, train_counts):
        pos = rng.permutation(np.flatnonzero(labels == c))
        test.append(pos[:n_test])
        train.append(pos[n_test : n_test + n_train])
    return np.sort(np.concatenate(train)).astype(np.int64), np.sort(np.concatenate(test)).astype(np.int64)


@registry.DATASETS.register('digits')
@gin.configurable(module='data')
class Digits(array_source.ArraySource):
    """scikit-learn digits (UCI optical recognition of handwritten digits, 8x8, values 0..16).

    Args:
      train_size: training examples (default 1,200).
      test_size: test examples; None uses the remaining 597.
      split_seed: seed of the stratified train/test split, independent of the run seed.
      **kwargs: `ArraySource` options (preprocess, image_size, channels, label_noise, ...).

    Images are [8, 8, 1] (or `image_size` x `channels` when set).
    """

    name = 'digits'

    def __init__(self, train_size: int = 1200, test_size: Optional[int] = None, split_seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self._train_size = int(train_size)
        self._test_size = None if test_size is None else int(test_size)
        self._split_seed = int(split_seed)

    def _load_raw(self) -> array_source.RawData:
        from sklearn import datasets  # pylint: disable=g-import-not-at-top  (slow import, only when used)

        bunch = datasets.load_digits()
        images = bunch.images.astype(np.uint8)  # [1797, 8, 8], integer values 0..16
        labels = bunch.target.astype(np.int32)
        train, test = stratified_split(labels, self._train_size, self._test_size, self._split_seed)
        return array_source.RawData(images[train], labels[train], images[test], labels[test], NUM_CLASSES, MAX_VALUE)
