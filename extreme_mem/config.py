"""Gin glue: parse config files and bindings, save the operative config, shared flags.

Gin `include` paths and `--gin_file` paths may be relative to the repository root (where
`gin/` lives) as well as to the working directory. A misspelled binding or unknown configurable
fails at parse time, before any training, with gin's message and the offending file.
"""

import collections.abc
import hashlib
import inspect
import json
import os
import pathlib
import tempfile
import tokenize
import types
import typing
from typing import Optional, Sequence

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
    global _SEARCH_PATH_ADDED
    if not _SEARCH_PATH_ADDED:
        gin.add_config_file_search_path(str(REPO_ROOT))
        _SEARCH_PATH_ADDED = True


_SEARCH_PATH_ADDED = False
# What the last `parse_gin` call parsed: resolved file paths and bindings, in order. A sweep
# launches each of its runs with exactly these, plus the run's own bindings.
_PARSED: dict = {'files': (), 'bindings': ()}


def parse_gin(files: Sequence[str] = (), bindings: Sequence[str] = (), finalize: bool = True) -> None:
    """Parses gin `files` in order, then `bindings`, and records them (`parsed_files_and_bindings`).

    Every configurable must be imported first: launchers and tests import
    `extreme_mem.registry_imports`.

    Args:
      files: gin file paths (absolute, cwd-relative or repo-relative).
      bindings: gin binding strings, e.g. `"INIT_SCALE = 10.0"`.
      finalize: lock the config after parsing.

    Raises:
      ConfigError: a file is missing, has a syntax error, binds an unknown configurable or
        parameter, or gives a parameter a value of the wrong type (`check_types`); the message
        names the file, binding or parameter.
    """
    _register_search_path()
    resolved = []
    for f in files:
        path = _resolve(f)
        try:
            gin.parse_config_file(path)
        except (ValueError, KeyError, ImportError, IOError, SyntaxError, TypeError, tokenize.TokenError) as e:
            raise ConfigError(f'In gin file {path}: {e}') from e
        resolved.append(str(pathlib.Path(path).resolve()))
    for b in bindings:
        try:
            gin.parse_config(b)
        except (ValueError, KeyError, ImportError, SyntaxError, TypeError, tokenize.TokenError) as e:
            raise ConfigError(f'In --gin_param {b!r}: {e}') from e
    _PARSED['files'], _PARSED['bindings'] = tuple(resolved), tuple(bindings)
    check_types()
    if finalize:
        gin.finalize()


def _accepts(hint, value) -> Optional[bool]:
    """Whether `value` fits type hint `hint`; None when the hint is not one we check."""
    origin = typing.get_origin(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is typing.Union or (types.UnionType is not None and isinstance(hint, types.UnionType)):
        verdicts = [_accepts(h, value) for h in typing.get_args(hint)]
        return None if None in verdicts and not any(verdicts) else any(v for v in verdicts if v)
    if hint is type(None):
        return value is None
    if hint in (list, tuple) or origin in (list, tuple, collections.abc.Sequence):
        return isinstance(value, (list, tuple))
    if hint is dict or origin in (dict, collections.abc.Mapping):
        return isinstance(value, dict)
    return None


def check_types() -> None:
    """Checks every literal binding against its parameter's type hint.

    `learning_rate = 'abc'` for a `float` or `num_steps = True` for an `int` fail here, at parse
    time, naming the binding, instead of deep inside training. Macros and references are
    checked where they are used only if they resolve to literals; unannotated parameters and
    hints other than bool/int/float/str/None/sequences/mappings (and unions of them) are not
    checked.

    Raises:
      ConfigError: naming the binding, its value and the expected type.
    """
    for key in config_dict():
        if '.' not in key:
            continue  # a macro: checked where it is used
        name, _, param = key.rpartition('.')
        try:
            target = gin.get_configurable(name.rsplit('/', 1)[-1])
            value = gin.query_parameter(key)
        except (ValueError, KeyError):
            continue
        fn = target.__init__ if inspect.isclass(target) else target
        try:
            hint = typing.get_type_hints(fn).get(param)
        except Exception:  # pylint: disable=broad-except  (unresolvable annotations are not checked)
            continue
        if hint is None or type(value).__module__.startswith('gin'):
            continue
        if _accepts(hint, value) is False:
            expected = getattr(hint, '__name__', None) or str(hint).replace('typing.', '')
            raise ConfigError(f'{key} = {value!r}: expected {expected}, got {type(value).__name__}.')


def parsed_files_and_bindings() -> tuple:
    """`(files, bindings)` of the last `parse_gin` call: files resolved to absolute paths."""
    return _PARSED['files'], _PARSED['bindings']


def write_atomic(path: os.PathLike, text: str) -> None:
    """Writes `text` to `path` through a temp file + rename, so readers never see half a file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the umask's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
    """The parsed config as `{'[scope/]Configurable.param' or 'MACRO': value text}`.

    Read from `gin.config_str()` (gin's canonical text of every binding: sorted, values
    pretty-printed), so two configs with the same bindings give the same dict whatever file,
    include or `--gin_param` they came from.
    """
    out, pending = {}, ''
    for line in gin.config_str().splitlines():
        if not pending and (not line.strip() or line.startswith('#') or line.startswith(('import ', 'from '))):
            continue
        pending += line.strip() if pending else line
        if pending.endswith('\\'):
            pending = pending[:-1].rstrip() + ' '
            continue
        key, _, value = pending.partition(' = ')
        out[key.strip()] = value.strip()
        pending = ''
    return out


def config_identity(exclude: Sequence[str] = (), extra: Optional[dict] = None) -> tuple[str, dict]:
    """A hash of the parsed bindings, and the bindings it covers.

    Args:
      exclude: configurable names (e.g. a sweep experiment's class name) whose bindings do not
        change what a run computes, so they are left out.
      extra: other settings that define the run (e.g. `{'seed': 0}`), added as text.

    Returns:
      `(sha256 hex digest, {key: value text})`.
    """
    skip = tuple(exclude)
    bindings = {k: v for k, v in config_dict().items()
                if k.rsplit('.', 1)[0].rsplit('/', 1)[-1].rsplit('.', 1)[-1] not in skip}
    bindings.update({k: repr(v) for k, v in (extra or {}).items()})
    digest = hashlib.sha256(json.dumps(bindings, sort_keys=True).encode()).hexdigest()
    return digest, bindings


def describe_differences(old: dict, new: dict, limit: int = 6) -> str:
    """'Trainer.learning_rate: 0.01 -> 0.5; ...' for the bindings that differ between two configs."""
    keys = sorted(set(old) | set(new))
    diffs = [f'{k}: {old.get(k, "(unset)")} -> {new.get(k, "(unset)")}' for k in keys if old.get(k) != new.get(k)]
    more = f' (and {len(diffs) - limit} more)' if len(diffs) > limit else ''
    return '; '.join(diffs[:limit]) + more


def define_flags() -> dict:
    """Flags shared by every launch script (DESIGN.md section 3); returns them by name."""
    from absl import flags  # pylint: disable=g-import-not-at-top

    return {
        'experiment': flags.DEFINE_string('experiment', 'single_run', 'Name in registry.EXPERIMENTS.'),
        'gin_file': flags.DEFINE_multi_string('gin_file', [], 'Gin files, parsed in order (repo-relative ok).'),
        'gin_param': flags.DEFINE_multi_string('gin_param', [], "Gin bindings applied after the files, e.g. 'INIT_SCALE = 10.0'."),
        'workdir': flags.DEFINE_string('workdir', None, 'Run (or sweep) directory.'),
        'seed': flags.DEFINE_integer('seed', 0, 'Global seed (weights, data order, label transforms).'),
        'overwrite': flags.DEFINE_boolean(
            'overwrite', False, 'Start over the runs whose recorded configuration differs from this one, or whose '
            'checkpoints cannot be read (their old files are deleted); matching runs are still skipped or resumed.'),
        'verbose': flags.DEFINE_boolean('verbose', False, 'Show the traceback of configuration, data and workdir errors.'),
    }
