"""Choosing the `tf.distribute.Strategy` a run trains under.

`default`: one device. `mirrored`: all local GPUs (or `num_devices` logical CPUs, for tests).
`multi_worker`: MultiWorkerMirroredStrategy from `TF_CONFIG`; its constructor waits for every
peer with no time-out, so launch all workers together (and time-limit them).
"""

import json
import os
from typing import Optional

import gin
import tensorflow as tf

KINDS = ('default', 'mirrored', 'multi_worker')


@gin.configurable(module='train')
def make_strategy(kind: str = 'default', num_devices: Optional[int] = None) -> tf.distribute.Strategy:
    """Returns the strategy `kind`.

    Args:
      kind: one of `KINDS`.
      num_devices: for `mirrored` on a CPU-only machine, split the CPU into this many logical
        devices (must be called before TensorFlow initialises its devices).

    Raises:
      ValueError: unknown kind, or `multi_worker` without TF_CONFIG.
    """
    if kind not in KINDS:
        raise ValueError(f'Unknown strategy {kind!r}; valid: {list(KINDS)}.')
    if kind == 'default':
        return tf.distribute.get_strategy()
    if kind == 'mirrored':
        if tf.config.list_physical_devices('GPU'):  # physical: does not initialise the devices
            gpus = tf.config.list_logical_devices('GPU')
            return tf.distribute.MirroredStrategy([d.name for d in gpus[:num_devices]])
        cpu = tf.config.list_physical_devices('CPU')[0]
        if num_devices and tf.config.get_logical_device_configuration(cpu) is None:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
        cpus = tf.config.list_logical_devices('CPU')
        return tf.distribute.MirroredStrategy([d.name for d in cpus])
    if 'TF_CONFIG' not in os.environ:
        raise ValueError('multi_worker needs TF_CONFIG (cluster and task) in the environment.')
    json.loads(os.environ['TF_CONFIG'])  # fail early on malformed JSON
    return tf.distribute.MultiWorkerMirroredStrategy()
