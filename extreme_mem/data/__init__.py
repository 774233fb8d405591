"""Datasets: in-memory splits with per-example provenance (cheap to import: docstring only).

- `base`: the contract (`Split`, `RelabeledSplit`, `Data`, `DatasetInfo`, `DataSource`) and
  `DataError`, raised for every bad user data or data option.
- `validation`: the checks every source runs at load (labels, non-finite inputs, empty splits).
- `pipeline`: `tf.data` train/eval batches over a `Split`.
- `array_source`: `ArraySource`, the shared `load(seed)` (preprocess, subsets, label transforms).
- `preprocessing`, `transforms`: pure numpy pixel scaling and label/subset transforms.
- sources (registered in `registry.DATASETS`): `digits`, `npz`, `tfds_sources` (`cifar10`,
  `cifar100`, `svhn_cropped`, `mnist`, `fashion_mnist`).
"""
