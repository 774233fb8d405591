"""Shared fakes for tests: tiny synthetic datasets and a clean gin state."""

import gin
import numpy as np

from extreme_mem.data import base

SHARED = __import__('pathlib').Path(__file__).resolve().parents[1].parent / 'shared'


def blobs(num_train: int = 64, num_test: int = 32, num_classes: int = 3, dim: int = 5, seed: int = 0,
          separation: float = 3.0) -> base.Data:
    """Gaussian blobs, one per class: linearly separable for large `separation`."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(num_classes, dim)) * separation

    def split(n, offset):
        labels = (np.arange(n) % num_classes).astype(np.int32)
        images = (centers[labels] + rng.normal(size=(n, dim))).astype(np.float32)
        return base.Split(images, labels, labels.copy(), np.arange(n, dtype=np.int64))

    return base.Data(split(num_train, 0), split(num_test, 1), base.DatasetInfo('blobs', num_classes, (dim,)))


class GinCleanMixin:
    """Clears gin before and after each test (gin is global state)."""

    def setUp(self):
        super().setUp()
        gin.clear_config(clear_constants=True)
        gin.enter_interactive_mode()

    def tearDown(self):
        gin.clear_config(clear_constants=True)
        gin.exit_interactive_mode()
        super().tearDown()
