"""`load_run`: a finished run's model, configuration and results, from its directory.

A run that ends `done` exports its model as `model.keras` (`SingleRun.export_model`); every
custom layer and activation of the toolkit is a registered serializable Keras object, so
`keras.models.load_model` rebuilds it without the code that trained it.
"""

import dataclasses
import os
import pathlib
from typing import Any, Optional

from extreme_mem.summaries import results as results_lib

MODEL_FILENAME = 'model.keras'


@dataclasses.dataclass
class Run:
    """A loaded run.

    Attributes:
      model: the trained Keras model (None when `with_model=False`).
      config: the operative gin config the run used (text of `operative_config.gin`).
      results: the `results.json` record.
      workdir: the run directory.
    """

    model: Optional[Any]
    config: str
    results: dict
    workdir: pathlib.Path


def load_run(workdir: os.PathLike, with_model: bool = True) -> Run:
    """Loads the run in `workdir`.

    Raises:
      FileNotFoundError: `workdir` holds no run, or (with `with_model`) no exported model: the
        run did not finish (`status` says why).
    """
    workdir = pathlib.Path(workdir)
    record = results_lib.read(workdir)
    if record is None:
        raise FileNotFoundError(f'{workdir} holds no run ({results_lib.FILENAME} is missing).')
    config_path = workdir / 'operative_config.gin'
    config_text = config_path.read_text() if config_path.exists() else ''
    model = None
    if with_model:
        path = workdir / MODEL_FILENAME
        if not path.exists():
            raise FileNotFoundError(f'{path} is missing: the run is {record.get("status")!r}; only finished runs '
                                    'export their model (use with_model=False to read its results).')
        import keras  # pylint: disable=g-import-not-at-top
        from extreme_mem import registry_imports  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

        model = keras.models.load_model(path)
    return Run(model=model, config=config_text, results=record, workdir=workdir)
