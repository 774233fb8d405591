"""Imports every plugin module so that its `@register` decorator runs.

The only module that imports "everything"; launch scripts, tests and `config.parse_gin` import it.
"""

# pylint: disable=unused-import
from extreme_mem import losses  # noqa: F401
from extreme_mem.data import digits, npz, tfds_sources  # noqa: F401
from extreme_mem.experiments import base as experiments_base  # noqa: F401
from extreme_mem.experiments import mehta2021_extreme_memorization  # noqa: F401
from extreme_mem.metrics import (  # noqa: F401
    gradient_alignment,
    gradient_confusion,
    gradient_diversity,
    gradient_stiffness,
    manifold_geometry,
    representation_alignment,
    subset_accuracy,
    weight_norm,
)
from extreme_mem.models import applications, convnet, mlp  # noqa: F401
from extreme_mem.pergrad import engine  # noqa: F401
from extreme_mem.summaries import writers  # noqa: F401
from extreme_mem.train import schedules, trainer  # noqa: F401
