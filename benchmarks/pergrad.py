"""Seconds per step of the per-example gradient engines vs a plain training step (DESIGN.md section 5).

    python benchmarks/pergrad.py [--models=mlp,convnet] [--batch=256] [--slow_engines=...] [--json=PATH]

Every row is a compiled step (`tf.function`) that also applies SGD. `plain` is forward, per-example
cross-entropy, mean, `tape.gradient`, SGD apply. The other rows run `PerExampleGradients` with one
engine for every layer and all alignment statistics, including the n×n Gram matrix that stiffness
and confusion need (`factored, no Gram`: alignment and diversity only).

Timing: fast rows are timed interleaved and reported as the minimum over rounds (other processes
may share the CPU); slow rows get one warm-up call and one timed call. `loop` runs on a small batch
and is scaled linearly (its cost per example does not depend on the batch size); the statistics of
its materialised gradients (the Gram is quadratic in the batch) are timed at the full batch and
added. `jacobian` (pfor over the whole batch's backward pass, cost ∝ b²) is timed at
--jacobian_batch and scaled by (batch / jacobian_batch)² (on this machine the ConvNet's measured
b=256 / b=128 ratio was 4.0); --jacobian_batch=0 measures it at the full batch (~2 extra minutes).

Targets: factored ≤ 1.5× plain (MLP), ≤ 2.5× (ConvNet), ≥ 300× faster than loop.

--json=PATH also writes the rows as a JSON list of
`{"model", "variant", "seconds_per_step", "ratio", "note"}`: `variant` is the engine name of the
printed row (`plain`, `factored, no Gram`, `factored`, `vectorized_map`, `jacobian`, `loop`),
`seconds_per_step` the seconds of one compiled step at --batch (extrapolated where `note` says
so), `ratio` that time divided by the same model's `plain` row.
"""

import json
import os
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from extreme_mem import config, losses  # noqa: E402
from extreme_mem.models import convnet, mlp  # noqa: E402
from extreme_mem.pergrad import engine, stats  # noqa: E402

_MODELS = flags.DEFINE_list('models', ['mlp', 'convnet'], 'Models to benchmark.')
_BATCH = flags.DEFINE_integer('batch', 256, 'Batch size.')
_LOOP_BATCH = flags.DEFINE_integer('loop_batch', 16, 'Batch for the loop engine (extrapolated to --batch).')
_REPEATS = flags.DEFINE_integer('repeats', 15, 'Timed steps for fast rows (plain, factored).')
_SLOW_REPEATS = flags.DEFINE_integer('slow_repeats', 1, 'Timed steps for vectorized_map/jacobian/loop.')
_CHUNK = flags.DEFINE_integer('chunk_size', 32, 'PerExampleGradients chunk_size.')
_JACOBIAN_BATCH = flags.DEFINE_integer(
    'jacobian_batch', 128, 'Batch for jacobian, extrapolated as b² (0: --batch, no extrapolation).'
)
_SLOW = flags.DEFINE_list('slow_engines', ['vectorized_map', 'jacobian', 'loop'], 'Slow engines to time.')
_JSON = flags.DEFINE_string('json', None, 'Also write the rows to this JSON file (a list of row objects).')

NUM_CLASSES = 10
SLOW_ENGINES = ('vectorized_map', 'jacobian', 'loop')
BUILDERS = {
    'mlp': (lambda: mlp.mlp((3072,), NUM_CLASSES, width=1024, seed=0), (3072,)),
    'convnet': (lambda: convnet.convnet((32, 32, 3), NUM_CLASSES, seed=0), (32, 32, 3)),
}


def _plain_step(model, optimizer):
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses.cross_entropy(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def _diagnostic_step(model, optimizer, engine_name, compute_gram):
    layers = {l.name: engine_name for l in model.layers if l.trainable_variables}
    pergrad = engine.PerExampleGradients(model, engines=layers, compute_gram=compute_gram, chunk_size=_CHUNK.value)

    @tf.function
    def step(x, y):
        diag = pergrad(x, y, losses.cross_entropy, NUM_CLASSES)
        optimizer.apply_gradients(zip(diag.grads, model.trainable_variables))
        return diag.loss, diag.grad_stats, diag.logit_stats

    return step


def _call(step, x, y) -> float:
    start = time.perf_counter()
    tf.nest.map_structure(np.asarray, step(x, y))
    return time.perf_counter() - start


def _bench_model(name: str) -> list:
    """Rows (model, variant, seconds per step, note) for one model; note says how it was measured."""
    build, shape = BUILDERS[name]
    batch, loop_batch = _BATCH.value, _LOOP_BATCH.value
    rng = np.random.RandomState(0)
    x = tf.constant(rng.normal(size=(batch, *shape)).astype(np.float32))
    y = tf.constant(rng.randint(NUM_CLASSES, size=batch).astype(np.int32))
    model = build()

    # Fast rows are timed interleaved, round by round, and reported as the minimum over rounds, so
    # that load from other processes on the machine affects them alike.
    fast = {
        'plain': _plain_step(model, keras.optimizers.SGD(1e-3)),
        'factored, no Gram': _diagnostic_step(model, keras.optimizers.SGD(1e-3), 'factored', False),
        'factored': _diagnostic_step(model, keras.optimizers.SGD(1e-3), 'factored', True),
    }
    times = {label: [] for label in fast}
    for label, step in fast.items():
        _call(step, x, y)  # trace + warm up
    for _ in range(_REPEATS.value):
        for label, step in fast.items():
            times[label].append(_call(step, x, y))
    rows = [(name, label, min(t), '') for label, t in times.items()]

    # Slow rows: one warm-up call (trace), then the minimum over --slow_repeats timed calls.
    def slow_row(engine_name, b, scale, note=''):
        step = _diagnostic_step(model, keras.optimizers.SGD(1e-3), engine_name, True)
        _call(step, x[:b], y[:b])
        seconds = min(_call(step, x[:b], y[:b]) for _ in range(_SLOW_REPEATS.value)) * scale
        rows.append((name, engine_name, seconds, note))

    if 'vectorized_map' in _SLOW.value:
        slow_row('vectorized_map', batch, 1.0)
    if 'jacobian' in _SLOW.value:
        # Each pfor iteration back-propagates through the whole batch, so the cost grows as b².
        b = min(_JACOBIAN_BATCH.value or batch, batch)
        slow_row('jacobian', b, (batch / b) ** 2, '' if b == batch else f'b={b}, ×{(batch / b) ** 2:g} as b²')
    if 'loop' in _SLOW.value:
        # Per-example gradients cost the same per example at any batch size: time them on a small
        # batch and scale linearly. The statistics of the materialised gradients (the Gram matrix
        # is quadratic in the batch) are timed at the full batch and added.
        slow_row('loop', loop_batch, batch / loop_batch)
        per_example = rows.pop()[2]
        spec = stats.ClassSpec.make(NUM_CLASSES)
        vectors = [tf.random.normal([batch, v.shape.num_elements()]) for v in model.trainable_variables]
        reduce_stats = tf.function(
            lambda vs, yb: [stats.from_vector_chunks([v], yb, spec, compute_gram=True) for v in vs]
        )
        _call(reduce_stats, vectors, y)
        reductions = min(_call(reduce_stats, vectors, y) for _ in range(_SLOW_REPEATS.value))
        del vectors
        note = f'b={loop_batch} ×{batch // loop_batch}, + stats at b={batch}'
        rows.append((name, 'loop', per_example + reductions, note))
    for model_name, variant, seconds, note in rows:
        logging.info('%s %s%s: %.4f s/step', model_name, variant, f' ({note})' if note else '', seconds)
    return rows


def _json_rows(rows: list) -> list:
    """Row objects of the --json file; `ratio` is relative to the same model's `plain` row."""
    plain = {m: s for m, variant, s, _ in rows if variant == 'plain'}
    return [
        {'model': m, 'variant': v, 'seconds_per_step': s, 'ratio': s / plain[m], 'note': note}
        for m, v, s, note in rows
    ]


def main(argv):
    del argv  # Unused.
    for flag, values, known in (('models', _MODELS.value, BUILDERS), ('slow_engines', _SLOW.value, SLOW_ENGINES)):
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise app.UsageError(f'--{flag}: unknown {unknown}; choose from {sorted(known)}.')
    tf.config.threading.set_intra_op_parallelism_threads(0)
    rows = []
    for name in _MODELS.value:
        rows.extend(_bench_model(name))
    plain = {m: s for m, variant, s, _ in rows if variant == 'plain'}
    loop = {m: s for m, variant, s, _ in rows if variant == 'loop'}
    loop = {m: loop.get(m, float('nan')) for m in plain}
    lines = [
        f'batch {_BATCH.value}, {os.cpu_count()} CPU cores, TF {tf.__version__}',
        f'{"model":<8} {"step":<38} {"s/step":>9} {"× plain":>9} {"loop ÷ this":>12}',
    ]
    for model, variant, seconds, note in rows:
        label = f'{variant} ({note})' if note else variant
        lines.append(
            f'{model:<8} {label:<38} {seconds:>9.4f} {seconds / plain[model]:>9.2f} {loop[model] / seconds:>12.1f}'
        )
    print('\n'.join(lines))
    if _JSON.value:
        config.write_atomic(_JSON.value, json.dumps(_json_rows(rows), indent=1) + '\n')
        logging.info('Wrote %s', _JSON.value)


if __name__ == '__main__':
    app.run(main)
