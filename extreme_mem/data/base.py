"""Dataset contract: in-memory splits with per-example provenance, and the `DataSource` ABC.

Every source loads its splits into memory as `Split`s (the papers' datasets fit: CIFAR-10 in
float32 is 600 MB). `index` is the example id within its split, so per-example bookkeeping
(permuted vs not, restored labels) survives shuffling. `data/pipeline.py` turns a `Split` into
`tf.data` pipelines of `{'image', 'label', 'index'}`. `RelabeledSplit` adds the one piece of
provenance a `Split` cannot derive from its labels: which examples a label transform re-drew.
`DataError` is the one exception type for bad user data or data options (`data/validation.py`
holds the checks every source runs at load).
"""

import abc
import dataclasses
from typing import Optional

import numpy as np


class DataError(ValueError):
    """Bad user data or data options: a corrupt file, out-of-range labels, non-finite inputs, ...

    The message names the file or split, the offending value or index, and what a valid input
    looks like. Launchers print it in one or two lines, without a traceback.
    """


@dataclasses.dataclass(frozen=True)
class Split:
    """One split in memory.

    Attributes:
      images: [n, *shape] float32, already preprocessed.
      labels: [n] int32 training labels (after any label transform), or [n, ...] float32
        regression targets.
      true_labels: [n] int32 labels before any label transform.
      index: [n] int64 example ids (positions in the original split).
    """

    images: np.ndarray
    labels: np.ndarray
    true_labels: np.ndarray
    index: np.ndarray

    def __post_init__(self):
        n = len(self.images)
        for name in ('labels', 'true_labels', 'index'):
            if len(getattr(self, name)) != n:
                raise DataError(f'Split.{name} has {len(getattr(self, name))} entries, images has {n}.')

    @property
    def num_examples(self) -> int:
        return len(self.images)

    @property
    def corrupted(self) -> np.ndarray:
        """[n] bool: the training label differs from the true label."""
        return np.asarray(self.labels) != np.asarray(self.true_labels)

    def take(self, positions: np.ndarray) -> 'Split':
        """The sub-split at `positions` (ids are kept)."""
        return Split(self.images[positions], self.labels[positions], self.true_labels[positions], self.index[positions])

    def with_labels(self, labels: np.ndarray) -> 'Split':
        """Same examples, new training labels; true labels unchanged."""
        return dataclasses.replace(self, labels=np.asarray(labels))


@dataclasses.dataclass(frozen=True)
class RelabeledSplit(Split):
    """A `Split` whose training labels were re-drawn for some examples by a label transform.

    Stephenson et al. (ICLR 2021) section 3 and appendix A.3: the *permuted* examples are all
    examples whose label was randomised, including those whose random label happens to equal the
    true one. `Split.corrupted` (label != true label) misses those; `relabeled` records them.
    `data/transforms.py` creates these and reads them (`permuted_positions`, `restored`).

    Attributes:
      relabeled: [n] bool, True where a label transform re-drew the training label.
    """

    relabeled: Optional[np.ndarray] = None

    def __post_init__(self):
        super().__post_init__()
        if self.relabeled is None:
            object.__setattr__(self, 'relabeled', np.zeros(len(self.images), dtype=bool))
        else:
            object.__setattr__(self, 'relabeled', np.asarray(self.relabeled, dtype=bool))
        if len(self.relabeled) != len(self.images):
            raise DataError(f'Split.relabeled has {len(self.relabeled)} entries, images has {len(self.images)}.')

    def take(self, positions: np.ndarray) -> 'RelabeledSplit':
        """The sub-split at `positions` (ids and provenance are kept)."""
        return RelabeledSplit(
            self.images[positions],
            self.labels[positions],
            self.true_labels[positions],
            self.index[positions],
            self.relabeled[positions],
        )


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Metadata experiments need to build models."""

    name: str
    num_classes: int
    input_shape: tuple


@dataclasses.dataclass(frozen=True)
class Data:
    """What a source returns: train and test splits plus metadata."""

    train: Split
    test: Split
    info: DatasetInfo


class DataSource(abc.ABC):
    """A dataset plugin (registered in `registry.DATASETS`, configured by gin).

    `load` returns only data that passes `validation.check_data` (sources built on
    `array_source.ArraySource` get every check for free) and raises `DataError` otherwise.
    """

    @abc.abstractmethod
    def load(self, seed: Optional[int] = None) -> Data:
        """Loads both splits into memory, preprocessed and label-transformed.

        Raises:
          DataError: the data or the source's options are invalid.
        """
