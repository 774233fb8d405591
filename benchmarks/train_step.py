"""Our training step vs a plain Keras `train_on_batch` step, same model and batch.

  python benchmarks/train_step.py [--steps=50] [--repeats=5]

Prints seconds per step and the ratio ours / Keras for the 2-layer MLP (3072 -> 1024 -> 10) and
the appendix-H ConvNet (32x32x3), batch 256, SGD lr 0.01, softmax cross-entropy. Timings are
interleaved (ours, Keras, ours, ...) and the median over repeats is reported. Target: <= 1.05x.
"""

import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from extreme_mem import losses  # noqa: E402
from extreme_mem.models import convnet, mlp  # noqa: E402
from extreme_mem.train import trainer  # noqa: E402

_STEPS = flags.DEFINE_integer('steps', 50, 'Steps per timing.')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Interleaved timings per side.')
BATCH = 256


def _time(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def compare(name, build):
    rng = np.random.default_rng(0)
    ours_model, keras_model = build(), build()
    keras_model.set_weights(ours_model.get_weights())
    x = rng.normal(size=(BATCH,) + tuple(ours_model.input_shape[1:])).astype(np.float32)
    y = rng.integers(0, 10, size=BATCH).astype(np.int32)
    batch = {'image': tf.constant(x), 'label': tf.constant(y), 'index': tf.range(BATCH, dtype=tf.int64)}
    ours = trainer.Trainer(ours_model, losses.cross_entropy, 10, learning_rate=0.01, batch_size=BATCH)
    keras_model.compile(optimizer=keras.optimizers.SGD(0.01),
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ours_step = lambda: [float(t) for t in ours._train_step(batch)]  # noqa: E731  (host sync, as train_on_batch)
    keras_step = lambda: keras_model.train_on_batch(x, y)  # noqa: E731
    for _ in range(5):  # trace + warm up
        ours_step()
        keras_step()
    t_ours, t_keras = [], []
    for _ in range(_REPEATS.value):
        t_ours.append(_time(ours_step, _STEPS.value))
        t_keras.append(_time(keras_step, _STEPS.value))
    a, b = float(np.median(t_ours)), float(np.median(t_keras))
    print(f'{name:<34} {a * 1e3:10.2f} {b * 1e3:12.2f} {a / b:8.3f}x')


def main(argv):
    del argv
    print(f'batch {BATCH}, {_STEPS.value} steps x {_REPEATS.value} interleaved repeats, median')
    print(f'{"model":<34} {"ours ms":>10} {"keras ms":>12} {"ratio":>9}')
    compare('mlp 3072-1024-10 (sin)', lambda: mlp.mlp((3072,), 10, width=1024, seed=0))
    compare('convnet 32x32x3 (appendix H)', lambda: convnet.convnet((32, 32, 3), 10, seed=0))


if __name__ == '__main__':
    app.run(main)
