"""`ArraySource`: the `DataSource.load(seed)` shared by every in-memory dataset source.

A concrete source implements only `_load_raw()` (raw train/test arrays). `ArraySource.load(seed)`
then runs, in this order:

1. image shaping: add a channel axis to [n, H, W] images; optional bilinear resize
   (`image_size`) and grayscale -> `channels` replication, e.g. 8x8 digits -> 32x32x3 for convnets;
2. preprocessing (`data/preprocessing.py`, statistics from the whole TRAIN split as loaded, so all
   subsets share one normalisation); optional `flatten`;
3. example subsets (`data/transforms.py`): `classes` (train and test), then the training part
   `train_part` of `train_parts` (disjoint, seeded), then `num_train_examples` (seeded);
4. label transforms on the training split: `label_noise` of kind `noise_kind`, or
   `random_classes` (which also relabels the test split, so its labels stay in range).

Validation (`data/validation.py`, which lists every error and warning): the raw arrays are
checked before step 1 (numeric images, matching lengths, non-empty splits, finite values, labels
that are integer class ids in range(num_classes), checked before the int32 cast so no label can
wrap), and the result after step 4 (non-empty splits, at least 2 classes, labels in range, finite
preprocessed images; warnings for a single training class and for test labels unseen in
training). Every failure is a `base.DataError` naming the source, the split and the first bad
index or value.

Seeds: subsets use `subset_seed` and label transforms use `noise_seed` when configured, otherwise
the run seed passed to `load(seed)`; each step draws from its own stream `[seed, step_tag]`.

Gin: every constructor argument can be bound for all sources, `data.ArraySource.<arg>`, or for
one source, `data.<Source>.<arg>` (e.g. `data.Digits.label_noise = 0.2`); a per-source binding
wins because it is passed explicitly.
"""

import abc
import dataclasses
from typing import Optional, Sequence, Tuple, Union

import gin
import numpy as np
from absl import logging

from extreme_mem.data import base
from extreme_mem.data import preprocessing
from extreme_mem.data import transforms
from extreme_mem.data import validation

# Per-step seed stream tags: step k draws from np.random.default_rng([seed, k]).
_TAG_PARTS, _TAG_TAKE, _TAG_NOISE, _TAG_RANDOM_TRAIN, _TAG_RANDOM_TEST = 1, 2, 3, 4, 5


@dataclasses.dataclass(frozen=True)
class RawData:
    """Arrays as a source stores them, before any processing.

    Attributes:
      x_train: [n_train, H, W] or [n_train, H, W, C] images (any real dtype), or [n_train, d].
      y_train: [n_train] integer class ids.
      x_test: [n_test, ...] images with the same trailing shape as `x_train`.
      y_test: [n_test] integer class ids.
      num_classes: number of classes; labels are in range(num_classes).
      max_value: the largest possible raw value (255 for uint8, 16 for digits).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    max_value: float


def _image_size(value) -> Optional[Tuple[int, int]]:
    if value is None:
        return None
    if isinstance(value, int):
        return (value, value)
    size = tuple(int(v) for v in value)
    if len(size) != 2:
        raise base.DataError(f'image_size must be an int or (height, width), got {value!r}.')
    return size


def resize_images(x: np.ndarray, size: Tuple[int, int], chunk: int = 4096) -> np.ndarray:
    """Bilinear resize (`tf.image.resize`, half-pixel centres) in chunks.

    Args:
      x: [n, H, W, C] images.
      size: (height, width).

    Returns:
      [n, height, width, C] float32; values stay within the input's range.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only sources that resize pay)

    out = [tf.image.resize(x[i : i + chunk].astype(np.float32), size, method='bilinear').numpy()
           for i in range(0, len(x), chunk)]
    return np.concatenate(out) if out else np.zeros((0, *size, x.shape[-1]), np.float32)


@gin.configurable(module='data')
class ArraySource(base.DataSource):
    """Base of array-backed sources: raw arrays -> preprocessed, subset, relabeled `Data`.

    Args:
      preprocess: one of `preprocessing.METHODS` ('none', 'unit', 'symmetric', 'standardize',
        'mnist').
      flatten: reshape images to [n, H*W*C] (MLPs flatten anyway; leave False for convnets).
      image_size: resize images to this int (square) or (height, width); None keeps them.
      channels: replicate single-channel images to this many channels (e.g. 3); None keeps them.
      classes: keep only these class ids, in train and test; None keeps all.
      remap_classes: with `classes`, relabel `classes[i]` as i (num_classes = len(classes)).
      train_parts: sizes of disjoint training parts drawn from a seeded permutation of the
        training split (e.g. [20000, 25000] for Maennel et al. 2020 upstream/downstream); None
        uses the whole training split.
      train_part: which part of `train_parts` this source returns (0-based).
      num_train_examples: keep this many training examples, chosen with the subset seed (e.g.
        1 for Identity Crisis); None keeps all.
      subset_seed: seed for `train_parts` and `num_train_examples`; None uses the run seed.
      label_noise: ε, fraction of training examples whose label is re-drawn (0 = clean).
      noise_kind: 'uniform' (new label uniform over all classes) or 'permute' (labels of the
        selected examples permuted among themselves).
      random_classes: K >= 2: label every training and test example uniformly with one of K
        classes, range(K) (Maennel et al. 2020); num_classes becomes K. Excludes `label_noise`.
      noise_seed: seed for label transforms; None uses the run seed.

    Raises:
      base.DataError: an invalid option (at construction) or invalid data (at `load`).
    """

    name = 'array'  # the registered name; becomes DatasetInfo.name

    def __init__(
        self,
        preprocess: str = 'unit',
        flatten: bool = False,
        image_size: Union[None, int, Sequence[int]] = None,
        channels: Optional[int] = None,
        classes: Optional[Sequence[int]] = None,
        remap_classes: bool = True,
        train_parts: Optional[Sequence[int]] = None,
        train_part: int = 0,
        num_train_examples: Optional[int] = None,
        subset_seed: Optional[int] = None,
        label_noise: float = 0.0,
        noise_kind: str = 'uniform',
        random_classes: Optional[int] = None,
        noise_seed: Optional[int] = None,
    ):
        preprocessing.check_method(preprocess)
        if noise_kind not in transforms.NOISE_KINDS:
            raise base.DataError(f'Unknown noise_kind {noise_kind!r}; valid: {list(transforms.NOISE_KINDS)}.')
        if not 0.0 <= label_noise <= 1.0:
            raise base.DataError(f'label_noise must be in [0, 1], got {label_noise}.')
        if random_classes is not None and (random_classes < 2 or label_noise > 0):
            raise base.DataError(
                f'random_classes must be >= 2 and excludes label_noise; got {random_classes}, {label_noise}.'
            )
        if train_parts is not None and not 0 <= train_part < len(train_parts):
            raise base.DataError(f'train_part {train_part} out of range for train_parts {list(train_parts)}.')
        if channels is not None and channels < 1:
            raise base.DataError(f'channels must be >= 1, got {channels}.')
        self._preprocess = preprocess
        self._flatten = flatten
        self._image_size = _image_size(image_size)
        self._channels = channels
        self._classes = None if classes is None else [int(c) for c in classes]
        self._remap_classes = remap_classes
        self._train_parts = None if train_parts is None else [int(s) for s in train_parts]
        self._train_part = train_part
        self._num_train_examples = num_train_examples
        self._subset_seed = subset_seed
        self._label_noise = float(label_noise)
        self._noise_kind = noise_kind
        self._random_classes = random_classes
        self._noise_seed = noise_seed

    @abc.abstractmethod
    def _load_raw(self) -> RawData:
        """Returns the raw train and test arrays."""

    def options(self) -> dict:
        """The resolved constructor arguments (logged by `load`)."""
        return {k[1:]: v for k, v in vars(self).items() if k.startswith('_')}

    def describe(self) -> str:
        """[Optional] How messages name this source, e.g. "dataset 'npz' (/data/my.npz)"."""
        return f'dataset {self.name!r}'

    def _subset_options(self) -> str:
        """The options that can empty a split, as set (for messages)."""
        parts = []
        if self._classes is not None:
            parts.append(f'classes={self._classes}')
        if self._train_parts is not None:
            parts.append(f'train_parts={self._train_parts}, train_part={self._train_part}')
        if self._num_train_examples is not None:
            parts.append(f'num_train_examples={self._num_train_examples}')
        return f'after the subset options {", ".join(parts)}' if parts else ''

    def _check_raw(self, raw: RawData) -> Tuple[np.ndarray, np.ndarray]:
        """Validates `raw` (see the module docstring); returns the int32 train and test labels."""
        where = self.describe()
        splits = (('train', raw.x_train, raw.y_train), ('test', raw.x_test, raw.y_test))
        for split, x, y in splits:
            validation.check_numeric(x, f'{where}: x_{split}')
            if len(x) != len(y):
                raise base.DataError(f'{where}: x_{split} has {len(x)} examples but y_{split} has {len(y)}.')
            validation.check_not_empty(len(x), where, split)
        num_classes = raw.num_classes
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 1:
            raise base.DataError(f'{where}: num_classes must be a positive int, got {num_classes!r}.')
        labels = []
        for split, x, y in splits:
            validation.check_finite(x, f'{where}: x_{split}', split)
            labels.append(validation.class_ids(y, f'{where}: y_{split}', int(num_classes)))
        if np.shape(raw.x_train)[1:] != np.shape(raw.x_test)[1:]:
            raise base.DataError(f'{where}: train examples have shape {np.shape(raw.x_train)[1:]} but test examples '
                                 f'have shape {np.shape(raw.x_test)[1:]}.')
        return labels[0], labels[1]

    def _shape_images(self, x: np.ndarray) -> np.ndarray:
        if x.ndim == 3:
            x = x[..., np.newaxis]
        if x.ndim != 4:
            if self._image_size or self._channels:
                raise base.DataError(f'image_size/channels need [n, H, W(, C)] images, got shape {x.shape}.')
            return x
        if self._image_size is not None and tuple(x.shape[1:3]) != self._image_size:
            x = resize_images(x, self._image_size)
        if self._channels is not None and x.shape[-1] != self._channels:
            if x.shape[-1] != 1:
                raise base.DataError(f'Can only replicate 1 channel to {self._channels}; images have {x.shape[-1]}.')
            x = np.repeat(x, self._channels, axis=-1)
        return x

    def load(self, seed: Optional[int] = None) -> base.Data:
        """Loads, preprocesses, subsets and relabels both splits (see the module docstring).

        Args:
          seed: the run seed; drives subsets and label transforms unless `subset_seed` /
            `noise_seed` are set. None means 0.

        Returns:
          `Data` with float32 images [n, *input_shape], int32 labels and int64 ids.

        Raises:
          base.DataError: invalid data (see the module docstring); the message names the source,
            the split and the first bad index or value.
        """
        seed = 0 if seed is None else int(seed)
        logging.info('Loading dataset %r (seed %d) with %s.', self.name, seed, self.options())
        raw = self._load_raw()
        y_train, y_test = self._check_raw(raw)
        x_train, x_test = self._shape_images(np.asarray(raw.x_train)), self._shape_images(np.asarray(raw.x_test))
        x_train, x_test = preprocessing.preprocess(x_train, x_test, self._preprocess, raw.max_value)
        if self._flatten:
            x_train, x_test = preprocessing.flatten(x_train), preprocessing.flatten(x_test)
        train, test = _split(x_train, y_train), _split(x_test, y_test)
        num_classes = int(raw.num_classes)

        if self._classes is not None:
            train = transforms.class_subset(train, self._classes, self._remap_classes)
            test = transforms.class_subset(test, self._classes, self._remap_classes)
            if self._remap_classes:
                num_classes = len(self._classes)
        subset_seed = seed if self._subset_seed is None else int(self._subset_seed)
        if self._train_parts is not None:
            parts = transforms.disjoint_subsets(train, self._train_parts, [subset_seed, _TAG_PARTS])
            train = parts[self._train_part]
        if self._num_train_examples is not None:
            train = transforms.take_examples(train, self._num_train_examples, [subset_seed, _TAG_TAKE])

        noise_seed = seed if self._noise_seed is None else int(self._noise_seed)
        if self._label_noise > 0:
            train = transforms.label_noise(
                train, self._label_noise, self._noise_kind, num_classes, [noise_seed, _TAG_NOISE]
            )
        if self._random_classes is not None:
            num_classes = int(self._random_classes)
            train = transforms.random_classes(train, num_classes, [noise_seed, _TAG_RANDOM_TRAIN])
            test = transforms.random_classes(test, num_classes, [noise_seed, _TAG_RANDOM_TEST])

        input_shape = tuple(int(d) for d in x_train.shape[1:])
        info = base.DatasetInfo(name=self.name, num_classes=num_classes, input_shape=input_shape)
        data = base.Data(train=train, test=test, info=info)
        validation.check_data(data, self.describe(), self._subset_options())
        logging.info('Dataset %r: %d train / %d test examples, %d classes, input shape %s, %d train labels re-drawn.',
                     self.name, train.num_examples, test.num_examples, num_classes, info.input_shape,
                     int(transforms.relabeled_mask(train).sum()))
        return data


def _split(images: np.ndarray, labels: np.ndarray) -> base.Split:
    """A fresh split from validated int32 labels: labels are the true labels, ids are positions."""
    return base.Split(images, labels, labels.copy(), np.arange(len(images), dtype=np.int64))
