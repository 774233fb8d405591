"""`PerExampleGradients`: training gradient plus per-example gradient statistics in one pass.

The trainer's diagnostic step calls a `PerExampleGradients` instead of its own tape. One forward
pass records the logits, each factored layer's input a_i and pre-activation output z_i, and the
probe representations; one backward pass of the *summed* per-example loss gives the training
gradient (divided by the batch size) and δ_i = ∂ loss_i / ∂ z_i. Engines per variable
(DESIGN.md section 5):

- `factored`: Dense/Conv2D kernels and biases from (a_i, δ_i) (see `factored.py`); exact.
- `jacobian`: `tape.jacobian(..., experimental_use_pfor=True)` of chunks of the per-example loss
  on the same (persistent) tape; any layer.
- `vectorized_map`: `tf.vectorized_map` of a per-example forward/backward (batch of one, so
  batch-dependent layers and random layers such as Dropout differ from the training pass); any layer.
- `loop`: the same batch-of-one forward/backward, one `tape.gradient` per example in a sequential
  `tf.map_fn`; the slow, independent oracle tests compare the others against.

Under `tf.distribute` (called in replica context, e.g. inside `strategy.run`) the statistics cover
the global batch in replica-major order and are identical on every replica: factored layers
all-gather (a_i, δ_i, labels); the other engines all-gather per-example norms and all-reduce
per-class and batch sums. `logits`, `per_example_loss`, `representations`, `loss` and `grads`
stay per-replica: `loss` and `grads` are of the mean over the *local* batch, exactly what a plain
tape on the replica's batch gives (the caller scales by 1 / num_replicas before an optimizer sums
them across replicas).

The module is pure: it never touches the optimizer.
"""

from typing import Callable, NamedTuple, Optional, Sequence

import gin
import keras
import tensorflow as tf
from absl import logging

from extreme_mem.models import base as models_base
from extreme_mem.pergrad import factored
from extreme_mem.pergrad import stats

ENGINES = ('factored', 'jacobian', 'vectorized_map', 'loop')
LossFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


class Diagnostics(NamedTuple):
    """What one diagnostic forward/backward pass produced.

    Attributes:
      logits: [n, num_outputs] (local batch).
      per_example_loss: [n] (local batch).
      loss: [] mean of `per_example_loss` (local batch).
      grads: gradients of `loss`, aligned with `model.trainable_variables` (what the optimizer
        applies on one device); None for variables the loss does not depend on.
      grad_stats: variable path -> `stats.GradStats` of the global batch.
      logit_stats: `stats.GradStats` of ∂ loss_i / ∂ logits_i.
      representations: probe name -> [n, ...] activations of the same forward pass (local batch).
    """

    logits: tf.Tensor
    per_example_loss: tf.Tensor
    loss: tf.Tensor
    grads: list
    grad_stats: dict
    logit_stats: stats.GradStats
    representations: dict


class _Tap(NamedTuple):
    """A factored layer and the paths of the variables (kernel, bias) it provides statistics for."""

    layer: keras.layers.Layer
    kernel_path: Optional[str]
    bias_path: Optional[str]


def _factor_problem(layer: keras.layers.Layer) -> Optional[str]:
    """Why `layer` cannot use the factored engine (None if it can)."""
    if not isinstance(layer, (keras.layers.Dense, keras.layers.Conv2D)):
        return f'{type(layer).__name__} is not Dense or Conv2D'
    if layer.activation is not keras.activations.linear:
        return 'it has a built-in activation (its output is not a pre-activation)'
    if getattr(layer, 'lora_enabled', False) or getattr(layer, 'quantization_mode', None):
        return 'LoRA/quantized kernels are not supported'
    if isinstance(layer, keras.layers.Conv2D):
        if layer.data_format != 'channels_last' or layer.groups != 1:
            return 'only channels_last Conv2D with groups=1 is supported'
    if len(getattr(layer, '_inbound_nodes', [])) != 1:
        return 'the layer is not called exactly once in the model graph'
    return None


class _Replica:
    """Cross-replica reducers; identity outside a multi-replica replica context."""

    def __init__(self):
        ctx = tf.distribute.get_replica_context()
        self._ctx = ctx if ctx is not None and ctx.num_replicas_in_sync > 1 else None

    @property
    def num_replicas(self) -> int:
        return 1 if self._ctx is None else self._ctx.num_replicas_in_sync

    def gather(self, x: tf.Tensor) -> tf.Tensor:
        """All-gather along axis 0 (replica-major); keeps the static non-batch dimensions."""
        if self._ctx is None:
            return x
        out = self._ctx.all_gather(x, axis=0)
        out.set_shape([None] + x.shape.as_list()[1:])
        return out

    def sum(self, x: tf.Tensor) -> tf.Tensor:
        return x if self._ctx is None else self._ctx.all_reduce(tf.distribute.ReduceOp.SUM, x)


def _input_structure(model: keras.Model):
    """The model's symbolic inputs in the structure it is called with (tensor, list or dict)."""
    try:
        return model.input
    except AttributeError:  # Sequential defines `inputs` but not `input`.
        return model.inputs[0] if len(model.inputs) == 1 else model.inputs


def _chunks(n: Optional[int], chunk_size: int) -> list:
    if n is None:
        return [(None, None)]
    return [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]


def _flat(g: tf.Tensor) -> tf.Tensor:
    return tf.reshape(tf.cast(g, tf.float32), [tf.shape(g)[0], -1])


@gin.configurable(module='pergrad', denylist=['model', 'engines', 'compute_gram'])
class PerExampleGradients:
    """Training gradient and per-example gradient statistics from one forward/backward pass.

    Gin can bind `chunk_size` and `classes`; `engines` and `compute_gram` are denylisted because
    the caller always sets them (the trainer: `train.Trainer.grad_engines`, and `Need.GRAM` in a
    step's needs), so a binding of either fails at parse time instead of being silently ignored.

    Example (inside the trainer's `tf.function` diagnostic step):
        diag = pergrad_fn(batch['image'], batch['label'], losses.cross_entropy, num_classes=10)
        optimizer.apply_gradients(zip(diag.grads, model.trainable_variables))
    """

    def __init__(
        self,
        model: keras.Model,
        engines: Optional[dict] = None,
        compute_gram: bool = False,
        chunk_size: int = 64,
        classes: Optional[Sequence[int]] = None,
    ):
        """Resolves an engine per trainable variable and builds the tapped forward model.

        Args:
          model: a built Keras model (functional or Sequential for the factored engine).
          engines: variable path or top-level layer name -> one of `ENGINES`. Variables not
            named get `factored` when their layer is a Dense/Conv2D without built-in activation,
            else `jacobian`. A path entry wins over a layer entry.
          compute_gram: also return the [n, n] per-example Gram matrix of every variable and of
            the logit gradients (stiffness, confusion).
          chunk_size: examples per chunk for `jacobian`/`vectorized_map` and for materialised
            per-example conv gradients (bounds memory at chunk_size × variable size).
          classes: restrict per-class statistics to these class ids (others get count 0).

        Raises:
          ValueError: unknown engine name or key, `factored` requested where it cannot apply,
            non-positive chunk_size.
        """
        if chunk_size <= 0:
            raise ValueError(f'chunk_size must be positive, got {chunk_size}.')
        self._model = model
        self._compute_gram = bool(compute_gram)
        self._chunk_size = int(chunk_size)
        self._classes = None if classes is None else tuple(int(c) for c in classes)
        self._variables = list(model.trainable_variables)
        self._paths = [v.path for v in self._variables]
        engines = dict(engines or {})
        bad = {k: v for k, v in engines.items() if v not in ENGINES}
        if bad:
            raise ValueError(f'Unknown engines {bad}; valid: {list(ENGINES)}.')

        owners = {}
        for layer in model.layers:
            for v in layer.trainable_variables:
                owners.setdefault(id(v), layer)
        layer_names = {l.name for l in model.layers}
        unknown = set(engines) - set(self._paths) - layer_names
        if unknown:
            raise ValueError(
                f'engines keys {sorted(unknown)} name no trainable variable or layer; '
                f'variables: {self._paths}; layers: {sorted(layer_names)}.'
            )
        functional = bool(getattr(model, 'inputs', None)) and bool(getattr(model, 'outputs', None))

        self._engine_of: dict[str, str] = {}
        taps: dict[str, _Tap] = {}
        for v, path in zip(self._variables, self._paths):
            layer = owners.get(id(v))
            requested = engines.get(path, engines.get(layer.name if layer is not None else None, 'auto'))
            problem = 'the model is not functional' if not functional else None
            if problem is None:
                problem = 'no top-level layer owns it' if layer is None else _factor_problem(layer)
            if problem is None and v is not layer.kernel and v is not getattr(layer, 'bias', None):
                problem = 'it is neither the kernel nor the bias'
            if requested == 'factored' and problem is not None:
                raise ValueError(f'Cannot use the factored engine for {path!r}: {problem}.')
            engine = requested if requested != 'auto' else ('factored' if problem is None else 'jacobian')
            self._engine_of[path] = engine
            if engine == 'factored':
                tap = taps.get(layer.name, _Tap(layer, None, None))
                tap = tap._replace(kernel_path=path) if v is layer.kernel else tap._replace(bias_path=path)
                taps[layer.name] = tap
        self._taps = list(taps.values())
        logging.info('PerExampleGradients engines: %s', self._engine_of)

        self._aux = None
        self._probe_names: list[str] = []
        if functional:
            probes = models_base.probe_layers(model)
            self._probe_names = list(probes)
            self._aux = keras.Model(
                _input_structure(model),
                {
                    'logits': model.outputs[0],
                    'tap_inputs': [t.layer.input for t in self._taps],
                    'tap_outputs': [t.layer.output for t in self._taps],
                    'probes': [l.output for l in probes.values()],
                },
                name=f'{model.name}_pergrad',
            )

    @property
    def engines(self) -> dict:
        """Variable path -> resolved engine name."""
        return dict(self._engine_of)

    def _vars_with(self, engine: str) -> list:
        return [(v, p) for v, p in zip(self._variables, self._paths) if self._engine_of[p] == engine]

    def __call__(
        self, x, labels: tf.Tensor, loss_fn: LossFn, num_classes: int, training: bool = True
    ) -> Diagnostics:
        """One forward/backward pass: training gradient plus statistics.

        Traceable inside `tf.function`. With a dynamic batch size `jacobian` and `vectorized_map`
        process the batch as one chunk.

        Args:
          x: model inputs, [n, ...] (local batch under a strategy).
          labels: [n] int labels.
          loss_fn: per-example loss `(labels, logits) -> [n]`.
          num_classes: C, length of the per-class statistics.
          training: forwarded to the model.

        Returns:
          `Diagnostics`.
        """
        spec = stats.ClassSpec.make(num_classes, self._classes)
        replica = _Replica()
        labels = tf.convert_to_tensor(labels)
        n_static = labels.shape[0]
        jac_vars, loop_vars = self._vars_with('jacobian'), self._vars_with('loop')
        vmap_vars = self._vars_with('vectorized_map')
        jac_bounds = _chunks(n_static, self._chunk_size)

        with tf.GradientTape(persistent=bool(jac_vars)) as tape:
            if self._aux is not None:
                out = self._aux(x, training=training)
                logits, tap_in, tap_out = out['logits'], out['tap_inputs'], out['tap_outputs']
                probes = out['probes']
            else:
                logits, tap_in, tap_out, probes = self._model(x, training=training), [], [], []
            per_example_loss = loss_fn(labels, logits)
            loss_sum = tf.reduce_sum(per_example_loss)
            jac_targets = [per_example_loss[s:e] for s, e in jac_bounds] if jac_vars else []

        all_grads = tape.gradient(loss_sum, list(tap_out) + [logits] + self._variables)
        deltas, logit_delta = all_grads[: len(tap_out)], all_grads[len(tap_out)]
        var_grads = all_grads[len(tap_out) + 1 :]
        n_local = tf.cast(tf.shape(per_example_loss)[0], per_example_loss.dtype)
        grads = [None if g is None else g / tf.cast(n_local, g.dtype) for g in var_grads]
        loss = loss_sum / n_local

        if logit_delta is None:
            logit_delta = tf.zeros_like(logits)
        logit_stats = stats.from_vector_chunks(
            [_flat(logit_delta)], labels, spec, self._compute_gram, replica.gather, replica.sum
        )

        grad_stats: dict[str, stats.GradStats] = {}
        if self._taps:
            # Global batch size for the cost model only (shards may be uneven, so not a static shape).
            n_hint = None if n_static is None else n_static * replica.num_replicas
            global_labels = replica.gather(labels)
            for tap, a, z, delta in zip(self._taps, tap_in, tap_out, deltas):
                delta = tf.zeros_like(z) if delta is None else delta
                grad_stats.update(
                    self._factored(tap, replica.gather(a), replica.gather(delta), global_labels, spec, n_hint)
                )

        per_example = {}
        if jac_vars:
            per_example.update(self._jacobian(tape, jac_targets, jac_vars))
        if loop_vars:
            per_example.update(self._loop(x, labels, loss_fn, training, loop_vars))
        if vmap_vars:
            per_example.update(self._vectorized_map(x, labels, loss_fn, training, vmap_vars, n_static))
        del tape
        for path, chunks in per_example.items():
            grad_stats[path] = stats.from_vector_chunks(
                chunks, labels, spec, self._compute_gram, replica.gather, replica.sum
            )

        return Diagnostics(
            logits=logits,
            per_example_loss=per_example_loss,
            loss=loss,
            grads=grads,
            grad_stats={p: grad_stats[p] for p in self._paths},
            logit_stats=logit_stats,
            representations=dict(zip(self._probe_names, probes)),
        )

    def _factored(self, tap: _Tap, a, delta, labels, spec, n_hint: Optional[int]) -> dict:
        """Kernel and bias statistics of one Dense/Conv2D layer from the global (a, δ)."""
        layer, result = tap.layer, {}
        if tap.kernel_path is not None:
            if isinstance(layer, keras.layers.Conv2D):
                result[tap.kernel_path] = factored.conv2d_kernel_stats(
                    a,
                    delta,
                    layer.kernel_size,
                    layer.strides,
                    layer.dilation_rate,
                    layer.padding,
                    labels,
                    spec,
                    self._compute_gram,
                    self._chunk_size,
                )
            else:
                if a.shape.rank == 2:
                    result[tap.kernel_path] = factored.dense_kernel_stats(
                        a, delta, labels, spec, self._compute_gram, n_hint
                    )
                else:  # Dense on [n, ..., K] inputs: positions are the middle axes.
                    result[tap.kernel_path] = factored.positional_kernel_stats(
                        factored.flatten_positions(a),
                        factored.flatten_positions(delta),
                        labels,
                        spec,
                        self._compute_gram,
                        self._chunk_size,
                    )
        if tap.bias_path is not None:
            result[tap.bias_path] = factored.bias_stats(delta, labels, spec, self._compute_gram)
        return result

    def _jacobian(self, tape, targets, variables) -> dict:
        """Per-example gradient chunks via pfor Jacobians of per-example-loss chunks."""
        chunks = {p: [] for _, p in variables}
        for target in targets:
            jac = tape.jacobian(
                target,
                [v for v, _ in variables],
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
                experimental_use_pfor=True,
            )
            for (_, p), j in zip(variables, jac):
                chunks[p].append(_flat(j))
        return chunks

    def _one_example_fn(self, loss_fn: LossFn, training, variables) -> Callable:
        """A function (x_i, y_i) -> flattened gradients of loss_i from a batch-of-one forward pass."""
        vs = [v for v, _ in variables]
        model = self._model

        def one_example(args):
            xi, yi = args
            xi = tf.nest.map_structure(lambda t: t[tf.newaxis], xi)
            with tf.GradientTape() as tape:
                li = tf.reduce_sum(loss_fn(yi[tf.newaxis], model(xi, training=training)))
            g = tape.gradient(li, vs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            return [tf.reshape(tf.cast(gi, tf.float32), [-1]) for gi in g]

        return one_example

    def _loop(self, x, labels, loss_fn, training, variables) -> dict:
        """Per-example gradients, one `tape.gradient` per example in a sequential loop (oracle).

        Materialises all of them: memory n × variable size.
        """
        signature = [tf.TensorSpec([v.shape.num_elements()], tf.float32) for v, _ in variables]
        out = tf.map_fn(
            self._one_example_fn(loss_fn, training, variables),
            (x, labels),
            fn_output_signature=signature,
            parallel_iterations=1,
        )
        return {p: [g] for (_, p), g in zip(variables, out)}

    def _vectorized_map(self, x, labels, loss_fn, training, variables, n_static) -> dict:
        """Per-example gradients from `tf.vectorized_map` over batch-of-one forward passes, in chunks."""
        one_example = self._one_example_fn(loss_fn, training, variables)
        chunks = {p: [] for _, p in variables}
        for s, e in _chunks(n_static, self._chunk_size):
            xs = tf.nest.map_structure(lambda t: t[s:e], x)
            out = tf.vectorized_map(one_example, (xs, labels[s:e]))
            for (_, p), g in zip(variables, out):
                chunks[p].append(g)
        return chunks
