"""Checks every dataset source runs at load, so bad data fails before training starts.

Raw arrays (`check_images`, `class_ids`) are checked before any cast, so a label like 2**40
cannot wrap silently to another class id in int32, and a NaN cannot show up later as a diverged
loss. The loaded `Data` (`check_data`) is checked once more after preprocessing and subsetting.

Decisions (each a `base.DataError` naming the split, the first bad index or value, and the fix;
or a logged warning where a run stays meaningful):

| condition                                        | outcome                                       |
|--------------------------------------------------|-----------------------------------------------|
| label not an integer, negative, or >= 2**31      | error (before the int32 cast)                 |
| label >= num_classes (declared or inferred)      | error                                         |
| non-finite input (NaN/Inf), raw or preprocessed  | error naming the split and first bad example  |
| empty train or test split                        | error (a run without a test split reports no  |
|                                                  | test numbers at all, so we refuse it)         |
| num_classes < 2                                  | error (loss 0, accuracy 1 whatever the model) |
| a single class in the training labels            | warning (meaningful for single-example        |
|                                                  | studies: Zhang et al. 2020, "Identity Crisis")|
| test labels in range but unseen in training      | warning (they can only count as errors)       |

Where a source infers `num_classes` (e.g. `npz`), it infers it from the training labels only, so
an unseen test label beyond them is an out-of-range error, not a silently larger model.
"""

from typing import Optional

import numpy as np
from absl import logging

from extreme_mem.data import base

INT32_MAX = int(np.iinfo(np.int32).max)
_CHUNK = 4096  # examples per chunk when scanning images for non-finite values


def _first(mask: np.ndarray) -> Optional[int]:
    """Position of the first True in a 1-D bool mask, or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _item(value):
    """A numpy scalar as a plain Python number, for messages."""
    return value.item() if hasattr(value, 'item') else value


def check_numeric(x: np.ndarray, name: str) -> None:
    """Raises `DataError` unless `x` holds real numbers (bool, int, uint or float dtype).

    Args:
      x: [n, ...] array.
      name: what to call it in messages, e.g. "/data/my.npz: x_train".
    """
    if np.asarray(x).dtype.kind not in 'biuf':
        raise base.DataError(f'{name} must hold real numbers (int, uint or float), got dtype {np.asarray(x).dtype}.')


def check_finite(x: np.ndarray, name: str, split: str) -> None:
    """Raises `DataError` naming the split and the first example holding NaN or Inf.

    Integer arrays are finite by construction and skipped. Scans in chunks of `_CHUNK`
    examples, so no full-size boolean temporary is made.

    Args:
      x: [n, ...] images or features.
      name: what to call `x` in messages, e.g. "dataset 'npz' (/data/my.npz): x_train".
      split: 'train' or 'test'.
    """
    x = np.asarray(x)
    if x.dtype.kind not in 'fc' or x.size == 0:
        return
    for start in range(0, len(x), _CHUNK):
        block = x[start : start + _CHUNK]
        ok = np.isfinite(block).reshape(len(block), -1).all(axis=1)
        bad = _first(~ok)
        if bad is not None:
            i = start + bad
            example = np.ravel(x[i])
            value = _item(example[_first(~np.isfinite(example))])
            raise base.DataError(
                f'{name}: non-finite input in the {split} split: example {i} holds {value} (first bad '
                f'example). Inputs must be finite numbers; repair or drop example {i}.'
            )


def class_ids(y: np.ndarray, name: str, num_classes: Optional[int] = None, hint: str = '') -> np.ndarray:
    """Validates integer class ids before casting them to int32.

    Args:
      y: [n] labels of any real dtype (floats must be integer-valued).
      name: what to call `y` in messages, e.g. "/data/my.npz: y_train".
      num_classes: labels must lie in range(num_classes); None only requires that they fit int32.
      hint: appended to the out-of-range message: where `num_classes` came from, how to change it.

    Returns:
      [n] int32 labels, equal in value to `y`.

    Raises:
      DataError: `y` is not 1-D, or holds a label that is not an integer, is negative, does not
        fit int32, or is >= `num_classes`; the message names the first such index and value.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise base.DataError(f'{name} must be [n] class ids, got shape {y.shape}.')
    if y.dtype.kind not in 'iuf':
        raise base.DataError(f'{name} must hold integer class ids, got dtype {y.dtype}.')
    if y.dtype.kind == 'f':
        with np.errstate(invalid='ignore'):
            bad = _first(~np.isfinite(y) | (y != np.round(y)))
        if bad is not None:
            raise base.DataError(f'{name}[{bad}] = {_item(y[bad])} is not an integer class id.')
    bad = _first(y < 0)
    if bad is not None:
        raise base.DataError(f'{name}[{bad}] = {_item(y[bad])} is negative; class ids are 0, 1, 2, ...')
    bad = _first(y > INT32_MAX)
    if bad is not None:
        raise base.DataError(
            f'{name}[{bad}] = {_item(y[bad])} does not fit a 32-bit class id (at most {INT32_MAX}); '
            f'class ids must be 0 .. num_classes - 1.'
        )
    if num_classes is not None:
        bad = _first(y >= num_classes)
        if bad is not None:
            suffix = f' ({hint})' if hint else ''
            raise base.DataError(
                f'{name}[{bad}] = {_item(y[bad])} is outside range({num_classes}) of the {num_classes} '
                f'classes{suffix}.'
            )
    return y.astype(np.int32)


def check_not_empty(n: int, where: str, split: str, cause: str = '') -> None:
    """Raises `DataError` if a split has no examples.

    Args:
      n: the split's number of examples.
      where: the source, e.g. "dataset 'digits'".
      split: 'train' or 'test'.
      cause: what emptied it, e.g. "after the subset options classes=[99]".
    """
    if n == 0:
        reason = f' {cause}' if cause else ''
        raise base.DataError(
            f'{where}: the {split} split is empty{reason}. Every run needs at least one training and '
            f'one test example (the test split gives the reported test/loss and test/accuracy).'
        )


def check_data(data: base.Data, where: str, cause: str = '') -> None:
    """Checks a loaded `Data` and logs a warning for each doubtful but meaningful condition.

    See the module docstring for the table of errors and warnings. Integer training and test
    labels are checked against `data.info.num_classes`; float labels are regression targets and
    are only checked for finiteness.

    Args:
      data: what a source's `load` returns.
      where: the source, for messages, e.g. "dataset 'npz' (/data/my.npz)".
      cause: what may have emptied a split, e.g. the subset options that were applied.

    Raises:
      DataError: an empty split, fewer than 2 classes, out-of-range labels, non-finite inputs.
    """
    splits = (('train', data.train), ('test', data.test))
    for split, s in splits:
        check_not_empty(s.num_examples, where, split, cause)
    k = data.info.num_classes
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise base.DataError(
            f'{where}: num_classes is {k!r}; classification needs at least 2 classes (with one, the loss '
            f'is 0 and the accuracy 1 whatever the model does).'
        )
    integer_labels = True
    for split, s in splits:
        check_finite(s.images, f'{where}: {split} images after preprocessing', split)
        labels = np.asarray(s.labels)
        if labels.dtype.kind == 'f':  # regression targets
            integer_labels = False
            check_finite(labels, f'{where}: {split} targets', split)
        else:
            class_ids(labels, f'{where}: {split} labels', int(k))
    if not integer_labels:
        return
    train_classes = np.unique(data.train.labels)
    if len(train_classes) == 1:
        logging.warning(
            '%s: every training label is class %d (%d examples, %d classes); a constant output fits them. '
            'Meaningful only for single-class studies (e.g. Zhang et al. 2020, "Identity Crisis").',
            where, int(train_classes[0]), data.train.num_examples, k,
        )
    unseen = ~np.isin(data.test.labels, train_classes)
    if unseen.any():
        classes = np.unique(np.asarray(data.test.labels)[unseen])
        shown = ', '.join(str(int(c)) for c in classes[:10]) + (', ...' if len(classes) > 10 else '')
        logging.warning(
            '%s: %d of %d test examples have labels never seen in training (classes %s); they can only '
            'count as errors in test/accuracy.', where, int(unseen.sum()), data.test.num_examples, shown,
        )
