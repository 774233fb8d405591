"""Label transforms and example subsets on in-memory `Split`s, with provenance, in pure numpy.

Owns every change to *which* examples a split holds or *which* labels it trains on:

- label transforms (`uniform_labels`, `permute_labels`, `random_classes`, `label_noise`) return a
  `base.RelabeledSplit` whose `relabeled` mask records the examples whose label was re-drawn;
  `true_labels` always keeps the original labels;
- example subsets (`class_subset`, `take_examples`, `disjoint_subsets`) keep example ids
  (`Split.index`) and provenance;
- provenance views (`permuted_positions`, `unpermuted_positions`, `restored`,
  `provenance_subsets`) give the unpermuted / permuted / restored subsets of Stephenson et al.
  (ICLR 2021) section 3 for metrics to evaluate.

Every random choice is a deterministic function of `seed` (anything `np.random.default_rng`
accepts: an int, a sequence of ints, or a Generator to draw from). A selected fraction ε of n examples is exactly
`round(ε n)` examples.
"""

from typing import Optional, Sequence, Union

import numpy as np

from extreme_mem.data import base

Seed = Union[int, Sequence[int], np.random.SeedSequence, np.random.Generator]
NOISE_KINDS = ('uniform', 'permute')


def _rng(seed: Optional[Seed]) -> np.random.Generator:
    return np.random.default_rng(seed)


def num_selected(n: int, fraction: float) -> int:
    """round(fraction * n), the number of examples a fraction selects.

    Raises:
      base.DataError: `fraction` outside [0, 1].
    """
    if not 0.0 <= fraction <= 1.0:
        raise base.DataError(f'fraction must be in [0, 1], got {fraction}.')
    return int(round(fraction * n))


def select_positions(n: int, fraction: float, seed: Optional[Seed]) -> np.ndarray:
    """Exactly `num_selected(n, fraction)` distinct positions in [0, n), sorted, chosen uniformly.

    Returns:
      [round(fraction * n)] int64.
    """
    m = num_selected(n, fraction)
    return np.sort(_rng(seed).choice(n, size=m, replace=False)).astype(np.int64)


def _relabel(split: base.Split, positions: np.ndarray, new_labels: np.ndarray) -> base.RelabeledSplit:
    """`split` with `labels[positions] = new_labels`, marking `positions` as relabeled."""
    labels = np.array(split.labels, dtype=np.int32, copy=True)
    labels[positions] = new_labels
    relabeled = relabeled_mask(split).copy()
    relabeled[positions] = True
    return base.RelabeledSplit(split.images, labels, split.true_labels, split.index, relabeled)


def uniform_labels(
    split: base.Split, num_classes: int, fraction: float = 1.0, seed: Optional[Seed] = 0
) -> base.RelabeledSplit:
    """Re-draws the labels of a random fraction of examples uniformly from `num_classes` classes.

    Labels are drawn from *all* classes, so about 1/num_classes of the selected examples keep
    their true label; they still count as relabeled (Stephenson et al. 2021, appendix A.3).
    The expected fraction of changed labels is `fraction * (1 - 1/num_classes)`.

    Args:
      split: [n] examples.
      num_classes: labels are drawn from range(num_classes).
      fraction: ε, the fraction of examples to relabel; 1.0 = fully random labels.
      seed: selection and label seed.

    Returns:
      A `RelabeledSplit` with exactly round(ε n) examples relabeled.
    """
    if num_classes < 1:
        raise base.DataError(f'num_classes must be >= 1, got {num_classes}.')
    rng = _rng(seed)
    positions = select_positions(split.num_examples, fraction, rng)
    return _relabel(split, positions, rng.integers(0, num_classes, size=len(positions), dtype=np.int32))


def permute_labels(split: base.Split, fraction: float = 1.0, seed: Optional[Seed] = 0) -> base.RelabeledSplit:
    """Randomly permutes the labels among a random fraction of examples.

    The multiset of labels (hence the class histogram) is unchanged. Examples whose label is
    unchanged by the permutation still count as relabeled (Stephenson et al. 2021, A.3).

    Args:
      split: [n] examples.
      fraction: ε, the fraction of examples whose labels are shuffled among themselves.
      seed: selection and permutation seed.

    Returns:
      A `RelabeledSplit` with exactly round(ε n) examples relabeled.
    """
    rng = _rng(seed)
    positions = select_positions(split.num_examples, fraction, rng)
    labels = np.asarray(split.labels)[positions]
    return _relabel(split, positions, labels[rng.permutation(len(positions))])


def random_classes(split: base.Split, k: int, seed: Optional[Seed] = 0) -> base.RelabeledSplit:
    """Labels every example uniformly at random with one of `k` classes, range(k).

    Maennel et al. (NeurIPS 2020) appendix A.1, step 3: upstream examples "are labelled with
    num_classes_upstream classes randomly and uniformly"; k may exceed the dataset's classes
    (their Figure 1 uses 50 random classes on CIFAR-10).

    Returns:
      A `RelabeledSplit` with all examples relabeled and labels in range(k).
    """
    return uniform_labels(split, k, 1.0, seed)


def label_noise(
    split: base.Split, fraction: float, kind: str, num_classes: int, seed: Optional[Seed] = 0
) -> base.RelabeledSplit:
    """Dispatches to `uniform_labels` (`kind='uniform'`) or `permute_labels` (`kind='permute'`).

    Raises:
      base.DataError: unknown `kind` (lists the valid ones).
    """
    if kind == 'uniform':
        return uniform_labels(split, num_classes, fraction, seed)
    if kind == 'permute':
        return permute_labels(split, fraction, seed)
    raise base.DataError(f'Unknown noise kind {kind!r}; valid: {list(NOISE_KINDS)}.')


def class_subset(split: base.Split, classes: Sequence[int], remap: bool = True) -> base.Split:
    """Keeps the examples whose TRUE label is in `classes`.

    Args:
      split: [n] examples.
      classes: class ids to keep, distinct.
      remap: map `classes[i]` to label i (labels and true labels), so the result has
        `len(classes)` classes; otherwise keep the original ids.

    Returns:
      The sub-split (ids and provenance kept), in original order.

    Raises:
      base.DataError: empty or repeated `classes`, or (with `remap`) a training label outside them.
    """
    classes = np.asarray(list(classes), dtype=np.int64)
    if classes.size == 0 or len(np.unique(classes)) != classes.size or classes.min() < 0:
        raise base.DataError(f'classes must be distinct non-negative ids, got {classes.tolist()}.')
    sub = split.take(np.flatnonzero(np.isin(split.true_labels, classes)))
    if not remap:
        return sub
    lookup = np.full(max(int(classes.max()), int(np.max(sub.labels, initial=0))) + 1, -1, dtype=np.int32)
    lookup[classes] = np.arange(len(classes), dtype=np.int32)
    labels = lookup[np.asarray(sub.labels)]
    if np.any(labels < 0):
        raise base.DataError(f'Training labels outside classes {classes.tolist()}; apply class_subset before label noise.')
    return _replace_labels(sub, labels, lookup[np.asarray(sub.true_labels)])


def _replace_labels(split: base.Split, labels: np.ndarray, true_labels: np.ndarray) -> base.Split:
    if isinstance(split, base.RelabeledSplit):
        return base.RelabeledSplit(split.images, labels, true_labels, split.index, split.relabeled)
    return base.Split(split.images, labels, true_labels, split.index)


def take_examples(split: base.Split, n: int, seed: Optional[Seed] = None) -> base.Split:
    """A subset of `n` examples: the first n, or (with `seed`) n chosen uniformly at random.

    E.g. the single training example of Zhang et al. (ICLR 2020) "Identity Crisis" section 2:
    `take_examples(class_subset(train, [7], remap=False), 1, seed)`.

    Returns:
      [n] examples in original order.

    Raises:
      base.DataError: `n` < 1 or larger than the split.
    """
    if not 1 <= n <= split.num_examples:
        raise base.DataError(f'Cannot take {n} examples from a split of {split.num_examples}.')
    if seed is None:
        return split.take(np.arange(n))
    return split.take(np.sort(_rng(seed).choice(split.num_examples, size=n, replace=False)))


def disjoint_positions(n: int, sizes: Sequence[int], seed: Optional[Seed]) -> list:
    """Disjoint position sets of the given sizes: consecutive chunks of a seeded permutation.

    Args:
      n: split size.
      sizes: part sizes, summing to at most n (the rest is unused).
      seed: permutation seed.

    Returns:
      One sorted int64 array per part.

    Raises:
      base.DataError: a negative size, or sizes summing to more than n.
    """
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) > n:
        raise base.DataError(f'Part sizes {sizes} must be >= 0 and sum to at most the split size {n}.')
    order = _rng(seed).permutation(n)
    bounds = np.cumsum([0] + sizes)
    return [np.sort(order[a:b]).astype(np.int64) for a, b in zip(bounds[:-1], bounds[1:])]


def disjoint_subsets(split: base.Split, sizes: Sequence[int], seed: Optional[Seed] = 0) -> list:
    """Disjoint example subsets, e.g. Maennel et al. (2020) A.1 upstream/downstream sets.

    `disjoint_subsets(train, [n // 2, n - n // 2], seed)` gives the first and second half of the
    training set after a seeded permutation.

    Returns:
      A list of `Split`s, one per entry of `sizes`.
    """
    return [split.take(p) for p in disjoint_positions(split.num_examples, sizes, seed)]


def relabeled_mask(split: base.Split) -> np.ndarray:
    """[n] bool: examples a label transform re-drew.

    For a plain `Split` (no record) this falls back to `split.corrupted` (label != true label),
    which is all False for an untransformed split.
    """
    if isinstance(split, base.RelabeledSplit):
        return np.asarray(split.relabeled, dtype=bool)
    return np.asarray(split.corrupted, dtype=bool)


def permuted_positions(split: base.Split) -> np.ndarray:
    """[m] int64 positions of the permuted (relabeled) examples."""
    return np.flatnonzero(relabeled_mask(split)).astype(np.int64)


def unpermuted_positions(split: base.Split) -> np.ndarray:
    """[n - m] int64 positions of the examples trained on their true labels."""
    return np.flatnonzero(~relabeled_mask(split)).astype(np.int64)


def restored(split: base.Split) -> base.Split:
    """The permuted examples with their true labels restored (a plain `Split`)."""
    sub = split.take(permuted_positions(split))
    return base.Split(sub.images, np.asarray(sub.true_labels), np.asarray(sub.true_labels), sub.index)


def provenance_subsets(split: base.Split) -> dict:
    """The three training subsets of Stephenson et al. (2021) section 3.

    Returns:
      `{'unpermuted': Split, 'permuted': Split (random labels), 'restored': Split (same
      examples as 'permuted', true labels)}`.
    """
    return {
        'unpermuted': split.take(unpermuted_positions(split)),
        'permuted': split.take(permuted_positions(split)),
        'restored': restored(split),
    }
