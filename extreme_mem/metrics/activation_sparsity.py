"""Activation sparsity and neuron specialisation per probe layer (Maennel et al., NeurIPS 2020, sec. 3).

At evaluation time a fixed set of held-out examples goes through the model's probe layers
(any model, any probe; ReLU probes make "active" mean "output > 0"). A unit is *active* on an
example when its output exceeds `threshold`. Per probe layer:

- `eval/inactive_fraction/<layer>`: fraction of (example, unit) pairs that are inactive;
- `eval/dead_fraction/<layer>`: fraction of units active on none of the examples;
- the two specialisation distributions of Figs. 7, 10, 11: neurons over the fraction of examples
  that activate them (`neuron_rates`), and examples over the fraction of neurons they activate
  (`example_rates`); their means are `eval/neuron_activation_rate/<layer>` and
  `eval/example_activation_rate/<layer>`.

For conv layers a unit is one (position, channel) output by default (`unit='element'`), or one
channel, active when it fires anywhere in the image (`unit='channel'`).

The full distributions of each evaluation are kept in `self.distributions` and, when the plugin
knows its run directory (`EvalContext.workdir` if present, else the `logdir` knob or
`set_logdir`), written as
TensorBoard histograms to `<workdir>/tensorboard/eval/` (`neuron_rates/<layer>`,
`example_rates/<layer>`) and as arrays to `<workdir>/activation_sparsity/step_<N>.npz`, from which
`plot_distributions` draws the PNGs.
"""

import os
from typing import Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.metrics import base
from extreme_mem.models import base as models_base

SPLITS = ('test', 'train')
UNITS = ('element', 'channel')


def activity(representations: np.ndarray, threshold: float = 0.0, unit: str = 'element') -> np.ndarray:
    """[n, units] bool: unit active (> threshold) on example, from [n, ...] probe outputs."""
    if unit not in UNITS:
        raise ValueError(f'Unknown unit {unit!r}; valid: {list(UNITS)}.')
    r = np.asarray(representations)
    if unit == 'channel' and r.ndim > 2:
        r = r.reshape(r.shape[0], -1, r.shape[-1]).max(axis=1)
    return r.reshape(r.shape[0], -1) > threshold


def sparsity_stats(active: np.ndarray) -> dict:
    """Statistics of an [n, units] activity matrix.

    Returns:
      `inactive_fraction`, `dead_fraction` (floats), `neuron_rates` [units] (fraction of examples
      activating each unit), `example_rates` [n] (fraction of units each example activates).
    """
    a = np.asarray(active, dtype=bool)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f'activity must be a non-empty [n, units] matrix, got shape {a.shape}.')
    neuron_rates = a.mean(axis=0)
    return {'inactive_fraction': float(1.0 - a.mean()), 'dead_fraction': float(np.mean(neuron_rates == 0)),
            'neuron_rates': neuron_rates, 'example_rates': a.mean(axis=1)}


@registry.METRICS.register('activation_sparsity')
@gin.configurable(module='metrics')
class ActivationSparsity(base.MetricPlugin):
    """Inactive and dead units and the specialisation distributions of every probe layer."""

    needs = frozenset()  # evaluation only

    def __init__(
        self,
        split: str = 'test',  # held-out examples (Figs. 10-11: 5k test images)
        num_examples: Optional[int] = 5000,
        threshold: float = 0.0,
        unit: str = 'element',
        layers: Optional[Sequence[str]] = None,  # probe names; None: every probe layer
        at_steps: Optional[Sequence[int]] = None,  # None: every evaluation
        bins: int = 20,
        batch_size: int = 512,
        seed: int = 0,
        logdir: Optional[str] = None,  # run directory for histograms/arrays (see the module docstring)
    ):
        super().__init__(every_n_steps=None)
        if split not in SPLITS:
            raise ValueError(f'Unknown split {split!r}; valid: {list(SPLITS)}.')
        if unit not in UNITS:
            raise ValueError(f'Unknown unit {unit!r}; valid: {list(UNITS)}.')
        if num_examples is not None and num_examples < 1:
            raise ValueError(f'num_examples must be >= 1 or None, got {num_examples}.')
        self._split, self._num_examples, self._threshold, self._unit = split, num_examples, threshold, unit
        self._layers = None if layers is None else list(layers)
        self._at_steps = None if at_steps is None else set(at_steps)
        self._bins, self._batch_size, self._seed = int(bins), int(batch_size), seed
        self._logdir: Optional[str] = logdir
        self.distributions: dict = {}  # step -> layer -> {'neuron_rates', 'example_rates'}

    def set_logdir(self, workdir: str) -> None:
        """Run directory for histograms and arrays (used when the evaluation context has none)."""
        self._logdir = workdir

    def _positions(self, n: int) -> np.ndarray:
        if self._num_examples is None or self._num_examples >= n:
            return np.arange(n)
        return np.sort(np.random.default_rng(self._seed).choice(n, size=self._num_examples, replace=False))

    def evaluate(self, context: base.EvalContext) -> dict:
        if self._at_steps is not None and context.step not in self._at_steps:
            return {}
        split = getattr(context.data, self._split)
        images = split.images[self._positions(split.num_examples)]
        probed = models_base.with_probes(context.model)
        chunks: dict = {}
        for start in range(0, len(images), self._batch_size):
            _, reps = probed(images[start:start + self._batch_size], training=False)
            for layer, value in reps.items():
                if self._layers is None or layer in self._layers:
                    chunks.setdefault(layer, []).append(activity(np.asarray(value), self._threshold, self._unit))
        results, step_dists = {}, {}
        for layer, parts in chunks.items():
            stats = sparsity_stats(np.concatenate(parts))
            results[f'eval/inactive_fraction/{layer}'] = stats['inactive_fraction']
            results[f'eval/dead_fraction/{layer}'] = stats['dead_fraction']
            results[f'eval/neuron_activation_rate/{layer}'] = float(stats['neuron_rates'].mean())
            results[f'eval/example_activation_rate/{layer}'] = float(stats['example_rates'].mean())
            step_dists[layer] = {'neuron_rates': stats['neuron_rates'], 'example_rates': stats['example_rates']}
        self.distributions[int(context.step)] = step_dists
        logdir = getattr(context, 'workdir', None) or self._logdir
        if logdir and step_dists:
            self._write(logdir, int(context.step), step_dists)
        return results

    def _write(self, logdir: str, step: int, dists: dict) -> None:
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        writer = tf.summary.create_file_writer(os.path.join(logdir, 'tensorboard', 'eval'))
        with writer.as_default(step=step):
            for layer, d in dists.items():
                for name, values in d.items():
                    tf.summary.histogram(f'{name}/{layer}', values, buckets=self._bins)
        writer.close()
        directory = os.path.join(logdir, 'activation_sparsity')
        os.makedirs(directory, exist_ok=True)
        arrays = {f'{layer}/{name}': v for layer, d in dists.items() for name, v in d.items()}
        tmp = os.path.join(directory, f'.step_{step}.npz')
        np.savez(tmp, **arrays)
        os.replace(tmp, os.path.join(directory, f'step_{step}.npz'))


def load_distributions(run_dir: str) -> dict:
    """step -> layer -> {'neuron_rates', 'example_rates'} from `<run_dir>/activation_sparsity/`."""
    directory = os.path.join(run_dir, 'activation_sparsity')
    out: dict = {}
    if not os.path.isdir(directory):
        return out
    for name in sorted(os.listdir(directory)):
        if name.startswith('step_') and name.endswith('.npz'):
            with np.load(os.path.join(directory, name)) as z:
                step = int(name[len('step_'):-len('.npz')])
                for key in z.files:
                    layer, _, kind = key.rpartition('/')
                    out.setdefault(step, {}).setdefault(layer, {})[kind] = z[key]
    return dict(sorted(out.items()))


def plot_distributions(dists: dict, path: str, title: str = '', bins: int = 20) -> bool:
    """PNG of Figs. 7/10/11: per layer (rows), neurons over the fraction of examples activating
    them (left) and examples over the fraction of neurons they activate (right).

    Args:
      dists: layer -> {'neuron_rates', 'example_rates'} (one evaluation).

    Returns:
      False when there is nothing to draw.
    """
    if not dists:
        return False
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

    layers = list(dists)
    fig, axes = plt.subplots(len(layers), 2, figsize=(8, 1.8 * len(layers) + 0.8), squeeze=False)
    edges = np.linspace(0, 1, bins + 1)
    for row, layer in zip(axes, layers):
        for ax, kind, xlabel in ((row[0], 'neuron_rates', 'fraction of examples activating a neuron'),
                                 (row[1], 'example_rates', 'fraction of neurons an example activates')):
            values = np.asarray(dists[layer][kind])
            ax.hist(values, bins=edges, weights=np.full(len(values), 1.0 / max(len(values), 1)))
            ax.set_xlim(0, 1)
            ax.set_ylabel(layer, fontsize=8)
            ax.tick_params(labelsize=7)
        if row is axes[-1]:
            row[0].set_xlabel('fraction of examples activating a neuron', fontsize=8)
            row[1].set_xlabel('fraction of neurons an example activates', fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
