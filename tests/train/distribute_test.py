"""Tests for extreme_mem/train/distribute.py: strategy choice, errors, and 2 logical CPUs.

The mirrored probes run in one subprocess: logical devices must be configured before TensorFlow
initialises them, and a hung collective must not hang the suite (DESIGN.md section 9).
"""

import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

import gin
import pytest
import tensorflow as tf
from absl.testing import parameterized

from extreme_mem.train import distribute
from tests import testing

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_MIRRORED_PROBES = textwrap.dedent('''
    import json
    import tensorflow as tf
    from extreme_mem.train import distribute

    out = {}
    s = distribute.make_strategy('mirrored', num_devices=2)
    out['replicas'] = s.num_replicas_in_sync
    out['devices'] = list(s.extended.worker_devices)
    ids = s.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32) + 1.0)
    out['sum_of_replica_ids_plus_one'] = float(s.reduce(tf.distribute.ReduceOp.SUM, ids, axis=None))
    batches = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4)))  # one global batch
    sums = s.run(lambda x: tf.reduce_sum(x), args=(next(batches),))
    out['per_replica_sums'] = [int(t) for t in s.experimental_local_results(sums)]
    out['again'] = distribute.make_strategy('mirrored', num_devices=2).num_replicas_in_sync
    out['default_replicas'] = distribute.make_strategy('default').num_replicas_in_sync
    try:
        out['other_count'] = distribute.make_strategy('mirrored', num_devices=3).num_replicas_in_sync
    except Exception as e:  # a clear refusal is also acceptable
        out['other_count'] = type(e).__name__ + ': ' + str(e)
    print('PROBES ' + json.dumps(out))
''')


class MakeStrategyTest(testing.GinCleanMixin, tf.test.TestCase, parameterized.TestCase):

    def test_default_is_the_one_device_strategy(self):
        s = distribute.make_strategy()
        self.assertIs(s, tf.distribute.get_strategy())
        self.assertEqual(s.num_replicas_in_sync, 1)
        self.assertFalse(tf.distribute.has_strategy())  # the default strategy is not an explicit one

    def test_unknown_kind_lists_valid_kinds(self):
        with self.assertRaisesRegex(ValueError, r"Unknown strategy 'tpu'; valid: \['default', 'mirrored', 'multi_worker'\]"):
            distribute.make_strategy('tpu')

    def test_gin_binding_selects_the_kind(self):
        gin.parse_config(["train.make_strategy.kind = 'mirored'"])
        with self.assertRaisesRegex(ValueError, "Unknown strategy 'mirored'"):
            distribute.make_strategy()

    def test_multi_worker_without_tf_config(self):
        env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
        with mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaisesRegex(ValueError, 'multi_worker needs TF_CONFIG'):
                distribute.make_strategy('multi_worker')

    def test_multi_worker_with_malformed_tf_config_fails_before_waiting_for_peers(self):
        with mock.patch.dict(os.environ, {'TF_CONFIG': '{"cluster": '}):
            with self.assertRaises(ValueError):  # json.JSONDecodeError, before the strategy constructor
                distribute.make_strategy('multi_worker')

    def test_num_devices_after_tensorflow_initialised_its_devices(self):
        cpu = tf.config.list_physical_devices('CPU')[0]
        if tf.config.get_logical_device_configuration(cpu) is not None:
            self.skipTest('another test configured logical CPUs in this process')
        tf.constant(1.0).numpy()  # initialises the devices
        with self.assertRaisesRegex(RuntimeError, 'cannot be modified after being initialized'):
            distribute.make_strategy('mirrored', num_devices=2)


@pytest.mark.slow  # one TensorFlow subprocess (~30 s here); tests/train/distributed_test.py covers CI
@pytest.mark.timeout(240)
class MirroredTwoCpusTest(tf.test.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONPATH=_REPO, CUDA_VISIBLE_DEVICES='')
        proc = subprocess.run([sys.executable, '-c', _MIRRORED_PROBES], cwd=_REPO, env=env, capture_output=True,
                              text=True, timeout=200, start_new_session=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith('PROBES ')]
        if not lines:
            raise AssertionError(f'mirrored probes failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}')
        cls.probes = json.loads(lines[-1][len('PROBES '):])

    def test_two_logical_cpus_are_two_replicas(self):
        self.assertEqual(self.probes['replicas'], 2)
        self.assertEqual([d.rsplit('/', 1)[-1] for d in self.probes['devices']], ['device:CPU:0', 'device:CPU:1'])

    def test_replicas_reduce_like_two_devices(self):
        self.assertEqual(self.probes['sum_of_replica_ids_plus_one'], 3.0)  # 1 + 2
        self.assertEqual(self.probes['per_replica_sums'], [0 + 1, 2 + 3])  # global batch [0, 1, 2, 3] split in two

    def test_second_call_and_default_in_the_same_process(self):
        self.assertEqual(self.probes['again'], 2)
        self.assertEqual(self.probes['default_replicas'], 1)

    @pytest.mark.xfail(strict=True, reason='distribute.make_strategy ignores a num_devices that differs from the '
                                           'logical CPUs configured earlier in the process')
    def test_a_different_num_devices_is_honoured_or_refused(self):
        other = self.probes['other_count']
        self.assertTrue(other == 3 or (isinstance(other, str) and 'num_devices' in other), other)


if __name__ == '__main__':
    tf.test.main()
