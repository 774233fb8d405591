"""Tests extreme_mem/pergrad/engine.py under MirroredStrategy: 2 logical CPUs equal one device.

Logical devices must be configured before TensorFlow initialises its devices, so the comparison
runs in a child process (this file with `--child`), with a timeout; the dataset iterator is created
outside `tf.function` (DESIGN.md section 9).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

_CHILD_FLAG = '--child'
_REPO = Path(__file__).resolve().parents[2]
_TIMEOUT_S = 300
ENGINES = ('factored', 'jacobian', 'vectorized_map')


def _child() -> dict:
    """Runs in a fresh process: returns max relative differences per engine."""
    cpus = tf.config.list_physical_devices('CPU')
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras

    from extreme_mem import losses
    from extreme_mem.models import convnet
    from extreme_mem.pergrad import engine

    num_classes, batch = 4, 12
    keras.utils.set_random_seed(0)
    x = np.random.RandomState(0).normal(size=(batch, 8, 8, 3)).astype(np.float32)
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 0, 1, 2], np.int32)

    def build():
        return convnet.convnet((8, 8, 3), num_classes, filters=(3, 4), width=8, seed=1)

    single_model = build()
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    with strategy.scope():
        dist_model = build()
    dist_model.set_weights(single_model.get_weights())
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    result = {}
    for name in ENGINES:
        engines = {l.name: name for l in single_model.layers if l.trainable_variables}
        single = engine.PerExampleGradients(single_model, engines=engines, compute_gram=True, chunk_size=4)
        dist = engine.PerExampleGradients(dist_model, engines=engines, compute_gram=True, chunk_size=4)
        want = tf.function(lambda a, b: single(a, b, losses.cross_entropy, num_classes))(x, y)
        iterator = iter(strategy.experimental_distribute_dataset(dataset))  # outside tf.function

        @tf.function
        def step(xb, yb, dist=dist):
            return strategy.run(lambda a, b: dist(a, b, losses.cross_entropy, num_classes), args=(xb, yb))

        got = step(*next(iterator))
        errors = []

        def compare(g, w):
            w = np.asarray(w, np.float64)
            for replica_value in strategy.experimental_local_results(g):
                diff = np.max(np.abs(np.asarray(replica_value, np.float64) - w)) if w.size else 0.0
                errors.append(float(diff / (np.max(np.abs(w)) + 1e-30)))

        for path, s in want.grad_stats.items():
            for field in s._fields:
                compare(getattr(got.grad_stats[path], field), getattr(s, field))
        for field in want.logit_stats._fields:
            compare(getattr(got.logit_stats, field), getattr(want.logit_stats, field))
        # grads/loss are local-batch means: with equal shards their replica mean is the global one.
        for g, w in zip(got.grads, want.grads):
            mean = np.mean([np.asarray(v, np.float64) for v in strategy.experimental_local_results(g)], axis=0)
            errors.append(float(np.max(np.abs(mean - np.asarray(w))) / (np.max(np.abs(w)) + 1e-30)))
        loss = np.mean([float(v) for v in strategy.experimental_local_results(got.loss)])
        errors.append(abs(loss - float(want.loss)) / abs(float(want.loss)))
        result[name] = max(errors)
    return result


class EngineDistributedTest(tf.test.TestCase):

    def test_mirrored_two_cpus_equals_one_device(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_REPO), os.environ.get('PYTHONPATH', '')]))
        env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
        try:
            proc = subprocess.run(
                [sys.executable, __file__, _CHILD_FLAG],
                cwd=_REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            self.fail(f'MirroredStrategy child did not finish within {_TIMEOUT_S} s.')
        self.assertEqual(proc.returncode, 0, msg=proc.stderr[-4000:])
        errors = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(sorted(errors), sorted(ENGINES))
        for name, err in errors.items():
            self.assertLess(err, 1e-5, msg=f'{name}: max relative difference {err}')


if __name__ == '__main__':
    if _CHILD_FLAG in sys.argv:
        print(json.dumps(_child()))
    else:
        tf.test.main()
