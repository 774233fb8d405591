"""TensorFlow Datasets sources: `cifar10`, `cifar100`, `svhn_cropped`, `mnist`, `fashion_mnist`.

Each reads an already prepared tfds dataset from `data_dir` with `download=False` semantics
(`builder.as_dataset`, never `download_and_prepare`), so a missing dataset fails in well under a
second with `DatasetNotPreparedError` saying how to prepare it, instead of tfds' minutes of
network retries. Prepare a dataset on a machine with network and copy the directory over:
  python -c "import tensorflow_datasets as tfds; tfds.builder('cifar10', data_dir='/data/tfds').download_and_prepare()"
(the `tfds build` command line does the same but needs `pip install apache-beam`), then point
the sources at it.

Gin bindings (module `data`); `data.TfdsSource.<arg>` applies to all five sources,
`data.<Source>.<arg>` to one (`Cifar10`, `Cifar100`, `SvhnCropped`, `Mnist`, `FashionMnist`):
  data.TfdsSource.data_dir = '/data/tensorflow_datasets'   # None: $TFDS_DATA_DIR or ~/tensorflow_datasets
  data.TfdsSource.train_split = 'train'                    # any tfds split string, e.g. 'train[:10%]'
  data.TfdsSource.test_split = 'test'
  data.Cifar100.label_key = 'label'                        # or 'coarse_label' (20 classes)
plus every `ArraySource` option, e.g. `data.Mnist.preprocess = 'mnist'` (default 'unit':
values / 255), `data.Cifar10.label_noise = 0.2`.

Splits are read in batches of `_READ_BATCH` examples (not tfds' `batch_size=-1`, which asks
`info.splits` for the size; that is empty under `tfds.testing.mock_data`).
"""

from typing import Optional

import gin
import numpy as np
from absl import logging

from extreme_mem import registry
from extreme_mem.data import array_source
from extreme_mem.data import base

_READ_BATCH = 4096  # examples per tf.data batch while reading a split into memory


class DatasetNotPreparedError(base.DataError, FileNotFoundError):
    """A tfds dataset has no prepared files in the configured data_dir (and cannot be downloaded)."""


@gin.configurable(module='data')
class TfdsSource(array_source.ArraySource):
    """Base of the tfds-backed sources; subclasses set `name` (the tfds and registry name).

    Args:
      data_dir: tfds data directory holding the prepared dataset; None uses tfds' default
        ($TFDS_DATA_DIR or ~/tensorflow_datasets).
      train_split: tfds split string for the training split.
      test_split: tfds split string for the test split.
      label_key: feature holding the class id.
      **kwargs: `ArraySource` options.
    """

    name = ''

    def __init__(
        self,
        data_dir: Optional[str] = None,
        train_split: str = 'train',
        test_split: str = 'test',
        label_key: str = 'label',
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._data_dir = data_dir
        self._train_split = train_split
        self._test_split = test_split
        self._label_key = label_key

    def describe(self) -> str:
        where = self._data_dir or 'the default data_dir'
        return f'tfds dataset {self.name!r} ({where})'

    def _not_prepared(self, builder, error: Exception) -> DatasetNotPreparedError:
        default = 'the default data_dir ($TFDS_DATA_DIR or ~/tensorflow_datasets)'
        where = repr(self._data_dir) if self._data_dir else default
        cls = type(self).__name__
        return DatasetNotPreparedError(
            f'tfds dataset {self.name!r} is not prepared in {where} (looked for {builder.data_dir}), and this source '
            f'never downloads. Prepare it on a machine with network:\n'
            f'  python -c "import tensorflow_datasets as tfds; '
            f'tfds.builder(\'{self.name}\', data_dir=\'/path/to/tensorflow_datasets\').download_and_prepare()"\n'
            f'copy that directory here, and point the source at it:\n'
            f'  --gin_param="data.TfdsSource.data_dir=\'/path/to/tensorflow_datasets\'"   (all tfds sources)\n'
            f'  --gin_param="data.{cls}.data_dir=\'/path/to/tensorflow_datasets\'"   (this one)\n'
            f'tfds said: {error}'
        )

    def _read(self, builder, split: str):
        """Reads one split into memory: ([n, H, W, C] uint8, [n] labels as stored, e.g. int64).

        Labels are not cast here: `ArraySource.load` validates them first, so none can wrap.
        """
        try:
            ds = builder.as_dataset(split=split, shuffle_files=False)
        except AssertionError as e:  # tfds' "could not find data in <dir>" (download=False path)
            raise self._not_prepared(builder, e) from e
        key = self._label_key
        ds = ds.map(lambda ex: (ex['image'], ex[key])).batch(_READ_BATCH)
        images, labels = [], []
        for x, y in ds.as_numpy_iterator():
            images.append(x)
            labels.append(y)
        if not images:
            raise base.DataError(f'{self.describe()}: the tfds split {split!r} is empty; choose a split string that '
                                 f'selects examples, e.g. {"train" if split != "train" else "test"!r} or "train[:10%]".')
        return np.concatenate(images), np.concatenate(labels)

    def _load_raw(self) -> array_source.RawData:
        import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (heavy; only when used)

        builder = tfds.builder(self.name, data_dir=self._data_dir)
        x_train, y_train = self._read(builder, self._train_split)
        x_test, y_test = self._read(builder, self._test_split)
        num_classes = int(builder.info.features[self._label_key].num_classes)
        logging.info('tfds %s: read %d train / %d test examples from %s.', self.name, len(x_train), len(x_test),
                     builder.data_dir)
        return array_source.RawData(x_train, y_train, x_test, y_test, num_classes, 255.0)


@registry.DATASETS.register('cifar10')
@gin.configurable(module='data')
class Cifar10(TfdsSource):
    """CIFAR-10: 50,000 / 10,000 32x32x3 images, 10 classes (Mehta et al. 2021 appendix C)."""

    name = 'cifar10'


@registry.DATASETS.register('cifar100')
@gin.configurable(module='data')
class Cifar100(TfdsSource):
    """CIFAR-100: 50,000 / 10,000 32x32x3 images, 100 classes (Stephenson et al. 2021)."""

    name = 'cifar100'


@registry.DATASETS.register('svhn_cropped')
@gin.configurable(module='data')
class SvhnCropped(TfdsSource):
    """SVHN cropped digits: 73,257 / 26,032 32x32x3 images, 10 classes (Mehta et al. 2021)."""

    name = 'svhn_cropped'


@registry.DATASETS.register('mnist')
@gin.configurable(module='data')
class Mnist(TfdsSource):
    """MNIST: 60,000 / 10,000 28x28x1 images, 10 classes (Zhang et al. 2020 use preprocess='mnist')."""

    name = 'mnist'


@registry.DATASETS.register('fashion_mnist')
@gin.configurable(module='data')
class FashionMnist(TfdsSource):
    """Fashion-MNIST: 60,000 / 10,000 28x28x1 images, 10 classes."""

    name = 'fashion_mnist'
