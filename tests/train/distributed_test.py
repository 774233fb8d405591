"""MirroredStrategy over 2 logical CPU devices trains and evaluates exactly like one device.

Runs in a subprocess: logical devices must be configured before TensorFlow initialises them,
and a hung collective must not hang the suite (DESIGN.md section 9).
"""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import numpy as np, tensorflow as tf
    from extreme_mem import losses
    from extreme_mem.models import mlp
    from extreme_mem.train import distribute, trainer
    from tests import testing

    mirrored = distribute.make_strategy('mirrored', num_devices=2)
    assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync
    data = testing.blobs(num_train=64, num_test=15)  # uneven last eval batch: 4 + 4 + 4 + 3

    class Watch(trainer.Observer):
        def __init__(self):
            self.seen = {}
        def needs(self, step):
            return frozenset({'representations', 'weights'}) if step == 2 else frozenset()
        def on_step(self, step, outputs):
            self.seen = {'loss': outputs.per_example_loss.numpy(), 'index': outputs.index.numpy(),
                         'rep': outputs.representations['hidden'].numpy(),
                         'grad': outputs.grads['hidden/kernel'].numpy()}

    def run(strategy, workdir):
        with strategy.scope():
            model = mlp.mlp((5,), 3, width=8, activation='tanh', initializer='glorot_uniform', init_scale=1.0,
                            seed=0)
            t = trainer.Trainer(model, losses.cross_entropy, 3, learning_rate=0.1, momentum=0.9, batch_size=16,
                                num_steps=5, eval_every=5, log_every=100, eval_batch_size=4, strategy=strategy)
        watch = Watch()
        result = t.fit(data, workdir, 0, watch)
        ev = t.evaluate(data.test)  # under the strategy: per-example values come back in split order
        direct = losses.cross_entropy(data.test.labels, model(data.test.images)).numpy()
        np.testing.assert_allclose(ev.per_example_loss, direct, rtol=1e-5, atol=1e-6)
        return [w.numpy() for w in model.weights], result.final, watch.seen

    import tempfile
    w1, f1, s1 = run(tf.distribute.get_strategy(), tempfile.mkdtemp())
    w2, f2, s2 = run(mirrored, tempfile.mkdtemp())
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for k in f1:
        np.testing.assert_allclose(f1[k], f2[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(s1['index'], s2['index'])
    for k in ('loss', 'rep', 'grad'):
        np.testing.assert_allclose(s1[k], s2[k], rtol=1e-5, atol=1e-6)
    print('DISTRIBUTED_OK')
''')


@pytest.mark.timeout(180)
def test_mirrored_two_cpus_equals_one_device():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=repo)
    proc = subprocess.run([sys.executable, '-c', SCRIPT], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=150, start_new_session=True)
    assert 'DISTRIBUTED_OK' in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
