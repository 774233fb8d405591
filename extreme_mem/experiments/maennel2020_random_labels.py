"""Maennel, Alabdulmohsin, Tolstikhin, Baldock, Bousquet, Gelly & Keysers (NeurIPS 2020),
"What Do Neural Networks Learn When Trained With Random Labels?".

`RandomLabelTransfer` (registered `random_label_transfer`) runs one figure or table of the paper
as groups of single runs, then writes `report.md`, `report.json` and `figures/*.png`:

- **upstream** runs (appendix A.1): `NUM_EXAMPLES_UPSTREAM` examples labelled with
  `NUM_CLASSES_UPSTREAM` random classes (`data.ArraySource.train_parts` part 0 and
  `random_classes`), trained `upstream_steps_factor` × `train.Trainer.num_steps` steps;
- **downstream** runs, one per transfer arm and seed, on the disjoint part 1 of the training
  split with real labels (or `NUM_CLASSES_DOWNSTREAM` random labels): the model `transferred`
  (below) starts from the arm's weights (`models/transfer.py`, appendix A.4), and the
  area under the full-training-set accuracy curve (AUC, appendix B) summarises each run;
- **table1** runs (sec. 2.5): the downstream data from a model whose first k conv layers are
  initialised layer by layer from the data covariance, accuracies at `table1_iterations`;
- **fsigma** runs (sec. 2.3, Fig. 4 left, E.1): 2-hidden-layer ReLU FCNs (`fcn`, first layer
  256 or 2,048 units, second 256) on N(0, diag(0.1, ..., 3.0)) with random labels; f(σ) of the
  first layer is pooled over seeds.
The first-layer misalignment of Fig. 2 is logged during every upstream and scratch run by the
`covariance_alignment` metric (data eigenbasis vs random bases; step 0 is the init value).

Runs are `single_run` processes. Runs that start from other weights use the model
`transferred`, a wrapper registered here that builds the base model and applies the arm (it
reads the upstream checkpoint and, for the data-covariance init, the training images), because
`SingleRun.build_model` receives only the dataset info; see `docs/maennel2020.md`.

Groups: every point of `sweep` (a grid) or of `random_axes` (appendix B), crossed with
`variants`, is one group: its bindings apply to all of its upstream, downstream and table1 runs,
which are named `<group>,<role>[,arm=..],seed=N`.
"""

import json
import os
import pathlib
import textwrap
from typing import Mapping, Optional, Sequence

import gin
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem import registry
from extreme_mem.experiments import sweep as sweep_lib
from extreme_mem.experiments import sweep_experiment
from extreme_mem.geometry import covariance
from extreme_mem.metrics import activation_sparsity
from extreme_mem.models import transfer
from extreme_mem.summaries import report as report_lib
from extreme_mem.summaries import results as results_lib

PAPER = ('Maennel et al. (NeurIPS 2020), "What Do Neural Networks Learn When Trained With Random Labels?"')
ROLES = ('upstream', 'downstream', 'table1', 'fsigma')
MODEL_ARMS = transfer.ARMS + ('data_covariance',)
FRESH_SEED_OFFSET = 1000
GROUP_KNOBS = ('upstream_epochs', 'upstream_steps_factor')  # variant / sweep keys that are not bindings  # downstream models (every arm) draw fresh layers from seed + this


# ---- the `transferred` model: a base model started from an arm's weights ----------------------------


@registry.MODELS.register('transferred')
@gin.configurable(module='models')
def transferred(
    input_shape: Sequence[int],
    num_outputs: int,
    arm: str = 'scratch',
    base_model: str = 'simple_cnn',
    upstream_dir: Optional[str] = None,
    upstream_outputs: Optional[int] = None,
    upstream_seed: Optional[int] = None,
    num_layers: Optional[int] = None,
    norm: Optional[str] = 'l2',
    dataset: Optional[str] = None,
    taus: Optional[Sequence[float]] = None,
    eigen_mode: str = 'eigenvectors',
    seed: Optional[int] = None,
) -> keras.Model:
    """`base_model` with fresh weights (seed + 1000), then the transfer arm applied.

    Args:
      input_shape, num_outputs: of the downstream data.
      arm: one of `transfer.ARMS` or 'data_covariance' (sec. 2.5).
      base_model: name in `registry.MODELS` (its own gin knobs apply to every copy).
      upstream_dir: the upstream run directory (its latest checkpoint is the pre-trained model).
      upstream_outputs: the upstream head width (`NUM_CLASSES_UPSTREAM`).
      upstream_seed: the upstream run's seed (rebuilds its initialisation for the norms).
      num_layers: kernel layers to transfer (None: the arm's default), or conv layers for
        'data_covariance'.
      norm: 'l2', 'l1' or None (no re-scaling; ResNets).
      dataset: name in `registry.DATASETS` whose training images feed 'data_covariance' (None:
        the run's `experiments.Experiment.dataset`).
      taus, eigen_mode: see `transfer.data_covariance_init`.
      seed: the run seed.
    """
    if arm not in MODEL_ARMS:
        raise ValueError(f'Unknown arm {arm!r}; valid: {list(MODEL_ARMS)}.')
    build = registry.MODELS.get(base_model)
    base_seed = 0 if seed is None else int(seed)
    fresh = build(input_shape=input_shape, num_outputs=num_outputs, seed=base_seed + FRESH_SEED_OFFSET)
    if arm == 'scratch':
        return fresh
    if arm == 'data_covariance':
        dataset = dataset or _bound_dataset()
        images = registry.DATASETS.get(dataset)().load(seed=base_seed).train.images
        names = transfer.data_covariance_init(fresh, images, int(num_layers or 0), taus, eigen_mode, seed=base_seed)
        logging.info('Data-covariance init of %s.', names)
        return fresh
    if upstream_dir is None or upstream_outputs is None:
        raise ValueError(f'Arm {arm!r} needs models.transferred.upstream_dir and upstream_outputs.')
    up_seed = base_seed if upstream_seed is None else int(upstream_seed)
    upstream = build(input_shape=input_shape, num_outputs=int(upstream_outputs), seed=up_seed)
    upstream_init = build(input_shape=input_shape, num_outputs=int(upstream_outputs), seed=up_seed)
    path = transfer.restore_checkpoint(upstream, upstream_dir)
    info = transfer.prepare_downstream(arm, fresh, upstream, upstream_init, num_layers, norm, seed=base_seed)
    logging.info('Arm %s from %s: transferred %s, re-scale factors %s.', arm, path, info['transferred'],
                 {k: round(v, 4) for k, v in info['rescale_factors'].items()})
    return fresh


def _bound_dataset() -> str:
    """The dataset name bound to `experiments.Experiment.dataset` (the single run's default if unbound)."""
    try:
        return str(gin.query_parameter('experiments.Experiment.dataset'))
    except ValueError:
        return 'digits'


def checkpoint_variables(run_dir: os.PathLike) -> list:
    """The trainable variables of a run's latest checkpoint, in model order (read without a model)."""
    latest = tf.train.latest_checkpoint(str(pathlib.Path(run_dir) / 'checkpoints'))
    if latest is None:
        return []
    prefix = 'optimizer/_trainable_variables/'
    found = {}
    for name, _ in tf.train.list_variables(latest):
        if name.startswith(prefix) and name.endswith('/.ATTRIBUTES/VARIABLE_VALUE'):
            found[int(name[len(prefix):].split('/')[0])] = tf.train.load_variable(latest, name)
    return [found[i] for i in sorted(found)]


# ---- the experiment -------------------------------------------------------------------------------


def _auc(record: Optional[dict], num_steps: Optional[int]) -> float:
    steps, values = results_lib.series(record or {'history': []}, 'train/accuracy')
    if len(steps) < 2:
        return float('nan')
    return transfer.training_auc(steps, values, num_steps if num_steps and num_steps >= steps[-1] else None)


def _value_at(record: Optional[dict], tag: str, step: int) -> float:
    """The tag's value at the last evaluation at or before `step`."""
    steps, values = results_lib.series(record or {'history': []}, tag)
    picked = [v for s, v in zip(steps, values) if s <= step]
    return float(picked[-1]) if picked else float('nan')


def _mean_std(values) -> tuple:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    return (float(v.mean()), float(v.std()), len(v)) if len(v) else (float('nan'), float('nan'), 0)


@registry.EXPERIMENTS.register('random_label_transfer')
@gin.configurable(module='experiments', denylist=['workdir', 'seed'])
class RandomLabelTransfer(sweep_experiment.SweepExperiment):
    """Maennel et al. (2020): transfer from random labels, alignment, f(σ), Table 1, specialisation.

    Args:
      workdir, seed, **kwargs: see `SweepExperiment` (`sweep`/`random_axes` points and
        `variants` define the groups; `seeds` are the seeds of every group, default [0, 1, 2]).
      base_model: model of upstream and downstream runs (name in `registry.MODELS`).
      arms: transfer arms run downstream (subset of `transfer.ARMS`); [] skips upstream and
        downstream runs.
      layer_counts: extra arms `pretrained_layers=k` transferring the first k kernel layers
        (Figs. 6 and 9).
      rescale: 'l2', 'l1' or None (ResNets) for the re-scaled arms.
      upstream_steps_factor: upstream steps = this × `train.Trainer.num_steps`.
      upstream_epochs, downstream_epochs: instead of the factor, upstream steps =
        num_steps × (upstream_epochs · NUM_EXAMPLES_UPSTREAM) / (downstream_epochs ·
        NUM_EXAMPLES_DOWNSTREAM), so the budgets keep the paper's epoch ratio (and shrink with
        num_steps). A variant or sweep point may carry `upstream_epochs` or
        `upstream_steps_factor` as a key: it sets that group's value instead of a binding.
      upstream_bindings, downstream_bindings: extra bindings of those roles.
      table1_layers: numbers of data-initialised conv layers for Table 1 ([] skips it).
      table1_iterations: steps at which Table 1 reads the accuracies (the last evaluation at or
        before each; make them evaluation steps).
      table1_model, table1_bindings: the Table 1 CNN (appendix E.3) and its bindings.
      table1_taus, table1_mode: τ_i and 'eigenvectors' / 'sample' (Tables 1-4).
      table1_seeds: seeds of the Table 1 runs (None: `seeds`); table1_steps_factor as for upstream.
      fsigma_widths: first-layer widths of the synthetic f(σ) FCN ([] skips it); fsigma_seeds its
        runs; fsigma_second_width the second hidden layer (256 in appendix E.1).
      fsigma_bindings: extra bindings of the f(σ) runs; fsigma_steps_factor as for upstream.
      sparsity_runs: roles whose runs log `activation_sparsity` histograms to their directory.
      max_group_examples: caps `NUM_EXAMPLES_UPSTREAM/DOWNSTREAM` values that variants, sweep or
        random points bind (shrinks appendix-B files for smoke tests; None: no cap).
    """

    name = 'random_label_transfer'
    paper = PAPER
    default_panels = {
        'train_accuracy': ['train/accuracy'],
        'test_accuracy': ['test/accuracy'],
    }
    panel_titles = {'train_accuracy': 'Training accuracy (whole training set)', 'test_accuracy': 'Test accuracy'}
    default_quantities = {}
    # Shrinks every gin file of gin/maennel2020/ for the 2-step smoke test (tests/gin_files_test.py).
    smoke_bindings = (
        'NUM_EXAMPLES_UPSTREAM = 24', 'NUM_EXAMPLES_DOWNSTREAM = 24',
        'metrics.CovarianceAlignment.num_examples = 24', 'metrics.ActivationSparsity.num_examples = 16',
        'experiments.RandomLabelTransfer.fsigma_seeds = [0]', 'experiments.RandomLabelTransfer.max_group_examples = 24',
        'models.vgg16_d.width_multiplier = 0.125', 'models.resnet18_gn.width = 8', 'models.resnet18_gn.groups = 4',
        "experiments.RandomLabelTransfer.fsigma_bindings = {'data.GaussianCovariance.num_train': 64, "
        "'data.GaussianCovariance.num_test': 16}",
    )

    def __init__(
        self,
        workdir: str,
        seed: int = 0,
        base_model: str = 'simple_cnn',
        arms: Sequence[str] = transfer.ARMS,
        layer_counts: Sequence[int] = (),
        rescale: Optional[str] = 'l2',
        upstream_steps_factor: float = 1.0,
        upstream_epochs: Optional[float] = None,
        downstream_epochs: Optional[float] = None,
        upstream_bindings: Optional[Mapping[str, object]] = None,
        downstream_bindings: Optional[Mapping[str, object]] = None,
        table1_layers: Sequence[int] = (),
        table1_iterations: Sequence[int] = (100, 1000),
        table1_model: str = 'simple_cnn',
        table1_bindings: Optional[Mapping[str, object]] = None,
        table1_taus: Optional[Sequence[float]] = None,
        table1_mode: str = 'eigenvectors',
        table1_seeds: Optional[Sequence[int]] = None,
        table1_steps_factor: float = 1.0,
        fsigma_widths: Sequence[int] = (),
        fsigma_seeds: Sequence[int] = (0, 1, 2),
        fsigma_bindings: Optional[Mapping[str, object]] = None,
        fsigma_steps_factor: float = 1.0,
        fsigma_second_width: int = 256,
        sparsity_runs: Sequence[str] = ('upstream', 'downstream'),
        max_group_examples: Optional[int] = None,
        **kwargs,
    ):
        for arm in arms:
            if arm not in transfer.ARMS:
                raise ValueError(f'Unknown transfer arm {arm!r}; valid: {list(transfer.ARMS)}.')
        if rescale not in (None, 'l2', 'l1'):
            raise ValueError(f'rescale must be None, "l2" or "l1", got {rescale!r}.')
        if table1_mode not in ('eigenvectors', 'sample'):
            raise ValueError(f'Unknown table1_mode {table1_mode!r}; valid: ["eigenvectors", "sample"].')
        for role in sparsity_runs:
            if role not in ROLES:
                raise ValueError(f'Unknown role {role!r} in sparsity_runs; valid: {list(ROLES)}.')
        self.base_model, self.arms, self.layer_counts = base_model, list(arms), [int(k) for k in layer_counts]
        self.rescale = rescale
        self.upstream_steps_factor, self.fsigma_steps_factor = float(upstream_steps_factor), float(fsigma_steps_factor)
        self.upstream_epochs = None if upstream_epochs is None else float(upstream_epochs)
        self.downstream_epochs = None if downstream_epochs is None else float(downstream_epochs)
        self.upstream_bindings = dict(upstream_bindings or {})
        self.downstream_bindings = dict(downstream_bindings or {})
        self.table1_layers, self.table1_iterations = [int(k) for k in table1_layers], [int(i) for i in table1_iterations]
        self.table1_model, self.table1_bindings = table1_model, dict(table1_bindings or {})
        self.table1_taus, self.table1_mode = None if table1_taus is None else list(table1_taus), table1_mode
        self.table1_seeds = None if table1_seeds is None else [int(x) for x in table1_seeds]
        self.table1_steps_factor = float(table1_steps_factor)
        self.fsigma_widths, self.fsigma_seeds = [int(w) for w in fsigma_widths], [int(s) for s in fsigma_seeds]
        self.fsigma_bindings = dict(fsigma_bindings or {})
        self.fsigma_second_width = int(fsigma_second_width)
        self.sparsity_runs = list(sparsity_runs)
        self.max_group_examples = max_group_examples
        kwargs.setdefault('seeds', [0, 1, 2])
        super().__init__(workdir=workdir, seed=seed, **kwargs)

    # ---- specs ---------------------------------------------------------------------------------

    def _num_steps(self) -> int:
        try:
            return int(gin.query_parameter('train.Trainer.num_steps'))
        except ValueError:
            return 10_000  # the Trainer's default

    def _groups(self) -> list:
        """[(group name, {binding_key: value})]: variants × (grid or random) points."""
        if self.random_axes:
            points = sweep_lib.random_points(self.random_axes, self.num_samples, seed=self.seed)
            names = [f'{i:03d}' for i in range(len(points))]
        else:
            points = sweep_lib.expand_axes(self.sweep)
            names = [sweep_lib.safe_name(','.join(f'{k.split(".")[-1]}={sweep_lib._format(v)}'  # pylint: disable=protected-access
                                                  for k, v in p.items())) if p else '' for p in points]
        groups = []
        for variant, variant_bindings in (self.variants or {'': {}}).items():
            for name, point in zip(names, points):
                label = ','.join(x for x in (str(variant), name) if x)
                bindings = {**dict(variant_bindings or {}), **point}
                knobs = {k: bindings.pop(k) for k in GROUP_KNOBS if k in bindings}
                for k in ('NUM_EXAMPLES_UPSTREAM', 'NUM_EXAMPLES_DOWNSTREAM'):
                    if self.max_group_examples and k in bindings:
                        bindings[k] = min(int(bindings[k]), int(self.max_group_examples))
                groups.append((label, {'variant': variant} if self.variants else {}, point, bindings, knobs))
        return groups

    def _macro(self, bindings: Mapping, name: str) -> float:
        if name in bindings:
            return float(bindings[name])
        return float(gin.query_parameter(f'%{name}'))

    def _upstream_steps(self, steps: int, bindings: Mapping, knobs: Mapping) -> int:
        epochs = knobs.get('upstream_epochs', self.upstream_epochs)
        if epochs is None:
            return max(1, round(float(knobs.get('upstream_steps_factor', self.upstream_steps_factor)) * steps))
        if not self.downstream_epochs:
            raise ValueError('upstream_epochs needs downstream_epochs (the epochs of train.Trainer.num_steps).')
        ratio = (float(epochs) * self._macro(bindings, 'NUM_EXAMPLES_UPSTREAM')
                 / (self.downstream_epochs * self._macro(bindings, 'NUM_EXAMPLES_DOWNSTREAM')))
        return max(1, round(steps * ratio))

    def _spec(self, group: str, extra_values: dict, point: dict, role: str, bindings: list, seed: int,
              suffix: str = '') -> sweep_lib.RunSpec:
        name = sweep_lib.safe_name(','.join(x for x in (group, role + suffix, f'seed={seed}') if x))
        values = {**({'group': group} if group else {}), **extra_values, **point, 'role': role, 'seed': seed}
        return sweep_lib.RunSpec(name=name, values=values, bindings=tuple(bindings), seed=seed)

    @staticmethod
    def _bind(mapping: Mapping) -> list:
        return [f'{k} = {v}' if isinstance(v, str) and v.startswith('%') else f'{k} = {v!r}'
                for k, v in mapping.items()]

    def _sparsity(self, role: str, run_dir: pathlib.Path, num_steps: int) -> list:
        """Activation histograms of this run at initialisation and at its end, into its directory."""
        if role not in self.sparsity_runs:
            return []
        return [f'metrics.ActivationSparsity.logdir = {str(run_dir)!r}',
                f'metrics.ActivationSparsity.at_steps = [0, {int(num_steps)}]']

    def specs(self) -> list:
        steps = self._num_steps()
        specs = []
        for group, extra, point, group_bindings, knobs in self._groups():
            common = self._bind(group_bindings)
            for s in (self.seeds or [self.seed]):
                if self.arms or self.layer_counts:
                    up = self._spec(group, extra, point, 'upstream', [], s)
                    up_dir = sweep_lib.run_dir(self.workdir, up)
                    up_bindings = common + [
                        'data.ArraySource.train_part = 0',
                        'data.ArraySource.random_classes = %NUM_CLASSES_UPSTREAM',
                        f'experiments.Experiment.model = {self.base_model!r}',
                    ] + self._bind(self.upstream_bindings)
                    up_steps = self._upstream_steps(steps, group_bindings, knobs)
                    if up_steps != steps:
                        up_bindings.append(f'train.Trainer.num_steps = {up_steps}')
                    up_bindings += self._sparsity('upstream', up_dir, up_steps)
                    specs.append(sweep_lib.RunSpec(up.name, up.values, tuple(up_bindings), s))
                    arms = [(a, {'models.transferred.arm': a}) for a in self.arms]
                    arms += [(f'pretrained_layers={k}', {'models.transferred.arm': 'pretrained_conv_dense',
                                                         'models.transferred.num_layers': k})
                             for k in self.layer_counts]
                    for arm, arm_bindings in arms:
                        down = self._spec(group, {**extra, 'arm': arm}, point, 'downstream', [], s, f',arm={arm}')
                        bindings = common + [
                            'data.ArraySource.train_part = 1',
                            'data.ArraySource.random_classes = %NUM_CLASSES_DOWNSTREAM',
                            "experiments.Experiment.model = 'transferred'",
                            f'models.transferred.base_model = {self.base_model!r}',
                            f'models.transferred.upstream_dir = {str(up_dir)!r}',
                            'models.transferred.upstream_outputs = %NUM_CLASSES_UPSTREAM',
                            f'models.transferred.upstream_seed = {s}',
                            f'models.transferred.norm = {self.rescale!r}',
                        ] + self._bind(arm_bindings) + self._bind(self.downstream_bindings)
                        bindings += self._sparsity('downstream', sweep_lib.run_dir(self.workdir, down), steps)
                        specs.append(sweep_lib.RunSpec(down.name, down.values, tuple(bindings), s))
            for s in (self.table1_seeds if self.table1_seeds is not None else (self.seeds or [self.seed])):
                for k in self.table1_layers:
                    t = self._spec(group, {**extra, 'sampled_layers': k}, point, 'table1', [], s, f',layers={k}')
                    bindings = common + [
                        'data.ArraySource.train_part = 1',
                        'data.ArraySource.random_classes = None',
                        "experiments.Experiment.model = 'transferred'",
                        "models.transferred.arm = 'data_covariance'",
                        f'models.transferred.base_model = {self.table1_model!r}',
                        f'models.transferred.num_layers = {k}',
                        f'models.transferred.taus = {self.table1_taus!r}',
                        f'models.transferred.eigen_mode = {self.table1_mode!r}',
                    ] + self._bind(self.table1_bindings)
                    t_steps = max(1, round(self.table1_steps_factor * steps))
                    if self.table1_steps_factor != 1.0:
                        bindings.append(f'train.Trainer.num_steps = {t_steps}')
                    bindings += self._sparsity('table1', sweep_lib.run_dir(self.workdir, t), t_steps)
                    specs.append(sweep_lib.RunSpec(t.name, t.values, tuple(bindings), s))
        for width in self.fsigma_widths:
            for s in self.fsigma_seeds:
                f = self._spec('', {'width': width}, {}, 'fsigma', [], s, f',width={width}')
                bindings = [
                    "experiments.Experiment.dataset = 'gaussian_covariance'",
                    "experiments.Experiment.model = 'fcn'",
                    "experiments.Experiment.metrics = ['covariance_alignment']",
                    f'models.fcn.widths = [{width}, {self.fsigma_second_width}]',
                    "models.fcn.initializer = 'he_normal'", 'models.fcn.init_scale = 1.0',
                    "metrics.CovarianceAlignment.layers = ['hidden1']",
                    'metrics.CovarianceAlignment.transfer_function = True',
                    'data.GaussianCovariance.train_parts = None',
                ] + self._bind(self.fsigma_bindings)
                if self.fsigma_steps_factor != 1.0:
                    bindings.append(f'train.Trainer.num_steps = {max(1, round(self.fsigma_steps_factor * steps))}')
                specs.append(sweep_lib.RunSpec(f.name, f.values, tuple(bindings), s))
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f'Run names collide: {names}')
        if not specs:
            raise ValueError('random_label_transfer has no runs: set arms, layer_counts, table1_layers or '
                             'fsigma_widths.')
        return specs

    def run_all(self, specs) -> list:
        """Upstream, table1 and f(σ) runs first, then the downstream runs (they start from upstream weights)."""
        first = [s for s in specs if s.values['role'] != 'downstream']
        second = [s for s in specs if s.values['role'] == 'downstream']
        logging.info('%s: %d runs, then %d downstream runs, into %s', self.figure or self.name, len(first),
                     len(second), self.workdir)
        by_name = {s.name: r for s, r in self.run_specs(first)}
        by_name.update({s.name: r for s, r in self.run_specs(second)} if second else {})
        return [(s, by_name.get(s.name)) for s in specs]

    # ---- summary --------------------------------------------------------------------------------

    @staticmethod
    def _run_steps(record: Optional[dict]) -> Optional[int]:
        return (record or {}).get('final_step')

    def run_row(self, spec, record) -> dict:
        if spec.values.get('role') == 'downstream':
            return {'auc': _auc(record, self._run_steps(record))}
        return {}

    def summarize(self, results) -> dict:
        summary = super().summarize(results)
        present = list(dict.fromkeys(k for row in summary['runs'] for k in row))  # roles have different values
        first = [k for k in ('run', 'group', 'variant', 'role', 'arm', 'sampled_layers', 'width', 'seed') if k in present]
        columns = first + [k for k in present if k not in first]
        summary['runs'] = [{k: row.get(k, '') for k in columns} for row in summary['runs']]
        summary['misalignment'] = self._misalignment(results)
        summary['transfer'] = [
            {'group': s.values.get('group', ''), 'arm': s.values['arm'],
             'seed': s.values['seed'], 'auc': _auc(r, self._run_steps(r)),
             'final_train_acc': report_lib.last_value(r, 'train/accuracy')}
            for s, r in results if s.values['role'] == 'downstream']
        summary['transfer_by_arm'] = {}
        for arm in dict.fromkeys(row['arm'] for row in summary['transfer']):
            mean, std, n = _mean_std([row['auc'] for row in summary['transfer'] if row['arm'] == arm])
            summary['transfer_by_arm'][arm] = {'auc_mean': mean, 'auc_std': std, 'n': n}
        summary['table1'] = []
        for s, r in results:
            if s.values['role'] != 'table1':
                continue
            last = (r or {}).get('final_step') or 0
            for it in self.table1_iterations:
                step = min(it, last)
                summary['table1'].append({'sampled_layers': s.values['sampled_layers'], 'iterations': it,
                                          'train_acc': _value_at(r, 'train/accuracy', step),
                                          'test_acc': _value_at(r, 'test/accuracy', step), 'seed': s.values['seed']})
        summary['fsigma'] = self._fsigma(results)
        summary['fsigma_data'] = self._fsigma_data(results)
        summary['sparsity'] = self._sparsity_summary(results)
        return summary

    def _misalignment(self, results) -> list:
        """Per upstream (random labels) and scratch (real labels) run and layer: Fig. 2's numbers."""
        rows = []
        for s, r in results:
            role, arm = s.values['role'], s.values.get('arm')
            if not r or not (role == 'upstream' or (role == 'downstream' and arm == 'scratch')):
                continue
            layers = sorted({k.split('/', 3)[3] for h in r.get('history', []) for k in h
                             if k.startswith('eval/misalignment/data/')})
            for layer in layers:
                tag = f'eval/misalignment/{{}}/{layer}'
                rows.append({
                    'run': s.name, 'labels': 'random' if role == 'upstream' else 'real', 'seed': s.values['seed'],
                    'layer': layer,
                    'data': report_lib.last_value(r, tag.format('data')),
                    'random_mean': report_lib.last_value(r, tag.format('random_mean')),
                    'random_std': report_lib.last_value(r, tag.format('random_std')),
                    'init': _value_at(r, tag.format('data'), 0),
                    'init_random_mean': _value_at(r, tag.format('random_mean'), 0),
                    'init_random_std': _value_at(r, tag.format('random_std'), 0),
                })
        return rows

    def _fsigma(self, results) -> dict:
        """f(σ) per width: σ_i averaged and τ_i = sqrt(mean τ_i²) pooled over the seeds (Fig. 4 left)."""
        out = {}
        for width in self.fsigma_widths:
            records = [r for s, r in results if s.values['role'] == 'fsigma' and s.values['width'] == width and r]
            sig, tau = [], []
            for r in records:
                final = r.get('final', {})
                n = len([k for k in final if k.startswith('eval/transfer_tau/hidden1/')])
                if n:
                    sig.append([final[f'eval/transfer_sigma/hidden1/{i}'] for i in range(n)])
                    tau.append([final[f'eval/transfer_tau/hidden1/{i}'] for i in range(n)])
            if not tau or len({len(t) for t in tau}) != 1:
                out[str(width)] = {'sigma': [], 'tau': [], 'num_runs': 0}
                continue
            sig, tau = np.asarray(sig, float), np.asarray(tau, float)
            pooled = np.sqrt(np.mean(tau**2, axis=0))
            out[str(width)] = {'sigma': sig.mean(axis=0).tolist(), 'tau': pooled.tolist(),
                               'tau_std_over_runs': tau.std(axis=0).tolist(), 'num_runs': len(tau),
                               'peak_sigma': float(sig.mean(axis=0)[int(np.argmax(pooled))])}
        return out

    def _fsigma_data(self, results) -> dict:
        """f(σ) of the filters of upstream (random labels) and scratch (real labels) runs that logged
        `eval/transfer_tau/<layer>/<i>` (Fig. 4 centre/right), pooled over seeds: '<labels>/<layer>' -> curve."""
        pooled: dict = {}
        for s, r in results:
            role, arm = s.values['role'], s.values.get('arm')
            if not r or not (role == 'upstream' or (role == 'downstream' and arm == 'scratch')):
                continue
            final = r.get('final', {})
            layers = sorted({k.split('/')[2] for k in final if k.startswith('eval/transfer_tau/')})
            for layer in layers:
                n = len([k for k in final if k.startswith(f'eval/transfer_tau/{layer}/')])
                key = f'{"random" if role == "upstream" else "real"}/{layer}'
                pooled.setdefault(key, []).append(
                    ([final[f'eval/transfer_sigma/{layer}/{i}'] for i in range(n)],
                     [final[f'eval/transfer_tau/{layer}/{i}'] for i in range(n)]))
        out = {}
        for key, curves in pooled.items():
            if len({len(c[0]) for c in curves}) != 1:
                continue
            sig = np.asarray([c[0] for c in curves], float)
            tau = np.asarray([c[1] for c in curves], float)
            out[key] = {'sigma': sig.mean(0).tolist(), 'tau': np.sqrt(np.mean(tau**2, 0)).tolist(), 'num_runs': len(curves)}
        return out

    def _sparsity_summary(self, results) -> list:
        rows = []
        for s, r in results:
            if not r:
                continue
            tags = sorted({k for k in r.get('final', {}) if k.startswith('eval/dead_fraction/')})
            for tag in tags:
                layer = tag.split('/', 2)[2]
                rows.append({'run': s.name, 'role': s.values['role'], 'arm': s.values.get('arm', ''), 'layer': layer,
                             'init_inactive': _value_at(r, f'eval/inactive_fraction/{layer}', 0),
                             'final_inactive': report_lib.last_value(r, f'eval/inactive_fraction/{layer}'),
                             'final_dead': report_lib.last_value(r, tag)})
        return rows

    # ---- report ---------------------------------------------------------------------------------

    def report_sections(self, summary) -> list:
        lines = []
        if summary['misalignment']:
            lines += ['## Misalignment of first-layer filters with the data (Fig. 2)', '',
                      'M(Σ_x, Σ_w) of Definition 2 (perfect alignment = 0; appendix A.6 subtracts 1 instead of d). '
                      '*data*: Σ_x\'s eigenbasis; *random*: mean ± std over random orthonormal bases; '
                      '*init*: at step 0 (the noise floor).', '',
                      report_lib.markdown_table(summary['misalignment'],
                                                ['run', 'labels', 'layer', 'init', 'data', 'random_mean', 'random_std',
                                                 'init_random_mean']), '']
        if summary['transfer']:
            lines += ['## Transfer: area under the training-accuracy curve (appendix B)', '',
                      'AUC of the whole-training-set accuracy over the downstream steps, normalised to [0, 1].', '',
                      report_lib.markdown_table([{'arm': a, 'AUC mean': v['auc_mean'], 'AUC std': v['auc_std'],
                                                  'runs': v['n']} for a, v in summary['transfer_by_arm'].items()]), '']
        if summary['table1']:
            lines += ['## Table 1: data-covariance initialisation of the first k conv layers (sec. 2.5)', '',
                      self._table1_markdown(summary['table1']), '']
        if any(v['num_runs'] for v in summary['fsigma'].values()):
            lines += ['## f(σ) on N(0, diag(0.1, ..., 3.0)) (Fig. 4 left)', '']
            for width, v in summary['fsigma'].items():
                if v['num_runs']:
                    lines.append(f'- width {width}: {v["num_runs"]} runs; f peaks at σ = {v["peak_sigma"]:.3f} '
                                 f'(σ from {min(v["sigma"]):.3f} to {max(v["sigma"]):.3f}); '
                                 f'f(σ_min) = {v["tau"][-1]:.4f}, max f = {max(v["tau"]):.4f}, '
                                 f'f(σ_max) = {v["tau"][0]:.4f}.')
            lines.append('')
        if summary['sparsity']:
            lines += ['## Activation sparsity (sec. 3)', '',
                      report_lib.markdown_table(summary['sparsity']), '']
        return lines

    @staticmethod
    def _table1_markdown(rows) -> str:
        table = {}
        for row in rows:
            for split in ('train', 'test'):
                key = (row['iterations'], split)
                entry = table.setdefault(key, {'iterations': row['iterations'], 'data': split})
                entry.setdefault(f'{{{row["sampled_layers"]}}}', []).append(row[f'{split}_acc'])
        out = []
        for entry in table.values():
            out.append({k: (float(np.nanmean(v)) if isinstance(v, list) else v) for k, v in entry.items()})
        return report_lib.markdown_table(out)

    def extra_figures(self, results, figdir) -> list:
        written = []
        plt = _pyplot()
        misalignment_runs = [(s, r) for s, r in results if r and (
            s.values['role'] == 'upstream' or (s.values['role'] == 'downstream' and s.values.get('arm') == 'scratch'))]
        if any(k.startswith('eval/misalignment/') for _, r in misalignment_runs for h in r.get('history', []) for k in h):
            fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
            for ax, labels, role in ((axes[0], 'random labels (upstream)', 'upstream'),
                                     (axes[1], 'real labels (scratch)', 'downstream')):
                for s, r in misalignment_runs:
                    if s.values['role'] != role:
                        continue
                    for tag in sorted({k for h in r['history'] for k in h if k.startswith('eval/misalignment/data/')}):
                        layer = tag.split('/', 3)[3]
                        x, y = results_lib.series(r, tag)
                        _, m = results_lib.series(r, f'eval/misalignment/random_mean/{layer}')
                        _, sd = results_lib.series(r, f'eval/misalignment/random_std/{layer}')
                        line = ax.plot(x, y, label=f'{s.name}: data')[0]
                        if len(m) == len(x):
                            ax.plot(x, m, '--', color=line.get_color(), label=f'{s.name}: random basis')
                            ax.fill_between(x, np.subtract(m, sd), np.add(m, sd), color=line.get_color(), alpha=0.15)
                ax.set_title(labels)
                ax.set_xlabel('training steps')
                ax.grid(alpha=0.3)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=6)
            axes[0].set_ylabel('misalignment M(Σ_x, Σ_w)')
            written.append(self._save(fig, figdir / 'fig2_misalignment.png', 'Fig. 2: misalignment during training'))
        down = [(s, r) for s, r in results if r and s.values['role'] == 'downstream']
        if down:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for arm in dict.fromkeys(s.values['arm'] for s, _ in down):
                curves = [results_lib.series(r, 'train/accuracy') for s, r in down if s.values['arm'] == arm]
                curves = [c for c in curves if len(c[0])]
                if not curves:
                    continue
                n = min(len(c[0]) for c in curves)
                x = np.asarray(curves[0][0][:n])
                y = np.asarray([c[1][:n] for c in curves])
                line = ax.plot(x, y.mean(0), label=f'{arm} ({len(curves)} runs)')[0]
                ax.fill_between(x, y.mean(0) - y.std(0), y.mean(0) + y.std(0), color=line.get_color(), alpha=0.15)
            ax.set_xlabel('downstream training steps')
            ax.set_ylabel('training accuracy (whole training set)')
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
            written.append(self._save(fig, figdir / 'fig5_transfer_curves.png',
                                      'Fig. 5/6: downstream training accuracy per arm (mean ± std)'))
            scatter = self._auc_scatter(results)
            if scatter:
                fig, ax = plt.subplots(figsize=(5, 5))
                for arm, points in scatter.items():
                    ax.scatter([p[0] for p in points], [p[1] for p in points], label=arm, s=18)
                lo = min(min(p) for pts in scatter.values() for p in pts)
                ax.plot([lo, 1], [lo, 1], color='orange', lw=1)
                ax.set_xlabel('AUC from scratch (group mean)')
                ax.set_ylabel('AUC pre-trained (group mean)')
                ax.legend(fontsize=7)
                ax.grid(alpha=0.3)
                written.append(self._save(fig, figdir / 'auc_scatter.png',
                                          'Appendix B: AUC pre-trained vs scratch per group (above the diagonal: faster)'))
        fs = self._fsigma(results)
        if any(v['num_runs'] for v in fs.values()):
            fig, ax = plt.subplots(figsize=(6, 4))
            for width, v in fs.items():
                if v['num_runs']:
                    ax.plot(v['sigma'], v['tau'], 'o-', ms=3, label=f'width {width} ({v["num_runs"]} runs)')
            ax.set_xlabel('σ (data eigenvalue, sqrt)')
            ax.set_ylabel('f(σ) = sqrt(vᵀ Σ_w v)')
            ax.grid(alpha=0.3)
            ax.legend()
            written.append(self._save(fig, figdir / 'fig4_fsigma_synthetic.png', 'Fig. 4 (left): f(σ), synthetic data'))
        fd = self._fsigma_data(results)
        if fd:
            fig, ax = plt.subplots(figsize=(6, 4))
            for key, v in fd.items():
                ax.plot(v['sigma'], v['tau'], 'o-', ms=3, label=f'{key} ({v["num_runs"]} runs)')
            ax.set_xlabel('σ (data patch eigenvalue, sqrt)')
            ax.set_ylabel('f(σ)')
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            written.append(self._save(fig, figdir / 'fig4_fsigma_data.png',
                                      'Fig. 4 (centre/right): f(σ) of first-layer filters, random and real labels'))
        written += self._eigenvector_figure(results, figdir, plt)
        written += self._sparsity_figures(results, figdir)
        return [w for w in written if w]

    def _auc_scatter(self, results) -> dict:
        groups: dict = {}
        for s, r in results:
            if s.values['role'] == 'downstream' and r:
                group = s.values.get('group', '')
                groups.setdefault(group, {}).setdefault(s.values['arm'], []).append(_auc(r, self._run_steps(r)))
        out: dict = {}
        for arms in groups.values():
            if 'scratch' not in arms:
                continue
            x = _mean_std(arms['scratch'])[0]
            for arm, values in arms.items():
                if arm != 'scratch' and np.isfinite(x):
                    out.setdefault(arm, []).append((x, _mean_std(values)[0]))
        return out

    def _eigenvector_figure(self, results, figdir, plt) -> list:
        """Fig. 3: top eigenvectors of Σ_w (first upstream run's first conv layer) and matching Σ_x ones."""
        ups = [(s, r) for s, r in results if s.values['role'] == 'upstream' and r and r.get('status') == 'done']
        if not ups:
            return []
        variables = checkpoint_variables(self.run_dir(ups[0][0]))
        kernels = [v for v in variables if v.ndim == 4]
        if not kernels or kernels[0].shape[0] != kernels[0].shape[1]:
            return []
        kernel = kernels[0]
        k, channels = kernel.shape[0], kernel.shape[2]
        try:
            data = registry.DATASETS.get(_bound_dataset())().load(seed=ups[0][0].seed or 0)
            sigma_x = covariance.patch_covariance(data.train.images[:2000], k, 1, 'valid')
        except Exception as e:  # pylint: disable=broad-except  (an optional figure; the data may be absent)
            logging.warning('Fig. 3 skipped: %s', e)
            return []
        if sigma_x.shape[0] != k * k * channels:
            return []
        matches = covariance.eigenvector_matches(sigma_x, covariance.filter_covariance(kernel), num_filters=6)
        cols = 1 + max(len(m['ranks_x']) for m in matches) + 1
        fig, axes = plt.subplots(len(matches), cols, figsize=(1.4 * cols, 1.4 * len(matches)), squeeze=False)
        for row, m in zip(axes, matches):
            images = [('v_w', m['v_w'])] + [(f'v_x #{i}: {ip:+.2f}', v) for i, ip, v in
                                            zip(m['ranks_x'], m['inner'], m['v_x'])]
            if len(m['ranks_x']) > 1:
                images.append(('weighted v̄_x', m['v_x_bar']))
            for ax in row:
                ax.axis('off')
            for ax, (title, v) in zip(row, images):
                img = covariance.as_filter_image(v, k, channels)
                ax.imshow(img[..., 0] if channels == 1 else img, cmap='gray' if channels == 1 else None)
                ax.set_title(title, fontsize=6)
            row[0].set_ylabel(f'#{m["rank_w"]}')
        return [self._save(fig, figdir / 'fig3_eigenvectors.png',
                           f'Fig. 3: top eigenvectors of Σ_w ({ups[0][0].name}) and Σ_x eigenvectors with |⟨v_x, v_w⟩| > 0.4')]

    def _sparsity_figures(self, results, figdir) -> list:
        written = []
        for s, r in results:
            if not r or s.values['role'] not in self.sparsity_runs:
                continue
            dists = activation_sparsity.load_distributions(str(self.run_dir(s)))
            if not dists:
                continue
            steps = sorted(dists)
            for step in sorted({steps[0], steps[-1]}):
                path = figdir / f'activations_{s.name}_step{step}.png'
                title = f'{s.name}, step {step}: neurons over examples (left), examples over neurons (right)'
                if activation_sparsity.plot_distributions(dists[step], str(path), '\n'.join(textwrap.wrap(title, 70))):
                    written.append((f'Fig. 7/10/11: activations of {s.name} at step {step}', path))
            if len(written) >= 12:
                break
        return written

    @staticmethod
    def _save(fig, path: pathlib.Path, label: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        _pyplot().close(fig)
        return (label, path)


def _pyplot():
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

    return plt


def load_report(workdir: os.PathLike) -> dict:
    """The `report.json` of a finished experiment (for colabs)."""
    return json.loads((pathlib.Path(workdir) / 'report.json').read_text())
