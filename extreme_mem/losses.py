"""Per-example losses (no reduction), by name. The trainer is the only place that reduces.

Every loss maps `(labels [batch] int, logits [batch, C])` (or regression targets
`[batch, ...]`) to `[batch]`. Mehta et al. (2021) section 4 explains why temperature, margin and
target scale matter at large init scale.
"""

import gin
import tensorflow as tf

from extreme_mem import registry


@registry.LOSSES.register('cross_entropy')
@gin.configurable(module='losses')
def cross_entropy(labels, logits, temperature: float = 1.0):
    """Softmax cross-entropy of `logits / temperature`."""
    logits = tf.convert_to_tensor(logits)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.int32), logits=logits / tf.cast(temperature, logits.dtype)
    )


@registry.LOSSES.register('hinge')
@gin.configurable(module='losses')
def hinge(labels, logits, margin: float = 1.0):
    """Multi-class hinge Σ_{i≠y} max(0, Δ + z_i − z_y) (Crammer-Singer sum form)."""
    logits = tf.convert_to_tensor(logits)
    num_classes = tf.shape(logits)[-1]
    onehot = tf.one_hot(tf.cast(labels, tf.int32), num_classes, dtype=logits.dtype)
    true_logit = tf.reduce_sum(onehot * logits, axis=-1, keepdims=True)
    terms = tf.nn.relu(tf.cast(margin, logits.dtype) + logits - true_logit)
    return tf.reduce_sum(terms * (1.0 - onehot), axis=-1)


@registry.LOSSES.register('squared')
@gin.configurable(module='losses')
def squared(labels, logits, target_scale: float = 1.0):
    """Mean over classes of (z − scale·onehot(y))²."""
    logits = tf.convert_to_tensor(logits)
    onehot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(logits)[-1], dtype=logits.dtype)
    return tf.reduce_mean(tf.square(logits - tf.cast(target_scale, logits.dtype) * onehot), axis=-1)


@registry.LOSSES.register('mse')
@gin.configurable(module='losses')
def mse(targets, outputs):
    """Mean squared error against regression targets, averaged over all non-batch axes."""
    outputs = tf.convert_to_tensor(outputs)
    diff = tf.reshape(outputs - tf.cast(targets, outputs.dtype), [tf.shape(outputs)[0], -1])
    return tf.reduce_mean(tf.square(diff), axis=-1)


def get(name: str):
    """The loss function registered as `name` (with its gin-bound arguments)."""
    return registry.LOSSES.get(name)
