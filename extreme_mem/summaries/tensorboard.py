"""TensorBoard beyond scalars: HParams, config text, report images, and the sweep's run links.

Layout (DESIGN.md section 3; docs/design.md "TensorBoard"): a run writes scalars to
`<run>/tensorboard/<split>/` (`writers.TensorBoardWriter`) and its HParams and operative config to
`<run>/tensorboard/` itself, so the HParams plugin sees one session per run whose metrics are the
split runs' scalars (`train/accuracy`, `test/loss`, ...; the table shows their last, i.e. final,
values). A sweep links `<sweep>/tensorboard/<run name>` -> `../runs/<run name>/tensorboard`
(TensorBoard follows directory symlinks), and writes its report figures to
`<sweep>/tensorboard/report/`, so `tensorboard --logdir=<sweep>/tensorboard` lists the runs as
`INIT_SCALE=10/train` and the whole sweep is one sortable HParams table.
"""

import ast
import inspect
import os
import pathlib
from typing import Mapping, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf
from absl import logging

CONFIG_TAG = 'config/operative_gin'
REPORT_RUN = 'report'
MAX_HPARAM_TEXT = 200  # characters of a non-scalar hparam value kept (HParams table cells)


def logdir(run_dir: os.PathLike) -> pathlib.Path:
    """The TensorBoard directory of a run (its session run; splits are its subdirectories)."""
    return pathlib.Path(run_dir) / 'tensorboard'


def hparam_value(value):
    """`value` as an HParams value (bool, int, float or str; anything else as its short text)."""
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    if value is None:
        return 'None'
    return str(value)[:MAX_HPARAM_TEXT]


def binding_hparams(bindings: Sequence[str]) -> dict:
    """`{key: value}` of gin binding strings `'key = value'` (later bindings win).

    Values are Python literals where they parse (`INIT_SCALE = 10.0` -> 10.0), else the text
    (`models.mlp.activation = @sin` -> '@sin'); a binding without '=' is skipped.
    """
    out = {}
    for binding in bindings:
        key, sep, text = str(binding).partition('=')
        if not sep or not key.strip():
            continue
        text = text.strip()
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        out[key.strip()] = hparam_value(value)
    return out


# The trainer knobs every run's HParams show (their gin value, else the constructor default).
TRAINER_KNOBS = ('optimizer', 'learning_rate', 'schedule', 'momentum', 'weight_decay', 'batch_size', 'num_steps',
                 'stop_accuracy')


def configured(configurable, names: Sequence[str]) -> dict:
    """`{name: value}` of `configurable`'s parameters: the gin binding, else the signature default."""
    bound = gin.get_bindings(configurable)
    params = inspect.signature(configurable).parameters
    return {n: bound[n] if n in bound else params[n].default for n in names if n in bound or n in params}


def run_hparams(bindings: Sequence[str], trainer_cls, gin_files: Sequence[str] = (), **values) -> dict:
    """A run's HParams: `values` (dataset, model, loss, seed, ...), the trainer knobs
    (`TRAINER_KNOBS`), the gin file names, then the `--gin_param` bindings it was started with
    (a sweep's axes among them), which win."""
    out = {k: hparam_value(v) for k, v in values.items()}
    out.update({k: hparam_value(v) for k, v in configured(trainer_cls, TRAINER_KNOBS).items()})
    if gin_files:
        out['gin_files'] = ','.join(pathlib.Path(f).name for f in gin_files)
    out.update(binding_hparams(bindings))
    return out


def _write(directory: os.PathLike, fn) -> None:
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        fn()
    writer.close()


def write_hparams(directory: os.PathLike, hparams: Mapping, trial_id: Optional[str] = None) -> None:
    """Writes the HParams session start of the run whose TensorBoard directory is `directory`."""
    from tensorboard.plugins.hparams import api as hp  # pylint: disable=g-import-not-at-top

    values = {str(k): hparam_value(v) for k, v in hparams.items()}
    _write(directory, lambda: hp.hparams(values, trial_id=trial_id))


def write_text(directory: os.PathLike, tag: str, text: str, step: int = 0) -> None:
    """Writes `text` as a TensorBoard text summary, shown verbatim (markdown code block)."""
    block = '```\n' + text.replace('```', "'''") + '\n```'
    _write(directory, lambda: tf.summary.text(tag, block, step=int(step)))


def write_config(directory: os.PathLike, config_text: str, step: int = 0) -> None:
    """The run's operative gin config as text (tag `CONFIG_TAG`)."""
    write_text(directory, CONFIG_TAG, config_text, step=step)


def image_tag(label: str, path: os.PathLike) -> str:
    """The image's tag: its file name without '.png' (stable across reruns; the label is its description)."""
    del label
    return pathlib.Path(path).stem


def write_images(directory: os.PathLike, figures: Sequence[tuple], step: int = 0) -> int:
    """Writes `[(label, png_path)]` as image summaries; returns how many were written.

    An unreadable PNG is logged and skipped: a report's figures must not fail it.
    """
    written = []
    for label, path in figures:
        try:
            image = tf.io.decode_png(tf.io.read_file(str(path)), channels=4)
        except (tf.errors.OpError, OSError) as e:
            logging.warning('Figure %s not written to TensorBoard (%s).', path, e)
            continue
        written.append((image_tag(label, path), str(label), image))

    def fn():
        for tag, label, image in written:
            tf.summary.image(tag, image[None], step=int(step), description=label)

    if written:
        _write(directory, fn)
    return len(written)


def write_histograms(writer, histograms: Mapping, step: int, buckets: int = 30) -> None:
    """Writes `{tag: array}` as histograms with `writer` (a `tf.summary` file writer)."""
    with writer.as_default(step=int(step)):
        for tag, values in histograms.items():
            tf.summary.histogram(str(tag), np.asarray(values, np.float64).ravel(), buckets=buckets)


def link_run(tensorboard_root: os.PathLike, name: str, run_dir: os.PathLike) -> pathlib.Path:
    """Makes `<tensorboard_root>/<name>` a relative symlink to `<run_dir>/tensorboard`.

    The target may not exist yet (the run creates it). An existing link is replaced; an existing
    directory of that name is left alone, and a filesystem without symlinks only loses the link
    (both logged): TensorBoard views must never fail a sweep.
    """
    root = pathlib.Path(tensorboard_root)
    root.mkdir(parents=True, exist_ok=True)
    link = root / name
    target = pathlib.Path(os.path.relpath(logdir(run_dir), root))
    if link.is_symlink():
        if pathlib.Path(os.readlink(link)) == target:
            return link
        link.unlink()
    elif link.exists():
        logging.warning('%s exists and is not a link; TensorBoard run %s not linked.', link, name)
        return link
    tmp = root / f'.{name}.link'
    try:
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(target, tmp, target_is_directory=True)
        os.replace(tmp, link)
    except OSError as e:
        logging.warning('TensorBoard run %s not linked (%s); view it with --logdir=%s.', name, e, logdir(run_dir))
    return link
