"""Gin glue: parse config files and bindings, save the operative config, shared flags.

Gin `include` paths and `--gin_file` paths may be relative to the repository root (where
`gin/` lives) as well as to the working directory. A misspelled binding or unknown configurable
fails at parse time, before any training, with gin's message and the offending file.
"""

import os
import pathlib
import tempfile
from typing import Sequence

import gin

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A gin file or binding could not be parsed."""


def _resolve(path: str) -> str:
    p = pathlib.Path(path)
    if p.is_absolute() or p.exists():
        return str(p)
    candidate = REPO_ROOT / p
    if candidate.exists():
        return str(candidate)
    raise ConfigError(f'Gin file {path!r} not found (looked in {os.getcwd()} and {REPO_ROOT}).')


def _register_search_path() -> None:
    if str(REPO_ROOT) not in gin.config._LOCATION_PREFIXES:  # pylint: disable=protected-access
        gin.add_config_file_search_path(str(REPO_ROOT))


def parse_gin(files: Sequence[str] = (), bindings: Sequence[str] = (), finalize: bool = True) -> None:
    """Parses gin `files` in order, then `bindings`.

    Args:
      files: gin file paths (absolute, cwd-relative or repo-relative).
      bindings: gin binding strings, e.g. `"INIT_SCALE = 10.0"`.
      finalize: lock the config after parsing.

    Raises:
      ConfigError: a file is missing or a binding/configurable is unknown; the message names
        the file (or binding) and carries gin's own message.
    """
    from extreme_mem import registry_imports  # noqa: F401  (makes every configurable known)

    _register_search_path()
    for f in files:
        path = _resolve(f)
        try:
            gin.parse_config_file(path)
        except (ValueError, KeyError, ImportError, IOError, SyntaxError) as e:
            raise ConfigError(f'In gin file {path}: {e}') from e
    for b in bindings:
        try:
            gin.parse_config(b)
        except (ValueError, KeyError, ImportError, SyntaxError) as e:
            raise ConfigError(f'In --gin_param {b!r}: {e}') from e
    if finalize:
        gin.finalize()


def write_atomic(path: os.PathLike, text: str) -> None:
    """Writes `text` to `path` through a temp file + rename, so readers never see half a file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_operative_config(run_dir: os.PathLike, started: bool = True) -> None:
    """Writes `operative_config.gin`.

    Args:
      run_dir: the run directory.
      started: True once every configurable was called: writes gin's operative config (every
        parameter the run used, defaults included). False at the start of a run: writes the
        parsed config, so an interrupted run still records what it was asked to do.
    """
    text = gin.operative_config_str() if started else gin.config_str()
    write_atomic(pathlib.Path(run_dir) / 'operative_config.gin', text)


def config_dict() -> dict:
    """The parsed config as `{'Configurable.param': repr(value)}` for results.json."""
    out = {}
    for (scope, selector), params in gin.config._CONFIG.items():  # pylint: disable=protected-access
        name = f'{scope}/{selector}' if scope else selector
        for k, v in params.items():
            out[f'{name}.{k}'] = repr(v)
    return out


def define_flags() -> dict:
    """Flags shared by every launch script (DESIGN.md section 3); returns them by name."""
    from absl import flags  # pylint: disable=g-import-not-at-top

    return {
        'experiment': flags.DEFINE_string('experiment', 'single_run', 'Name in registry.EXPERIMENTS.'),
        'gin_file': flags.DEFINE_multi_string('gin_file', [], 'Gin files, parsed in order (repo-relative ok).'),
        'gin_param': flags.DEFINE_multi_string('gin_param', [], "Gin bindings applied after the files, e.g. 'INIT_SCALE = 10.0'."),
        'workdir': flags.DEFINE_string('workdir', None, 'Run (or sweep) directory.'),
        'seed': flags.DEFINE_integer('seed', 0, 'Global seed (weights, data order, label transforms).'),
    }
