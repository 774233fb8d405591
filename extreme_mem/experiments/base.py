"""`Experiment`: the composition root. Builds data, model, loss, trainer, metrics and writers,
runs one training run, and writes the run directory (DESIGN.md section 3).

Paper experiments subclass it and override hooks (`build_*`), not `run`. The single-run
experiment (`single_run`) is this class as is.
"""

import os
import pathlib
from typing import Optional, Sequence

import gin
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem import config, registry
from extreme_mem.data import base as data_base
from extreme_mem.experiments import observer as observer_lib
from extreme_mem.metrics import suite as suite_lib
from extreme_mem.summaries import results as results_lib
from extreme_mem.summaries import writers as writers_lib
from extreme_mem.train import distribute
from extreme_mem.train import trainer as trainer_lib


@registry.EXPERIMENTS.register('single_run')
@gin.configurable(module='experiments', denylist=['workdir', 'seed'])
class Experiment:
    """One training run: `dataset` + `model` + `loss` trained by `train.Trainer`.

    Args:
      workdir: run directory.
      seed: global seed (weights, data order, label transforms).
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
    ):
        if not workdir:
            raise ValueError('An experiment needs a workdir.')
        self.workdir = str(workdir)
        self.seed = int(seed)
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
        return trainer_lib.Trainer(model, loss_fn, info.num_classes)

    def build_metrics(self) -> suite_lib.MetricSuite:
        return suite_lib.MetricSuite([registry.METRICS.get(m)() for m in self._metrics])

    def build_writers(self) -> writers_lib.Writers:
        return writers_lib.Writers(self._writers, self.workdir)

    # ---- run ----------------------------------------------------------------------------------

    def run(self) -> dict:
        """Trains one run into `workdir`; returns the final results.json content."""
        os.makedirs(self.workdir, exist_ok=True)
        keras.utils.set_random_seed(self.seed)
        config.save_operative_config(self.workdir, started=False)
        record = results_lib.RunRecord(self.workdir, self.name, config.config_dict())
        previous = results_lib.read(self.workdir)
        if previous and previous.get('status') == 'done':
            logging.info('%s is already done; nothing to run.', self.workdir)
            return previous
        data = self.build_dataset()
        logging.info('Data %s: %d train / %d test examples, %d classes, shape %s.', data.info.name,
                     data.train.num_examples, data.test.num_examples, data.info.num_classes, data.info.input_shape)
        with self.build_strategy().scope():  # variables are created under the run's strategy
            model = self.build_model(data.info)
            trainer = self.build_trainer(model, self.build_loss(), data.info)
        suite = self.build_metrics()
        writers = self.build_writers()
        ckpt_dir = pathlib.Path(self.workdir) / 'checkpoints'
        latest = tf.train.latest_checkpoint(str(ckpt_dir)) if ckpt_dir.exists() else None
        if latest:
            record.resume(int(latest.rsplit('-', 1)[-1]))
        record.save()
        observer = observer_lib.RunObserver(suite, writers, record, model, data)
        try:
            fit = trainer.fit(data, self.workdir, self.seed, observer)
        except BaseException:
            record.finish('failed', record.data['final'])
            writers.close()
            raise
        writers.close()
        config.save_operative_config(self.workdir)  # now complete: every configurable was called
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
