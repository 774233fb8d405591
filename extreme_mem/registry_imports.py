"""Imports every plugin module so that its `@register` decorator runs.

The only module that imports "everything"; launch scripts and tests import it (DESIGN.md
section 2). It walks the plugin subpackages, so a new dataset, model, metric or experiment
module is registered by existing in its folder: no list to keep in step.

A module that fails to import is logged with its error and left out, so one broken plugin does
not take the others down; `FAILED` lists them, and `tests/registry_test.py` requires it empty.
"""

import importlib
import pkgutil

from absl import logging

from extreme_mem import losses  # noqa: F401  pylint: disable=unused-import

PLUGIN_PACKAGES = ('data', 'models', 'metrics', 'experiments', 'pergrad', 'summaries', 'train', 'geometry')
FAILED: dict = {}  # module name -> the error that kept it out


def _import_all() -> None:
    for package_name in PLUGIN_PACKAGES:
        package = importlib.import_module(f'extreme_mem.{package_name}')
        for module in pkgutil.iter_modules(package.__path__):
            name = f'extreme_mem.{package_name}.{module.name}'
            try:
                importlib.import_module(name)
            except Exception as e:  # pylint: disable=broad-except  (reported, see module docstring)
                FAILED[name] = e
                logging.error('Plugin module %s failed to import and is unavailable: %s: %s',
                              name, type(e).__name__, e)


_import_all()
