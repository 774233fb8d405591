"""Imports every plugin module so that its `@register` decorator runs.

The only module that imports "everything"; launch scripts and tests import it (DESIGN.md
section 2). It walks the plugin subpackages, so a new dataset, model, metric or experiment
module is registered by existing in its folder: no list to keep in step.
"""

import importlib
import pkgutil

from extreme_mem import losses  # noqa: F401  pylint: disable=unused-import

PLUGIN_PACKAGES = ('data', 'models', 'metrics', 'experiments', 'pergrad', 'summaries', 'train', 'geometry')


def _import_all() -> None:
    for package_name in PLUGIN_PACKAGES:
        package = importlib.import_module(f'extreme_mem.{package_name}')
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f'extreme_mem.{package_name}.{module.name}')


_import_all()
