"""Data of Zhang et al. (ICLR 2020), "Identity Crisis": one training image, its identity target.

Three pieces:

- `sample_photos` (a registered source): grey 28×28 crops of the two photographs scikit-learn
  ships (`sklearn.datasets.load_sample_images`: class 0 = china.jpg, class 1 = flower.jpg), the
  offline default training image. Each photo is cut into a 4×6 grid of 112×112 crops, grey-scaled
  (ITU-R 601 luma) and block-averaged 4×4 to 28×28; crops whose grid row + column is even form
  the train split (12 per photo), the others the test split.
- `identity_image` (a registered source): wraps ANY registered source (`digits`, `npz`, tfds,
  `sample_photos`) and keeps the `train_index`-th training example of class `train_class` as the
  single training example, with the image itself as regression target (appendix A: one MNIST
  "7"). Its test split is the evaluation set of Fig. 2: other images of the source's test split
  (one per class in turn), generated patterns and random images, all with identity targets.
  Images keep the source's normalisation (its `preprocess` statistics from its train split).
- `patch_rank`: Theorem 2's rank r of the span of the training image's local patches.
"""

from typing import Optional, Tuple

import gin
import numpy as np
from absl import logging

from extreme_mem import registry
from extreme_mem.data import array_source
from extreme_mem.data import base

LUMA = (0.299, 0.587, 0.114)  # ITU-R 601 grey weights
CROP = 112  # pixels of a photo crop before block averaging
BLOCK = 4  # block-average factor: 112 -> 28
GRID_ROWS, GRID_COLS = 4, 6  # crops per photo
PHOTO_CLASSES = ('china', 'flower')
PATTERNS = ('checkerboard', 'hstripes', 'vstripes', 'diagonal', 'ring', 'cross', 'gradient', 'frame')


def photo_crops(photo: np.ndarray) -> np.ndarray:
    """Grey block-averaged crops of one photo on a `GRID_ROWS`×`GRID_COLS` grid.

    Args:
      photo: [H, W, 3] uint8 with H >= CROP, W >= CROP.

    Returns:
      [GRID_ROWS * GRID_COLS, CROP // BLOCK, CROP // BLOCK] float64 in [0, 255], raster order.
    """
    grey = photo.astype(np.float64) @ np.asarray(LUMA)
    h, w = grey.shape
    ys = np.linspace(0, h - CROP, GRID_ROWS).astype(int)
    xs = np.linspace(0, w - CROP, GRID_COLS).astype(int)
    size = CROP // BLOCK
    return np.stack([grey[y:y + CROP, x:x + CROP].reshape(size, BLOCK, size, BLOCK).mean(axis=(1, 3))
                     for y in ys for x in xs])


@registry.DATASETS.register('sample_photos')
@gin.configurable(module='data')
class SamplePhotos(array_source.ArraySource):
    """Grey 28×28 crops of scikit-learn's two sample photographs (see the module docstring).

    Args:
      **kwargs: `ArraySource` options (preprocess, image_size, ...).
    """

    name = 'sample_photos'

    def _load_raw(self) -> array_source.RawData:
        from sklearn import datasets  # pylint: disable=g-import-not-at-top  (slow import, only when used)

        photos = datasets.load_sample_images().images
        crops = np.stack([photo_crops(p) for p in photos])  # [2, 24, 28, 28]
        rows, cols = np.divmod(np.arange(GRID_ROWS * GRID_COLS), GRID_COLS)
        train = (rows + cols) % 2 == 0
        x_train = crops[:, train].reshape(-1, *crops.shape[2:])
        x_test = crops[:, ~train].reshape(-1, *crops.shape[2:])
        y_train = np.repeat(np.arange(len(photos)), train.sum()).astype(np.int32)
        y_test = np.repeat(np.arange(len(photos)), (~train).sum()).astype(np.int32)
        return array_source.RawData(x_train, y_train, x_test, y_test, len(photos), 255.0)


def patch_rank(image: np.ndarray, kernel_size: int = 5, rtol: float = 1e-3) -> Tuple[int, int, float]:
    """Theorem 2's rank r: the dimension of the span of the image's local patches.

    Patches are taken as a stride-1 SAME convolution sees them (zero padding), one per pixel:
    the matrix X of Lemma 1 / appendix D, [H·W, K·K·C]. Full rank (r = K·K·C = m / C) guarantees
    that a one-layer CNN learns the identity from this single image.

    Args:
      image: [H, W] or [H, W, C], as the network sees it (normalised).
      kernel_size: K, odd.
      rtol: singular values below rtol × the largest count as zero.

    Returns:
      `(r, K·K·C, s_min / s_max)`: the rank, its maximum, and the conditioning of the patches.
    """
    x = np.asarray(image, np.float64)
    x = x[..., None] if x.ndim == 2 else x
    if x.ndim != 3 or kernel_size % 2 != 1:
        raise ValueError(f'patch_rank needs an [H, W(, C)] image and an odd kernel, got {x.shape}, {kernel_size}.')
    h, w, _ = x.shape
    p = kernel_size // 2
    padded = np.pad(x, ((p, p), (p, p), (0, 0)))
    patches = np.stack([padded[i:i + kernel_size, j:j + kernel_size].ravel() for i in range(h) for j in range(w)])
    s = np.linalg.svd(patches, compute_uv=False)
    full = patches.shape[1]
    if s[0] == 0:
        return 0, full, 0.0
    rank = int(np.sum(s > rtol * s[0]))
    return rank, full, float(s[min(full, len(s)) - 1] / s[0])


def pattern_images(shape: Tuple[int, int, int], names=PATTERNS) -> np.ndarray:
    """Generated test patterns of Fig. 2 (stripes, checkerboard, ring, ...), values in {0, 1}.

    Args:
      shape: (H, W, C).
      names: which of `PATTERNS`.

    Returns:
      [len(names), H, W, C] float32.
    """
    h, w, c = shape
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing='ij')
    period = max(2, min(h, w) // 7)
    iy, ix = np.meshgrid(np.arange(h), np.arange(w), indexing='ij')
    radius = np.hypot(yy, xx)
    make = {
        'checkerboard': ((iy // period + ix // period) % 2),
        'hstripes': (iy // period) % 2,
        'vstripes': (ix // period) % 2,
        'diagonal': ((iy + ix) // period) % 2,
        'ring': (np.abs(radius - 0.55) < 0.18),
        'cross': (np.abs(yy) < 0.15) | (np.abs(xx) < 0.15),
        'gradient': (xx + 1) / 2,
        'frame': (np.maximum(np.abs(yy), np.abs(xx)) > 0.7) & (np.maximum(np.abs(yy), np.abs(xx)) < 0.9),
    }
    unknown = [n for n in names if n not in make]
    if unknown:
        raise ValueError(f'Unknown patterns {unknown}; valid: {list(PATTERNS)}.')
    out = np.stack([np.asarray(make[n], np.float32) for n in names])
    return np.repeat(out[..., None], c, axis=-1)


def _match_stats(images: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Rescales each image to the mean and standard deviation of `reference` (pixel values)."""
    axes = tuple(range(1, images.ndim))
    mean = images.mean(axis=axes, keepdims=True)
    std = images.std(axis=axes, keepdims=True)
    std = np.where(std > 0, std, 1.0)
    return ((images - mean) / std * reference.std() + reference.mean()).astype(np.float32)


def select_example(split: base.Split, train_class: Optional[int], train_index: int) -> int:
    """Position in `split` of its `train_index`-th example of class `train_class` (None: any class).

    Raises:
      ValueError: the class has no such example (the message gives the class's size).
    """
    labels = np.asarray(split.true_labels)
    positions = np.arange(len(labels)) if train_class is None else np.flatnonzero(labels == train_class)
    if not 0 <= train_index < len(positions):
        known = sorted(set(labels.tolist()))
        raise ValueError(f'train_index {train_index} out of range: class {train_class!r} has {len(positions)} '
                         f'training examples (classes present: {known}).')
    return int(positions[train_index])


@registry.DATASETS.register('identity_image')
@gin.configurable(module='data')
class IdentityImage(base.DataSource):
    """One training image of any registered source, with identity targets (Zhang et al. 2020).

    Args:
      source: name in `registry.DATASETS` (configured by its own gin bindings, e.g. `data.Npz.path`).
      train_class: class of the training example (None: any class).
      train_index: which example of that class, in training-split order.
      num_other: evaluation images from the source's test split (classes in turn).
      num_random: random-pixel evaluation images (uniform, matched to the training image's
        mean and standard deviation).
      patterns: generated evaluation patterns (`PATTERNS`), matched the same way.
      eval_seed: seed of the random evaluation images.
    """

    name = 'identity_image'

    def __init__(self, source: str = 'sample_photos', train_class: Optional[int] = 0, train_index: int = 0,
                 num_other: int = 8, num_random: int = 2, patterns=PATTERNS, eval_seed: int = 0):
        if source == self.name:
            raise ValueError(f'identity_image cannot wrap itself; choose one of {registry.DATASETS.names()}.')
        registry.DATASETS.get(source)  # unknown names fail here, listing the known ones
        if num_other < 0 or num_random < 0:
            raise ValueError(f'num_other and num_random must be >= 0, got {num_other}, {num_random}.')
        self._source, self._train_class, self._train_index = source, train_class, int(train_index)
        self._num_other, self._num_random = int(num_other), int(num_random)
        self._patterns, self._eval_seed = tuple(patterns), int(eval_seed)

    def load_source(self, seed: Optional[int] = None) -> base.Data:
        """The wrapped source's data (images [n, H, W, C]), as its gin bindings configure it."""
        data = registry.DATASETS.get(self._source)().load(seed=seed)
        if np.asarray(data.train.images).ndim != 4:
            raise ValueError(f'identity_image needs [n, H, W, C] images from {self._source!r}, got shape '
                             f'{np.asarray(data.train.images).shape}; do not set flatten for it.')
        return data

    def load(self, seed: Optional[int] = None) -> base.Data:
        data = self.load_source(seed)
        pos = select_example(data.train, self._train_class, self._train_index)
        x = np.asarray(data.train.images[pos:pos + 1], np.float32)
        label = np.asarray(data.train.true_labels[pos:pos + 1])
        train = base.Split(x, x.copy(), label, np.asarray(data.train.index[pos:pos + 1], np.int64))
        test_images, test_labels = [], []
        test_true = np.asarray(data.test.true_labels)
        classes = sorted(set(test_true.tolist()))
        used = {c: 0 for c in classes}
        for k in range(self._num_other):
            c = classes[k % len(classes)]
            candidates = np.flatnonzero(test_true == c)
            if used[c] < len(candidates):
                test_images.append(data.test.images[candidates[used[c]]])
                test_labels.append(c)
                used[c] += 1
        extra = []
        if self._patterns:
            extra.append(pattern_images(x.shape[1:], self._patterns))
        if self._num_random:
            rng = np.random.default_rng(self._eval_seed)
            extra.append(rng.uniform(size=(self._num_random, *x.shape[1:])).astype(np.float32))
        if extra:
            extra = _match_stats(np.concatenate(extra), x[0])
            test_images += list(extra)
            test_labels += [-1] * len(extra)
        images = np.stack(test_images).astype(np.float32) if test_images else np.zeros((0, *x.shape[1:]), np.float32)
        test = base.Split(images, images.copy(), np.asarray(test_labels, np.int32), np.arange(len(images)))
        rank, full, cond = patch_rank(x[0])
        logging.info('identity_image: training example %d of %r (class %s, id %d), shape %s; Theorem 2 patch '
                     'rank r = %d of %d (5x5 patches, s_min/s_max %.3g); %d evaluation images.', pos,
                     self._source, label[0], train.index[0], x.shape[1:], rank, full, cond, len(images))
        info = base.DatasetInfo(f'identity_image/{data.info.name}', data.info.num_classes, tuple(x.shape[1:]))
        return base.Data(train, test, info)
