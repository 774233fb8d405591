"""`Trainer`: the custom training loop (tf.GradientTape inside tf.function, under a strategy).

Two compiled programs (orbit's "summaries only on summary steps"):
  * the cheap step: forward, per-example loss, mean, gradient, SGD update;
  * the observed step, only on steps an observer asks for: the same update, plus what the
    active metric plugins need (representations, per-example gradient statistics from the same
    tape, weights and gradients), returned as `StepOutputs`.
The trainer never imports a metric or a writer: it talks to an `Observer` the experiment gives
it. Evaluation passes over the full train and test splits every `eval_every` steps; the run stops
at `num_steps` or when full-training-set accuracy reaches `stop_accuracy`. Checkpoints hold the
model and optimizer; batches are a pure function of (seed, step) (data/pipeline.py), so a killed
run resumes exactly.
"""

import dataclasses
import math
import os
import time
from typing import Callable, Optional, Sequence

import gin
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem.data import base as data_base
from extreme_mem.data import pipeline
from extreme_mem.models import base as models_base
from extreme_mem.pergrad import engine as pergrad_engine
from extreme_mem.train import outputs as outputs_lib
from extreme_mem.train import schedules

STATUSES = ('running', 'done', 'diverged', 'failed')


@dataclasses.dataclass
class EvalResult:
    """One full pass over a split.

    Attributes:
      loss: mean per-example loss.
      accuracy: fraction of argmax predictions equal to the split's training labels.
      per_example_loss: [n], in split order.
      predictions: [n] argmax class, in split order.
    """

    loss: float
    accuracy: float
    per_example_loss: np.ndarray
    predictions: np.ndarray


class Observer:
    """What the trainer reports to (the experiment implements it). Every hook is optional."""

    def needs(self, step: int) -> frozenset:
        """What the observed step must compute at optimizer step `step` (empty: cheap step)."""
        del step
        return frozenset()

    def wants_gram(self) -> bool:
        """Whether per-example gradient statistics must include the n×n Gram matrix."""
        return False

    def on_step(self, step: int, outputs: outputs_lib.StepOutputs) -> None:
        """Called after an observed step, with the outputs of update number `step`."""

    def on_eval(self, step: int, results: dict, evals: dict) -> None:
        """Called after each evaluation with `{tag: value}` and `{split: EvalResult}`."""


@dataclasses.dataclass
class FitResult:
    status: str
    step: int
    final: dict


@gin.configurable(module='train', denylist=['model', 'loss_fn', 'num_classes', 'strategy'])
class Trainer:
    """SGD training loop with evaluation, stopping rules, checkpoints and divergence checks."""

    def __init__(
        self,
        model: keras.Model,
        loss_fn: Callable,
        num_classes: int,
        learning_rate: float = 0.01,
        schedule: Callable = schedules.constant,
        momentum: float = 0.0,
        batch_size: int = 256,
        num_steps: int = 10_000,  # optimizer steps
        stop_accuracy: Optional[float] = None,  # full-training-set accuracy
        eval_every: int = 500,  # optimizer steps
        eval_batch_size: int = 1024,
        log_every: int = 500,  # optimizer steps
        checkpoint_every: int = 1000,  # optimizer steps
        max_checkpoints: int = 2,
        lr_multipliers: Optional[dict] = None,  # layer name -> multiplier
        frozen_layers: Sequence[str] = (),
        grad_engines: Optional[dict] = None,  # variable path or layer name -> pergrad engine
        jit_compile: bool = False,
        strategy: Optional[tf.distribute.Strategy] = None,
    ):
        for name, value in [('batch_size', batch_size), ('num_steps', num_steps), ('eval_every', eval_every),
                            ('log_every', log_every), ('checkpoint_every', checkpoint_every)]:
            if not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f'Trainer.{name} must be a positive integer, got {value!r}.')
        if momentum < 0:
            raise ValueError(f'Trainer.momentum must be >= 0, got {momentum!r}.')
        if stop_accuracy is not None and not 0 < stop_accuracy <= 1:
            raise ValueError(f'Trainer.stop_accuracy must be in (0, 1] or None, got {stop_accuracy!r}.')
        layer_names = [l.name for l in model.layers]
        for name in list(frozen_layers) + list(lr_multipliers or {}):
            if name not in layer_names:
                raise ValueError(f'Unknown layer {name!r} in frozen_layers/lr_multipliers; layers: {layer_names}.')
        self._strategy = strategy or tf.distribute.get_strategy()
        self._model = model
        self._loss_fn = loss_fn
        self._num_classes = num_classes
        self._batch_size = int(batch_size)
        self.num_steps = int(num_steps)
        self._stop_accuracy = stop_accuracy
        self._eval_every = int(eval_every)
        self._eval_batch_size = int(eval_batch_size)
        self._log_every = int(log_every)
        self._checkpoint_every = int(checkpoint_every)
        self._max_checkpoints = max_checkpoints
        self._jit_compile = jit_compile
        self._grad_engines = grad_engines
        for layer in model.layers:
            if layer.name in frozen_layers:
                layer.trainable = False
        self._variables = list(model.trainable_variables)
        multipliers = lr_multipliers or {}
        self._multipliers = [float(multipliers.get(v.path.split('/')[0], 1.0)) for v in self._variables]
        with self._strategy.scope():
            self._optimizer = keras.optimizers.SGD(
                learning_rate=schedule(learning_rate=learning_rate, num_steps=self.num_steps), momentum=momentum
            )
            self._optimizer.build(self._variables)
        self._probed_model = models_base.with_probes(model)
        self._observed_steps: dict = {}
        self._pergrad = None
        self._train_step = tf.function(self._train_step_fn, jit_compile=jit_compile)
        self._eval_step = tf.function(self._eval_step_fn, reduce_retracing=True)

    @property
    def model(self) -> keras.Model:
        return self._model

    @property
    def optimizer(self) -> keras.optimizers.Optimizer:
        return self._optimizer

    # ---- compiled programs ---------------------------------------------------------------

    def _apply(self, grads):
        grads = [g if m == 1.0 else g * m for g, m in zip(grads, self._multipliers)]
        self._optimizer.apply_gradients(zip(grads, self._variables))

    def _replica_train_step(self, batch):
        with tf.GradientTape() as tape:
            logits = self._model(batch['image'], training=True)
            per_example_loss = self._loss_fn(batch['label'], logits)
            loss = tf.reduce_sum(per_example_loss) / self._global_batch_size(batch)
        grads = tape.gradient(loss, self._variables)
        self._apply(grads)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                                 tf.cast(batch['label'], tf.int32)), tf.float32))
        return loss, correct

    def _global_batch_size(self, batch):
        replicas = self._strategy.num_replicas_in_sync
        return tf.cast(tf.shape(batch['label'])[0] * replicas, tf.float32)

    def _train_step_fn(self, batch):
        loss, correct = self._strategy.run(self._replica_train_step, args=(batch,))
        return (self._strategy.reduce('SUM', loss, axis=None), self._strategy.reduce('SUM', correct, axis=None))

    def _replica_observed_step(self, batch, needs: frozenset):
        step = tf.identity(self._optimizer.iterations)
        weights = None
        if 'weights' in needs:
            weights = {v.path: tf.identity(v) for v in self._variables}
        grad_stats = logit_stats = None
        if 'grad_stats' in needs:
            diag = self._pergrad(batch['image'], batch['label'], self._loss_fn, self._num_classes, training=True)
            logits, per_example_loss, reps = diag.logits, diag.per_example_loss, diag.representations
            replicas = self._strategy.num_replicas_in_sync
            grads = [g / replicas for g in diag.grads]  # diag.grads: mean over the local batch
            grad_stats, logit_stats = diag.grad_stats, diag.logit_stats
        else:
            with tf.GradientTape() as tape:
                logits, reps = self._probed_model(batch['image'], training=True)
                per_example_loss = self._loss_fn(batch['label'], logits)
                loss = tf.reduce_sum(per_example_loss) / self._global_batch_size(batch)
            grads = tape.gradient(loss, self._variables)
        self._apply(grads)
        ctx = tf.distribute.get_replica_context()
        if self._strategy.num_replicas_in_sync > 1:
            grads = [ctx.all_reduce('SUM', g) for g in grads]
        return outputs_lib.StepOutputs(
            step=step,
            index=batch['index'],
            labels=batch['label'],
            logits=logits,
            per_example_loss=per_example_loss,
            grad_stats=grad_stats,
            logit_stats=logit_stats,
            representations=reps if 'representations' in needs else None,
            grads={v.path: g for v, g in zip(self._variables, grads)} if 'weights' in needs else None,
            weights=weights,
        )

    def _observed_step_fn(self, batch, needs):
        out = self._strategy.run(self._replica_observed_step, args=(batch, needs))
        if self._strategy.num_replicas_in_sync == 1:
            return out
        gather = lambda x: self._strategy.gather(x, axis=0)  # noqa: E731
        first = lambda x: self._strategy.experimental_local_results(x)[0]  # noqa: E731
        return out._replace(
            step=first(out.step),
            index=gather(out.index),
            labels=gather(out.labels),
            logits=gather(out.logits),
            per_example_loss=gather(out.per_example_loss),
            representations=tf.nest.map_structure(gather, out.representations),
            grad_stats=tf.nest.map_structure(first, out.grad_stats),
            logit_stats=tf.nest.map_structure(first, out.logit_stats),
            grads=tf.nest.map_structure(first, out.grads),
            weights=tf.nest.map_structure(first, out.weights),
        )

    def _observed_step(self, batch, needs: frozenset) -> outputs_lib.StepOutputs:
        if 'grad_stats' in needs and self._pergrad is None:
            with self._strategy.scope():
                self._pergrad = pergrad_engine.PerExampleGradients(
                    self._model, engines=self._grad_engines, compute_gram=self._wants_gram
                )
        if needs not in self._observed_steps:
            self._observed_steps[needs] = tf.function(lambda b: self._observed_step_fn(b, needs))
        return self._observed_steps[needs](batch)

    def _eval_step_fn(self, batch):
        logits = self._model(batch['image'], training=False)
        return self._loss_fn(batch['label'], logits), tf.argmax(logits, -1, output_type=tf.int32)

    # ---- evaluation ----------------------------------------------------------------------

    def evaluate(self, split: data_base.Split) -> EvalResult:
        """Loss and accuracy over the whole split (training labels)."""
        losses, preds = [], []
        for batch in pipeline.eval_batches(split, self._eval_batch_size):
            loss, pred = self._eval_step(batch)
            losses.append(loss.numpy())
            preds.append(pred.numpy())
        per_example_loss = np.concatenate(losses) if losses else np.zeros([0], np.float32)
        predictions = np.concatenate(preds) if preds else np.zeros([0], np.int32)
        labels = np.asarray(split.labels)
        accuracy = float(np.mean(predictions == labels)) if labels.ndim == 1 and len(labels) else float('nan')
        return EvalResult(float(np.mean(per_example_loss)), accuracy, per_example_loss, predictions)

    def _weights_finite(self) -> bool:
        return all(bool(tf.reduce_all(tf.math.is_finite(v))) for v in self._model.weights)

    # ---- the loop --------------------------------------------------------------------------

    def fit(self, data: data_base.Data, workdir: str, seed: int, observer: Optional[Observer] = None) -> FitResult:
        """Trains until `num_steps`, `stop_accuracy`, or divergence; resumes from `workdir`.

        Args:
          data: train/test splits.
          workdir: run directory; checkpoints go to `workdir/checkpoints`.
          seed: data-order seed.
          observer: receives observed-step outputs and evaluation results.

        Returns:
          `FitResult(status, step, final)`; `final` holds the last evaluation's tags.
        """
        observer = observer or Observer()
        self._wants_gram = observer.wants_gram()
        checkpoint = tf.train.Checkpoint(model=self._model, optimizer=self._optimizer, **self._seed_states())
        manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(workdir, 'checkpoints'), max_to_keep=self._max_checkpoints
        )
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            logging.info('Restored %s (step %d).', manager.latest_checkpoint, int(self._optimizer.iterations.numpy()))
        step = int(self._optimizer.iterations.numpy())
        final = {}
        if step == 0 or step >= self.num_steps:
            final = self._evaluate_and_report(step, data, observer)
            if step >= self.num_steps or self._reached(final):
                return FitResult('done', step, final)
        with self._strategy.scope():
            dataset = pipeline.train_batches(data.train, self._batch_size, seed, start_step=step)
            iterator = iter(self._strategy.experimental_distribute_dataset(dataset))  # outside tf.function
        start_time, start_step = time.time(), step
        window_loss, window_correct, window_count = 0.0, 0.0, 0
        batch_size = min(self._batch_size, data.train.num_examples)
        while step < self.num_steps:
            batch = next(iterator)
            needs = frozenset(observer.needs(step))
            if needs:
                outputs = self._observed_step(batch, needs)
                loss = float(tf.reduce_mean(outputs.per_example_loss))
                correct = float(np.sum(np.argmax(outputs.logits, -1) == np.asarray(outputs.labels)))
                observer.on_step(step, outputs)
            else:
                loss, correct = (float(t) for t in self._train_step(batch))
            step += 1
            if not math.isfinite(loss):
                logging.error('Diverged: non-finite training loss %r at step %d; last good checkpoint kept.',
                              loss, step)
                return FitResult('diverged', step, final)
            window_loss, window_correct, window_count = window_loss + loss, window_correct + correct, window_count + 1
            if step % self._log_every == 0 or step == self.num_steps:
                rate = (step - start_step) / max(time.time() - start_time, 1e-9)
                eta = (self.num_steps - step) / max(rate, 1e-9)
                logging.info('step %d/%d  loss %.4f  train acc (batches) %.4f  %.1f steps/s  ETA %s',
                             step, self.num_steps, window_loss / window_count,
                             window_correct / (window_count * batch_size), rate, _hms(eta))
                window_loss, window_correct, window_count = 0.0, 0.0, 0
            stop = False
            if step % self._eval_every == 0 or step == self.num_steps:
                if not self._weights_finite():
                    logging.error('Diverged: non-finite weights at step %d; last good checkpoint kept.', step)
                    return FitResult('diverged', step, final)
                final = self._evaluate_and_report(step, data, observer)
                stop = self._reached(final)
                if stop:
                    logging.info('Stopping at step %d: train accuracy %.4f >= %.4f.',
                                 step, final['train/accuracy'], self._stop_accuracy)
            if step % self._checkpoint_every == 0 or stop or step == self.num_steps:
                manager.save(checkpoint_number=step)
            if stop:
                break
        return FitResult('done', step, final)

    def _reached(self, final: dict) -> bool:
        return self._stop_accuracy is not None and final.get('train/accuracy', 0.0) >= self._stop_accuracy

    def _evaluate_and_report(self, step: int, data: data_base.Data, observer: Observer) -> dict:
        evals = {'train': self.evaluate(data.train), 'test': self.evaluate(data.test)}
        results = {}
        for split, ev in evals.items():
            results[f'{split}/loss'] = ev.loss
            if not math.isnan(ev.accuracy):
                results[f'{split}/accuracy'] = ev.accuracy
        logging.info('eval step %d: %s', step, '  '.join(f'{k} {v:.4f}' for k, v in results.items()))
        observer.on_eval(step, results, evals)
        return results

    def _seed_states(self) -> dict:
        """Keras seed-generator states (Dropout, augmentation): not in model weights, needed for exact resume."""
        states = {}
        for layer in self._model._flatten_layers():  # pylint: disable=protected-access
            gen = getattr(layer, 'seed_generator', None)
            if gen is not None:
                states[f'seed_{layer.name}'] = gen.state
        return states


def _hms(seconds: float) -> str:
    seconds = int(seconds)
    return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'
