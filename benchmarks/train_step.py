"""Seconds per training step: our multi-step loop vs one call per step vs Keras `fit`.

  python benchmarks/train_step.py [--steps=300] [--repeats=3] [--k=100] [--json=PATH]

Variants, on the same model, data pipeline (`data/pipeline.train_batches`, batch 256) and SGD
(lr 0.01, softmax cross-entropy):
  loop      `Trainer`'s multi-step program: k steps per `tf.function` call, one host sync per call;
  per_step  one call and one host sync (`float(loss)`) per step: the loop before the multi-step one;
  keras_fit `model.fit(steps_per_execution=k)` on the same batches (the baseline row: ratio = 1).
Models: `digits_mlp` (64 -> 1024 -> 10 sin MLP of the Mehta digits runs: dispatch-bound on CPU),
`mlp` (3072 -> 1024 -> 10) and `convnet` (appendix H, 32x32x3). Inputs are Gaussian noise of the
model's shape (speed does not depend on the values). The compute-bound models run fewer steps
(k and the step count divided by 5 for mlp, 10 for convnet). Timings are interleaved (loop, per_step,
keras_fit, loop, ...) and the median over repeats is reported. Targets: loop at least as fast as
keras_fit on every model, and >= 1.15x per_step on digits_mlp.
"""

import json
import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from extreme_mem import config, losses  # noqa: E402
from extreme_mem.data import base as data_base  # noqa: E402
from extreme_mem.data import pipeline  # noqa: E402
from extreme_mem.models import convnet, mlp  # noqa: E402
from extreme_mem.train import trainer  # noqa: E402

_STEPS = flags.DEFINE_integer('steps', 300, 'Steps per timing on digits_mlp (mlp: a fifth, convnet: a tenth).')
_REPEATS = flags.DEFINE_integer('repeats', 3, 'Interleaved timings per variant.')
_K = flags.DEFINE_integer('k', 100, 'Steps per call (loop) and steps_per_execution (keras_fit).')
_MODELS = flags.DEFINE_list('models', ['digits_mlp', 'mlp', 'convnet'], 'Models to time.')
_JSON = flags.DEFINE_string('json', None, 'Also write the rows here as a JSON list.')
BATCH = 256
LR = 0.01
MODELS = {
    'digits_mlp': (lambda: mlp.mlp((64,), 10, width=1024, seed=0), 1),
    'mlp': (lambda: mlp.mlp((3072,), 10, width=1024, seed=0), 5),
    'convnet': (lambda: convnet.convnet((32, 32, 3), 10, seed=0), 10),
}
VARIANTS = ('loop', 'per_step', 'keras_fit')
BASELINE = 'keras_fit'


def _split(shape, n=BATCH * 8) -> data_base.Split:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, size=n).astype(np.int32)
    return data_base.Split(rng.normal(size=(n,) + tuple(shape)).astype(np.float32), labels, labels.copy(),
                           np.arange(n, dtype=np.int64))


def _runners(build, steps, k):
    """`{variant: run(steps)}`, each training its own copy of the model from the same weights."""
    models = [build() for _ in VARIANTS]
    for m in models[1:]:
        m.set_weights(models[0].get_weights())
    split = _split(models[0].input_shape[1:])
    loop_t, step_t = (trainer.Trainer(m, losses.cross_entropy, 10, learning_rate=LR, batch_size=BATCH)
                      for m in models[:2])
    loop_it, step_it = (iter(pipeline.train_batches(split, BATCH, seed=0)) for _ in range(2))

    def loop(n):
        for _ in range(n // k):
            int(loop_t._train_loop(loop_it, tf.constant(k)))  # pylint: disable=protected-access  (sync per call)

    def per_step(n):
        for _ in range(n):
            float(step_t._train_step(next(step_it)))  # pylint: disable=protected-access

    keras_model = models[2]
    keras_model.compile(optimizer=keras.optimizers.SGD(LR), steps_per_execution=k,
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    keras_data = pipeline.train_batches(split, BATCH, seed=0).map(lambda b: (b['image'], b['label']))

    def keras_fit(n):
        keras_model.fit(keras_data, epochs=1, steps_per_epoch=n, verbose=0, shuffle=False)

    return {'loop': loop, 'per_step': per_step, 'keras_fit': keras_fit}


def _time(fn, steps):
    start = time.perf_counter()
    fn(steps)
    return (time.perf_counter() - start) / steps


def measure(name: str) -> list[dict]:
    build, divisor = MODELS[name]
    k = max(1, _K.value // divisor)
    steps = max(k, (_STEPS.value // divisor) // k * k)
    runners = _runners(build, steps, k)
    for run in runners.values():  # trace and warm up
        run(k)
    times = {v: [] for v in VARIANTS}
    for _ in range(_REPEATS.value):
        for v in VARIANTS:
            times[v].append(_time(runners[v], steps))
    median = {v: float(np.median(times[v])) for v in VARIANTS}
    rows = [{'model': name, 'variant': v, 'seconds_per_step': median[v], 'ratio': median[v] / median[BASELINE]}
            for v in VARIANTS]
    for row in rows:
        row_k = 1 if row['variant'] == 'per_step' else k
        row['line'] = (f"{name:<11} {row['variant']:<10} {row_k:>5} {row['seconds_per_step'] * 1e3:10.3f} "
                       f"{1 / row['seconds_per_step']:9.1f} {row['ratio']:9.3f}")
        logging.info('%s', row['line'])
    logging.info('%s: loop is %.2fx per_step and %.2fx keras_fit in steps/s', name,
                 median['per_step'] / median['loop'], median['keras_fit'] / median['loop'])
    return rows


def main(argv):
    del argv
    unknown = sorted(set(_MODELS.value) - set(MODELS))
    if unknown:
        raise app.UsageError(f'Unknown --models {unknown}; valid: {sorted(MODELS)}.')
    load_before = os.getloadavg()
    rows = [row for name in _MODELS.value for row in measure(name)]
    lines = [f'batch {BATCH}, {_STEPS.value} steps (mlp: /5, convnet: /10) x {_REPEATS.value} interleaved repeats, '
             'median; '
             f'1-min load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, '
             f'{os.cpu_count()} CPUs',
             f'{"model":<11} {"variant":<10} {"k":>5} {"ms/step":>10} {"steps/s":>9} {"ratio":>9}  '
             f'(ratio: seconds per step / {BASELINE})']
    lines += [row.pop('line') for row in rows]
    print('\n'.join(lines))
    if _JSON.value:
        config.write_atomic(_JSON.value, json.dumps(rows, indent=1))
        logging.info('Wrote %s', _JSON.value)


if __name__ == '__main__':
    app.run(main)
