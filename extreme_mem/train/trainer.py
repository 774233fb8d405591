"""`Trainer`: the custom training loop (tf.GradientTape inside tf.function, under a strategy).

Two kinds of compiled program (orbit's `create_tf_while_loop_fn` and "summaries only on summary
steps"):
  * the cheap loop: k training steps in one call (a `tf.while_loop` pulling batches from the
    iterator), keeping the loss sum, the correct count and a non-finite flag in variables. The
    host syncs only at log / eval / observed-step / checkpoint boundaries, and k is the number of
    steps to the next one (a tensor, so a new k does not retrace). `loop='per_step'` instead runs
    one call and one host sync per step (the reference the benchmark compares against);
  * the observed step, only on steps an observer asks for: the same update, plus what the
    observer `needs` (`outputs.Need`: representations, per-example gradient statistics from the
    same tape, the Gram matrix, weights and gradients), returned as `StepOutputs`.
The trainer never imports a metric or a writer: it talks to an `Observer` the experiment gives
it. Evaluation passes over the full train and test splits every `eval_every` steps, under the
strategy; the run stops at `num_steps` or when full-training-set accuracy reaches
`stop_accuracy`, and ends as `diverged` on a non-finite loss or weight, or when the training loss
stays above `divergence_factor` × its initial value for `divergence_patience` evaluations.
Checkpoints hold the model, the optimizer(s) and the divergence-rule state; batches are a pure
function of (seed, step) (data/pipeline.py), so a killed run resumes exactly, from the newest
readable checkpoint (`checkpoints.py`).
"""

import dataclasses
import math
import os
import sys
import time
from typing import Callable, Optional, Sequence, Union

import gin
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem.data import base as data_base
from extreme_mem.data import pipeline
from extreme_mem.models import base as models_base
from extreme_mem.pergrad import engine as pergrad_engine
from extreme_mem.train import checkpoints as checkpoints_lib
from extreme_mem.train import optimizers
from extreme_mem.train import outputs as outputs_lib
from extreme_mem.train import schedules

STATUSES = ('running', 'done', 'diverged', 'failed')
LOOPS = ('multi_step', 'per_step')
Need = outputs_lib.Need


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
        """What the observed step at optimizer step `step` must compute (`outputs.Need` names).

        Empty: the step runs inside the cheap loop. The trainer looks ahead (it asks for the
        steps up to the next boundary before running them), so this must be a pure function of
        `step`.
        """
        del step
        return frozenset()

    def on_restore(self, step: int) -> None:
        """Called once at the start of `fit`, after any checkpoint restore, with the step training
        continues from (0 when nothing was restored): records of later steps are stale."""

    def on_step(self, step: int, outputs: outputs_lib.StepOutputs) -> None:
        """Called after an observed step, with the outputs of update number `step`."""

    def on_eval(self, step: int, results: dict, evals: dict) -> Optional[dict]:
        """Called after each evaluation with `{tag: value}` and `{split: EvalResult}`.

        Returns:
          Extra `{tag: value}` (evaluation-time metrics) the trainer adds to its results (and to
          `FitResult.final`), or None. `results` is a copy: changing it has no effect.
        """
        del step, results, evals
        return None


@dataclasses.dataclass
class FitResult:
    status: str
    step: int
    final: dict


def _check_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = 'a positive integer' if minimum == 1 else f'an integer >= {minimum}'
        raise ValueError(f'train.Trainer.{name} must be {kind}, got {value!r}.')
    return int(value)


def _check_number(name: str, value, minimum: float = 0.0, strict: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
    if ok:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        raise ValueError(f'train.Trainer.{name} must be a number {">" if strict else ">="} {minimum}, got {value!r}.')
    return float(value)


@gin.configurable(module='train', denylist=['model', 'loss_fn', 'num_classes', 'strategy'])
class Trainer:
    """Training loop with evaluation, stopping rules, checkpoints and divergence checks.

    Args:
      model: the Keras model (built under `strategy`).
      loss_fn: per-example loss `(labels [n], logits [n, C]) -> [n]`.
      num_classes: C.
      optimizer: a name in `optimizers.OPTIMIZERS` (its other knobs: `train.<name>.*` bindings).
      learning_rate: peak rate.
      schedule: a name in `schedules.SCHEDULES` or a schedule callable.
      warmup_steps: linear warm-up length in front of the schedule (optimizer steps; 0: none).
      momentum: sgd / rmsprop momentum.
      nesterov: Nesterov momentum (sgd).
      weight_decay: decoupled weight decay (0: none).
      batch_size: global batch size.
      num_steps: optimizer steps.
      stop_accuracy: stop once full-training-set accuracy reaches it (None: never).
      eval_every, log_every, checkpoint_every: optimizer steps between those events.
      eval_batch_size: global batch size of evaluation passes.
      max_checkpoints: checkpoints kept.
      lr_multipliers: layer name -> learning-rate multiplier (exact for every optimizer: the
        layer gets its own optimizer with the scaled schedule).
      frozen_layers: layers not trained.
      grad_engines: variable path or layer name -> pergrad engine (`pergrad.engine.ENGINES`).
      loop: `multi_step` (k steps per call) or `per_step` (one call and one host sync per step).
      divergence_factor: the run diverges when the full-training-set loss stays above this
        multiple of its initial value for `divergence_patience` consecutive evaluations (None: off).
      divergence_patience: evaluations.
      start_over_if_unreadable: when checkpoints exist but none is readable, start from step 0
        instead of raising `checkpoints.CheckpointError`.
      jit_compile: XLA-compile the per-replica training step.
      strategy: the `tf.distribute.Strategy` (default: the current one).
    """

    def __init__(
        self,
        model: keras.Model,
        loss_fn: Callable,
        num_classes: int,
        optimizer: str = 'sgd',
        learning_rate: float = 0.01,
        schedule: Union[str, Callable] = 'constant',
        warmup_steps: int = 0,  # optimizer steps
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
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
        loop: str = 'multi_step',
        divergence_factor: Optional[float] = 100.0,
        divergence_patience: int = 3,  # evaluations
        start_over_if_unreadable: bool = False,
        jit_compile: bool = False,
        strategy: Optional[tf.distribute.Strategy] = None,
    ):
        for name in ('batch_size', 'num_steps', 'eval_every', 'eval_batch_size', 'log_every', 'checkpoint_every',
                     'max_checkpoints', 'divergence_patience'):
            _check_int(name, locals()[name])
        _check_int('warmup_steps', warmup_steps, minimum=0)
        _check_number('learning_rate', learning_rate, strict=True)
        if stop_accuracy is not None and not (_check_number('stop_accuracy', stop_accuracy) and stop_accuracy <= 1):
            raise ValueError(f'train.Trainer.stop_accuracy must be in (0, 1] or None, got {stop_accuracy!r}.')
        if divergence_factor is not None:
            _check_number('divergence_factor', divergence_factor, minimum=1.0, strict=True)
        if loop not in LOOPS:
            raise ValueError(f'Unknown train.Trainer.loop {loop!r}; valid: {list(LOOPS)}.')
        layer_names = [l.name for l in model.layers]
        for name in list(frozen_layers) + list(lr_multipliers or {}):
            if name not in layer_names:
                raise ValueError(f'Unknown layer {name!r} in frozen_layers/lr_multipliers; layers: {layer_names}.')
        for name, m in (lr_multipliers or {}).items():
            _check_number(f'lr_multipliers[{name!r}]', m)
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
        self._max_checkpoints = int(max_checkpoints)
        self._grad_engines = grad_engines
        self._loop_kind = loop
        self._divergence_factor = divergence_factor
        self._divergence_patience = int(divergence_patience)
        self._start_over = bool(start_over_if_unreadable)
        for layer in model.layers:
            if layer.name in frozen_layers:
                layer.trainable = False
        self._variables = list(model.trainable_variables)
        rate = schedules.make(schedule, learning_rate, self.num_steps, warmup_steps)
        # One optimizer per distinct multiplier: exact per-layer rates for adaptive optimizers too.
        multipliers = lr_multipliers or {}
        per_var = [float(multipliers.get(v.path.split('/')[0], 1.0)) for v in self._variables]
        groups = sorted(set(per_var) or {1.0}, key=lambda m: (m != 1.0, m))
        with self._strategy.scope():
            self._groups = []
            for m in groups:
                opt = optimizers.make(optimizer, rate if m == 1.0 else schedules.Scaled(rate, m),
                                      weight_decay=weight_decay, momentum=momentum, nesterov=nesterov)
                group_vars = [v for v, vm in zip(self._variables, per_var) if vm == m]
                opt.build(group_vars)
                self._groups.append((opt, [i for i, vm in enumerate(per_var) if vm == m]))
            self._optimizer = self._groups[0][0]  # its `iterations` is the step counter
            # Host-synced only at boundaries; `_window` = [loss sum, correct count, steps].
            self._window = tf.Variable(tf.zeros([3], tf.float32), trainable=False, name='window',
                                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self._nonfinite = tf.Variable(False, trainable=False, name='nonfinite',
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            # Divergence-rule state, checkpointed for exact resume.
            self._initial_loss = tf.Variable(float('nan'), trainable=False, name='initial_loss',
                                             aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self._explosions = tf.Variable(0, trainable=False, name='explosions',
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self._probed_model = models_base.with_probes(model)
        self._observed_steps: dict = {}
        self._pergrad: dict = {}  # compute_gram -> PerExampleGradients, built on first use
        replica_step = self._replica_train_step
        if jit_compile:
            replica_step = tf.function(replica_step, jit_compile=True)
        self._replica_step = replica_step
        self._train_step = tf.function(self._train_step_fn)
        self._train_loop = tf.function(self._train_loop_fn)
        self._eval_step = tf.function(self._eval_step_fn, reduce_retracing=True)

    @property
    def model(self) -> keras.Model:
        return self._model

    @property
    def optimizer(self) -> keras.optimizers.Optimizer:
        """The optimizer of the layers without a learning-rate multiplier (holds the step count)."""
        return self._optimizer

    # ---- compiled programs ---------------------------------------------------------------

    def _apply(self, grads):
        for opt, idx in self._groups:
            opt.apply_gradients([(grads[i], self._variables[i]) for i in idx])

    def _replica_train_step(self, batch):
        with tf.GradientTape() as tape:
            logits = self._model(batch['image'], training=True)
            per_example_loss = self._loss_fn(batch['label'], logits)
            loss = tf.reduce_sum(per_example_loss) / self._global_batch_size(batch)
        grads = tape.gradient(loss, self._variables)
        self._apply(grads)
        return loss, _correct(logits, batch['label'])

    def _global_batch_size(self, batch):
        replicas = self._strategy.num_replicas_in_sync
        return tf.cast(tf.shape(batch['label'])[0] * replicas, tf.float32)

    def _step_and_reduce(self, batch):
        loss, correct = self._strategy.run(self._replica_step, args=(batch,))
        return self._strategy.reduce('SUM', loss, axis=None), self._strategy.reduce('SUM', correct, axis=None)

    def _accumulate(self, loss, correct, steps, bad):
        self._window.assign_add(tf.stack([loss, correct, tf.cast(steps, tf.float32)]))
        self._nonfinite.assign(bad)

    def _train_step_fn(self, batch):
        """One step (the per-step reference): returns the loss, which the host reads at once."""
        loss, correct = self._step_and_reduce(batch)
        self._accumulate(loss, correct, 1, tf.logical_not(tf.math.is_finite(loss)))
        return loss

    def _train_loop_fn(self, iterator, num_steps):
        """Up to `num_steps` steps in one call; stops after the first non-finite loss.

        Returns:
          [] int32: steps run (fewer than `num_steps` only after a non-finite loss).
        """

        def body(i, loss_sum, correct_sum, bad):
            loss, correct = self._step_and_reduce(next(iterator))
            return i + 1, loss_sum + loss, correct_sum + correct, tf.logical_not(tf.math.is_finite(loss))

        def cond(i, loss_sum, correct_sum, bad):
            del loss_sum, correct_sum
            return tf.logical_and(i < num_steps, tf.logical_not(bad))

        zero = tf.constant(0.0)
        steps, loss_sum, correct_sum, bad = tf.while_loop(
            cond, body, [tf.constant(0, tf.int32), zero, zero, tf.constant(False)])
        self._accumulate(loss_sum, correct_sum, steps, bad)
        return steps

    def _replica_observed_step(self, batch, needs: frozenset):
        step = tf.identity(self._optimizer.iterations)
        weights = None
        if Need.WEIGHTS in needs:
            weights = {v.path: tf.identity(v) for v in self._variables}
        grad_stats = logit_stats = None
        if Need.GRAD_STATS in needs:
            diag = self._pergrad[Need.GRAM in needs](batch['image'], batch['label'], self._loss_fn,
                                                      self._num_classes, training=True)
            logits, per_example_loss, reps = diag.logits, diag.per_example_loss, diag.representations
            replicas = self._strategy.num_replicas_in_sync
            grads = [g / replicas for g in diag.grads]  # diag.grads: mean over the local batch
            grad_stats, logit_stats = diag.grad_stats, diag.logit_stats
            loss = tf.reduce_sum(per_example_loss) / self._global_batch_size(batch)
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
        out = outputs_lib.StepOutputs(
            step=step,
            index=batch['index'],
            labels=batch['label'],
            logits=logits,
            per_example_loss=per_example_loss,
            grad_stats=grad_stats,
            logit_stats=logit_stats,
            representations=reps if Need.REPRESENTATIONS in needs else None,
            grads={v.path: g for v, g in zip(self._variables, grads)} if Need.WEIGHTS in needs else None,
            weights=weights,
        )
        return out, loss, _correct(logits, batch['label'])

    def _observed_step_fn(self, batch, needs):
        out, loss, correct = self._strategy.run(self._replica_observed_step, args=(batch, needs))
        loss = self._strategy.reduce('SUM', loss, axis=None)
        self._accumulate(loss, self._strategy.reduce('SUM', correct, axis=None), 1,
                         tf.logical_not(tf.math.is_finite(loss)))
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

    def _observed_step(self, batch, needs: frozenset):
        if Need.GRAD_STATS in needs and (Need.GRAM in needs) not in self._pergrad:
            with self._strategy.scope():
                self._pergrad[Need.GRAM in needs] = pergrad_engine.PerExampleGradients(
                    self._model, engines=self._grad_engines, compute_gram=Need.GRAM in needs)
        if needs not in self._observed_steps:
            self._observed_steps[needs] = tf.function(lambda b: self._observed_step_fn(b, needs))
        return self._observed_steps[needs](batch)

    def _eval_step_fn(self, batch):
        def replica(b):
            logits = self._model(b['image'], training=False)
            return self._loss_fn(b['label'], logits), tf.argmax(logits, -1, output_type=tf.int32), b['index']

        outs = self._strategy.run(replica, args=(batch,))
        if self._strategy.num_replicas_in_sync == 1:
            return outs
        return tuple(self._strategy.gather(x, axis=0) for x in outs)

    # ---- evaluation ----------------------------------------------------------------------

    def evaluate(self, split: data_base.Split) -> EvalResult:
        """Loss and accuracy over the whole split (training labels), under the strategy."""
        losses, preds, ids = [], [], []
        batches = pipeline.eval_batches(split, self._eval_batch_size)
        for batch in self._strategy.experimental_distribute_dataset(batches):  # iterator outside tf.function
            loss, pred, index = self._eval_step(batch)
            losses.append(loss.numpy())
            preds.append(pred.numpy())
            ids.append(index.numpy())
        per_example_loss = np.concatenate(losses) if losses else np.zeros([0], np.float32)
        predictions = np.concatenate(preds) if preds else np.zeros([0], np.int32)
        if ids:  # replicas may return their shards in any order: put examples back in split order
            want, got = np.asarray(split.index), np.concatenate(ids)
            if not np.array_equal(want, got):
                sorter = np.argsort(want)
                position = sorter[np.searchsorted(want, got, sorter=sorter)]
                per_example_loss, predictions = per_example_loss.copy(), predictions.copy()
                per_example_loss[position], predictions[position] = np.concatenate(losses), np.concatenate(preds)
        labels = np.asarray(split.labels)
        accuracy = float(np.mean(predictions == labels)) if labels.ndim == 1 and len(labels) else float('nan')
        mean_loss = float(np.mean(per_example_loss)) if len(per_example_loss) else float('nan')
        return EvalResult(mean_loss, accuracy, per_example_loss, predictions)

    def _weights_finite(self) -> bool:
        return all(bool(tf.reduce_all(tf.math.is_finite(v))) for v in self._model.weights)

    # ---- the loop --------------------------------------------------------------------------

    def _checkpointed(self) -> dict:
        objects = {'model': self._model, 'optimizer': self._optimizer, 'initial_loss': self._initial_loss,
                   'explosions': self._explosions, **self._seed_states()}
        for i, (opt, _) in enumerate(self._groups[1:], 1):
            objects[f'optimizer_{i}'] = opt
        return objects

    def _checkpointed_variables(self) -> list:
        variables = list(self._model.weights) + [self._initial_loss, self._explosions]
        for opt, _ in self._groups:
            variables += list(opt.variables)
        return variables + list(self._seed_states().values())

    def _boundary(self, step: int) -> bool:
        return (step % self._log_every == 0 or step % self._eval_every == 0 or step % self._checkpoint_every == 0
                or step == self.num_steps)

    def _steps_to_boundary(self, step: int, observer: Observer) -> int:
        """Cheap steps from `step` until the next boundary or observed step (at least 1)."""
        k = 1
        while not self._boundary(step + k) and not observer.needs(step + k):
            k += 1
        return k

    def fit(self, data: data_base.Data, workdir: str, seed: int, observer: Optional[Observer] = None) -> FitResult:
        """Trains until `num_steps`, `stop_accuracy`, or divergence; resumes from `workdir`.

        Args:
          data: train/test splits.
          workdir: run directory; checkpoints go to `workdir/checkpoints`.
          seed: data-order seed.
          observer: receives observed-step outputs and evaluation results.

        Returns:
          `FitResult(status, step, final)`; `final` holds the last evaluation's tags (plus the
          observer's evaluation-time tags).

        Raises:
          checkpoints.CheckpointError: checkpoints exist but none is readable (and
            `start_over_if_unreadable` is False).
        """
        observer = observer or Observer()
        checkpoint = tf.train.Checkpoint(**self._checkpointed())
        ckpt_dir = os.path.join(workdir, 'checkpoints')
        restored = checkpoints_lib.restore_newest(checkpoint, ckpt_dir, self._checkpointed_variables(),
                                                  start_over=self._start_over)
        manager = tf.train.CheckpointManager(checkpoint, ckpt_dir, max_to_keep=self._max_checkpoints)
        step = int(self._optimizer.iterations.numpy())
        if restored:
            logging.info('Restored %s (step %d).', restored, step)
        observer.on_restore(step)
        final = {}
        if step == 0 or step >= self.num_steps:
            final = self._evaluate_and_report(step, data, observer)
            verdict = self._divergence_verdict(step, final, manager)
            if verdict:
                return FitResult('diverged', step, final)
            if step >= self.num_steps or self._reached(final):
                return FitResult('done', step, final)
        with self._strategy.scope():
            dataset = pipeline.train_batches(data.train, self._batch_size, seed, start_step=step)
            iterator = iter(self._strategy.experimental_distribute_dataset(dataset))  # outside tf.function
        start_time, start_step = time.time(), step
        self._window.assign(tf.zeros([3]))
        batch_size = min(self._batch_size, data.train.num_examples)
        while step < self.num_steps:
            needs = outputs_lib.check_needs(observer.needs(step), 'Observer.needs')
            if needs:
                outputs = self._observed_step(next(iterator), needs)
                observer.on_step(step, outputs)
                step += 1
            elif self._loop_kind == 'per_step':
                float(self._train_step(next(iterator)))  # the per-step host sync
                step += 1
            else:
                step += int(self._train_loop(iterator, tf.constant(self._steps_to_boundary(step, observer))))
            if self._nonfinite.numpy():
                logging.error('Diverged: non-finite training loss at step %d; %s.', step, _kept(manager))
                return FitResult('diverged', step, final)
            if step % self._log_every == 0 or step == self.num_steps:
                loss_sum, correct, count = (float(x) for x in self._window.numpy())
                self._window.assign(tf.zeros([3]))
                rate = (step - start_step) / max(time.time() - start_time, 1e-9)
                progress(step, self.num_steps, loss_sum / max(count, 1), correct / max(count * batch_size, 1),
                         rate, early_stop=self._stop_accuracy is not None,
                         line_end=step % self._eval_every == 0 or step == self.num_steps)
            stop = False
            if step % self._eval_every == 0 or step == self.num_steps:
                if not self._weights_finite():
                    logging.error('Diverged: non-finite weights at step %d; %s.', step, _kept(manager))
                    return FitResult('diverged', step, final)
                final = self._evaluate_and_report(step, data, observer)
                if self._divergence_verdict(step, final, manager):
                    return FitResult('diverged', step, final)
                stop = self._reached(final)
                if stop:
                    logging.info('Stopping at step %d: train accuracy %.4f >= %.4f.',
                                 step, final['train/accuracy'], self._stop_accuracy)
            if step % self._checkpoint_every == 0 or stop or step == self.num_steps:
                manager.save(checkpoint_number=step)
            if stop:
                break
        return FitResult('done', step, final)

    def _divergence_verdict(self, step: int, results: dict, manager) -> Optional[str]:
        """Applies the loss rules to an evaluation; returns the reason (logged) when the run diverged."""
        loss = results.get('train/loss', float('nan'))
        if not math.isfinite(loss):
            reason = f'non-finite full-training-set loss {loss!r}'
        else:
            if math.isnan(float(self._initial_loss.numpy())):
                self._initial_loss.assign(loss)
            initial = float(self._initial_loss.numpy())
            if self._divergence_factor is None or not initial > 0:
                return None
            above = loss > self._divergence_factor * initial
            self._explosions.assign(int(self._explosions.numpy()) + 1 if above else 0)
            count = int(self._explosions.numpy())
            if count < self._divergence_patience:
                return None
            reason = (f'training loss {loss:.4g} above {self._divergence_factor:g} x its initial value {initial:.4g} '
                      f'for {count} evaluations')
        logging.error('Diverged at step %d: %s; %s.', step, reason, _kept(manager))
        return reason

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
        extra = observer.on_eval(step, dict(results), evals) or {}
        clash = sorted(set(extra) & set(results))
        if clash:
            raise ValueError(f'Observer.on_eval returned tags the trainer already reports: {clash}.')
        return {**results, **extra}

    def _seed_states(self) -> dict:
        """Keras seed-generator states (Dropout, augmentation): not in model weights, needed for exact resume."""
        states = {}
        for layer in self._model._flatten_layers():  # pylint: disable=protected-access
            gen = getattr(layer, 'seed_generator', None)
            if gen is not None:
                states[f'seed_{layer.name}'] = gen.state
        return states


def _correct(logits, labels):
    """Number of argmax predictions equal to `labels`, as float32 (0 for regression targets)."""
    if labels.dtype.is_floating or labels.shape.rank != 1:
        return tf.constant(0.0)
    hits = tf.equal(tf.argmax(logits, -1, output_type=tf.int32), tf.cast(labels, tf.int32))
    return tf.reduce_sum(tf.cast(hits, tf.float32))


def _kept(manager: tf.train.CheckpointManager) -> str:
    """Which checkpoint a diverged run leaves to resume from, for the log."""
    latest = manager.latest_checkpoint
    if not latest:
        return 'no checkpoint was written before it, so none is kept'
    return f'kept checkpoint {latest} (step {checkpoints_lib.step_of(latest)})'


def progress(step: int, total: int, loss: float, accuracy: float, rate: float, early_stop: bool = False,
             line_end: bool = True, stream=None) -> str:
    """Reports training progress: a Keras-style bar on a terminal, else a log line; returns the text.

    The ETA is the steps left at the current rate; with early stopping (`stop_accuracy`) the run
    may end sooner, so it is an upper bound ('≤ 0:01:00'). On a terminal (`stream.isatty()`,
    default stderr) the bar is redrawn in place; `line_end` ends its line (before the
    evaluation's log lines).
    """
    stream = stream or sys.stderr
    eta = ('≤ ' if early_stop else '') + _hms((total - step) / max(rate, 1e-9))
    if getattr(stream, 'isatty', lambda: False)():
        width = 30
        filled = min(width, int(width * step / max(total, 1)))
        bar = '=' * filled + ('>' + '.' * (width - filled - 1) if filled < width else '')
        text = (f'{step}/{total} [{bar}] - loss: {loss:.4f} - accuracy (batches): {accuracy:.4f} - '
                f'{rate:.1f} steps/s - ETA: {eta}')
        stream.write('\r' + text + ('\n' if line_end else ''))
        stream.flush()
    else:
        text = f'step {step}/{total}  loss {loss:.4f}  train acc (batches) {accuracy:.4f}  {rate:.1f} steps/s  ETA {eta}'
        logging.info('%s', text)
    return text


def _hms(seconds: float) -> str:
    seconds = int(seconds)
    return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'
