"""The experiment layers: `Experiment` (abstract) and `SingleRun` (one training run).

`Experiment` is what a launcher runs: a working directory, a seed and `run()`. `SingleRun`
(registered `single_run`) is the composition root of one run: it builds data, model, loss,
trainer, metrics and writers through `build_*` hooks and writes the run directory (DESIGN.md
section 3). Paper experiments are `sweep_experiment.SweepExperiment`s whose runs are
`SingleRun`s.

A run directory belongs to one configuration: `results.json` records a hash of the run's
bindings (`config_hash`). Resuming or skipping a run whose recorded configuration differs is
refused with the bindings that differ, unless `overwrite` starts it over; a finished run's
files are never rewritten by a refused or skipped rerun. One process at a time writes a run
directory (`workdir_lock`).
"""

import abc
import os
import pathlib
import shutil
from typing import Optional, Sequence

import gin
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem import config, registry, runs
from extreme_mem.data import base as data_base
from extreme_mem.experiments import observer as observer_lib
from extreme_mem.experiments import workdir_lock
from extreme_mem.metrics import suite as suite_lib
from extreme_mem.summaries import results as results_lib
from extreme_mem.summaries import tensorboard as tensorboard_lib
from extreme_mem.summaries import writers as writers_lib
from extreme_mem.train import checkpoints
from extreme_mem.train import distribute
from extreme_mem.train import trainer as trainer_lib


class Experiment(abc.ABC):
    """What a launcher runs: `Experiment(workdir=..., seed=..., overwrite=...).run()`.

    Args:
      workdir: the directory the experiment owns.
      seed: global seed (weights, data order, label transforms).
      overwrite: start over the runs whose recorded configuration differs from this one, or
        whose checkpoints cannot be read (their old files are deleted); matching runs are
        still skipped or resumed.
    """

    name = 'experiment'

    def __init__(self, workdir: str, seed: int = 0, overwrite: bool = False):
        if not workdir:
            raise ValueError('An experiment needs a workdir.')
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise config.ConfigError(f'seed must be an integer, got {seed!r}.')
        self.workdir = str(workdir)
        self.seed = int(seed)
        self.overwrite = bool(overwrite)

    @abc.abstractmethod
    def run(self) -> dict:
        """Runs (or resumes) the experiment; returns its results."""


def user_errors() -> tuple:
    """Errors that a user's config, data or workdir cause: launchers print them in one line."""
    return (config.ConfigError, data_base.DataError, workdir_lock.WorkdirError, checkpoints.CheckpointError,
            results_lib.ResultsError, LookupError)


def _sweep_configurables() -> list:
    """Class names of the registered experiments other than `SingleRun`: their bindings (sweep
    axes, parallelism, report options) do not change what a single run computes."""
    return [registry.EXPERIMENTS.get(n).__name__ for n in registry.EXPERIMENTS.names()
            if registry.EXPERIMENTS.get(n) is not SingleRun]


def _clear_run_files(workdir: pathlib.Path) -> None:
    """Deletes a run's outputs (not its lock) so it starts over."""
    for child in workdir.iterdir():
        if child.name == workdir_lock.LOCK_NAME:
            continue
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


@registry.EXPERIMENTS.register('single_run')
@gin.configurable('Experiment', module='experiments', denylist=['workdir', 'seed', 'overwrite'])
class SingleRun(Experiment):
    """One training run: `dataset` + `model` + `loss` trained by `train.Trainer`.

    Its gin knobs keep the name `experiments.Experiment.*` (e.g.
    `experiments.Experiment.dataset = 'npz'`), as in every gin file.

    Args:
      workdir: run directory.
      seed: global seed (weights, data order, label transforms).
      overwrite: see `Experiment`.
      dataset: name in `registry.DATASETS`.
      model: name in `registry.MODELS`.
      loss: name in `registry.LOSSES`.
      metrics: names in `registry.METRICS`.
      writers: names in `registry.WRITERS`.
    """

    name = 'single_run'

    def __init__(
        self,
        workdir: str,
        seed: int = 0,
        dataset: str = 'digits',
        model: str = 'mlp',
        loss: str = 'cross_entropy',
        metrics: Sequence[str] = (),
        writers: Sequence[str] = ('tensorboard', 'console'),
        overwrite: bool = False,
    ):
        super().__init__(workdir=workdir, seed=seed, overwrite=overwrite)
        self._dataset, self._model, self._loss = dataset, model, loss
        self._metrics, self._writers = list(metrics), list(writers)
        # Fail on unknown names before any work.
        registry.DATASETS.get(dataset), registry.MODELS.get(model), registry.LOSSES.get(loss)
        for m in self._metrics:
            registry.METRICS.get(m)
        for w in self._writers:
            registry.WRITERS.get(w)

    # ---- hooks ------------------------------------------------------------------------------

    def build_dataset(self) -> data_base.Data:
        return registry.DATASETS.get(self._dataset)().load(seed=self.seed)

    def build_model(self, info: data_base.DatasetInfo) -> keras.Model:
        return registry.MODELS.get(self._model)(input_shape=info.input_shape, num_outputs=info.num_classes,
                                               seed=self.seed)

    def build_loss(self):
        return registry.LOSSES.get(self._loss)

    def build_strategy(self) -> tf.distribute.Strategy:
        return distribute.make_strategy()

    def build_trainer(self, model: keras.Model, loss_fn, info: data_base.DatasetInfo) -> trainer_lib.Trainer:
        restart = {'start_over_if_unreadable': True} if self.overwrite else {}  # else the trainer's gin value
        return trainer_lib.Trainer(model, loss_fn, info.num_classes, **restart)

    def build_metrics(self) -> suite_lib.MetricSuite:
        return suite_lib.MetricSuite([registry.METRICS.get(m)() for m in self._metrics])

    def build_writers(self) -> writers_lib.Writers:
        return writers_lib.Writers(self._writers, self.workdir)

    def export_model(self, model: keras.Model) -> None:
        """Saves the trained model as `model.keras` (atomically), for `extreme_mem.load_run`."""
        path = pathlib.Path(self.workdir) / runs.MODEL_FILENAME
        tmp = path.with_name('.tmp.' + path.name)
        try:
            model.save(tmp)
        except Exception as e:  # pylint: disable=broad-except  (the run itself is finished and recorded)
            logging.warning('Model not exported to %s (%s: %s); the checkpoints still hold it.',
                            path, type(e).__name__, e)
            tmp.unlink(missing_ok=True)
            return
        os.replace(tmp, path)

    # ---- run ----------------------------------------------------------------------------------

    def run(self) -> dict:
        """Trains one run into `workdir` (or resumes it); returns the final results.json content."""
        workdir = pathlib.Path(self.workdir)
        with workdir_lock.WorkdirLock(workdir):
            return self._run_locked(workdir)

    def identity(self) -> tuple[str, dict]:
        """`(hash, bindings)` of what this run computes: its bindings and seed, without the
        knobs of sweep experiments."""
        digest, bindings = config.config_identity(exclude=_sweep_configurables(), extra={'seed': self.seed})
        return digest, bindings

    def hparams(self) -> dict:
        """This run's TensorBoard HParams: dataset, model, loss, seed, trainer knobs and the
        `--gin_param` bindings it was started with (a sweep's axes)."""
        files, bindings = config.parsed_files_and_bindings()
        return tensorboard_lib.run_hparams(bindings, trainer_lib.Trainer, gin_files=files, dataset=self._dataset,
                                           model=self._model, loss=self._loss, seed=self.seed)

    def _check_previous(self, workdir: pathlib.Path, digest: str, bindings: dict) -> Optional[dict]:
        """The earlier record if it belongs to this configuration; None if there is none (or it
        was cleared by `overwrite`). Raises `WorkdirError` for another configuration's run."""
        previous = results_lib.read(workdir)
        if previous is None:
            return None
        recorded = previous.get('config_hash')
        if recorded is not None and recorded != digest:
            if self.overwrite:
                logging.warning('%s held a run of another configuration (%s); starting over (overwrite).',
                                workdir, config.describe_differences(previous.get('config', {}), bindings))
                _clear_run_files(workdir)
                return None
            raise workdir_lock.WorkdirError(
                f'{workdir} holds a run of another configuration ('
                f'{config.describe_differences(previous.get("config", {}), bindings)}). '
                'Use a new --workdir, or rerun with --overwrite to start this run over.')
        return previous

    def _run_locked(self, workdir: pathlib.Path) -> dict:
        digest, bindings = self.identity()
        previous = self._check_previous(workdir, digest, bindings)
        if previous and previous.get('status') == 'done':
            logging.info('%s is already done with this configuration; nothing to run.', workdir)
            return previous
        keras.utils.set_random_seed(self.seed)
        data = self.build_dataset()  # bad data fails here, before any run file is written
        logging.info('Data %s: %d train / %d test examples, %d classes, shape %s.', data.info.name,
                     data.train.num_examples, data.test.num_examples, data.info.num_classes, data.info.input_shape)
        config.save_operative_config(workdir, started=False)
        record = results_lib.RunRecord(workdir, self.name, bindings, config_hash=digest)
        with self.build_strategy().scope():  # variables are created under the run's strategy
            model = self.build_model(data.info)
            trainer = self.build_trainer(model, self.build_loss(), data.info)
        suite = self.build_metrics()
        writers = self.build_writers()
        record.save()
        if 'tensorboard' in self._writers:  # one HParams session per run (summaries/tensorboard.py)
            tensorboard_lib.write_hparams(tensorboard_lib.logdir(workdir), self.hparams())
        observer = observer_lib.RunObserver(suite, writers, record, model, data)
        try:
            fit = trainer.fit(data, self.workdir, self.seed, observer)
        except BaseException:
            record.finish('failed', record.data['final'])
            writers.close()
            raise
        writers.close()
        if fit.status == 'done':
            self.export_model(model)
        config.save_operative_config(workdir)  # now complete: every configurable was called
        if 'tensorboard' in self._writers:
            tensorboard_lib.write_config(tensorboard_lib.logdir(workdir),
                                         (workdir / 'operative_config.gin').read_text(), step=fit.step)
        record.data['final_step'] = fit.step
        record.finish(fit.status, fit.final)
        logging.info('Run %s: %s at step %d; %s', self.workdir, fit.status, fit.step,
                     '  '.join(f'{k} {v:.4f}' for k, v in fit.final.items() if isinstance(v, float)))
        return record.data


def final_value(record: Optional[dict], tag: str, default=np.nan):
    """`record['final'][tag]`, or `default` when the run or tag is missing."""
    if not record:
        return default
    value = record.get('final', {}).get(tag)
    return default if value is None else value
