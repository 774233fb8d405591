"""Stephenson, Padhy, Ganesh, Hui, Tang & Chung (ICLR 2021), "On the geometry of generalization and
memorization in deep neural networks".

`MemorizationGeometry` (registered `memorization_geometry`) trains one run per seed (and per sweep
point, e.g. the width of the double-descent sweep) on data with a fraction ε of permuted labels,
keeping one checkpoint per epoch, then analyses every run from its checkpoints
(`analysis/memorization.py`): subset accuracies and MFTMA geometry per probe layer at the
initial, best (highest test accuracy) and final epoch, layer rewinding (`analysis/rewinding.py`)
and a 2-D embedding of the last layer; the per-layer gradient norms and the label-dependent /
independent split (eqs. 14-16) are logged during training by the `gradient_split` plugin.
Results are averaged over seeds (99% confidence intervals) per sweep point.

report.json (besides the scaffold's `figure`, `runs`, `figures`, `notes`), for the first (or
only) sweep point: `layers`, `best_epoch` (median over seeds; `best_epochs` per seed),
`lower_bound` (2/M), `subset_accuracy[stage][subset]`, `mftma[stage][subset][layer]` with
capacity, radius, dimension, center_correlation (means) and capacity_ci99, `rewinding` rows
`{layer, epoch, train_acc, test_acc}` (`rewinding_subsets` adds subset accuracies); with
several sweep points also `points`: the same keys per point (Fig. 4C-E). Stage ∈ {init, best,
final}; subset ∈ {unpermuted, permuted, restored, test}. Gin files: `gin/stephenson2021/`;
docs: `docs/stephenson2021.md`.
"""

import multiprocessing
import os
from concurrent import futures
import pathlib
from typing import Optional, Sequence

import gin
import keras
from absl import logging

from extreme_mem import config, registry
from extreme_mem.analysis import geometry_figures as figures
from extreme_mem.analysis import memorization
from extreme_mem.experiments import sweep_experiment
from extreme_mem.summaries import report as report_lib

STAGES, SUBSETS = memorization.STAGES, memorization.SUBSETS


@registry.EXPERIMENTS.register('memorization_geometry')
@gin.configurable(module='experiments', denylist=['workdir', 'seed'])
class MemorizationGeometry(sweep_experiment.SweepExperiment):
    """Memorization geometry of Stephenson et al. (ICLR 2021): Figs. 2-5 and A.1-A.4.

    Args:
      steps_per_epoch: optimizer steps per epoch; bind `train.Trainer.checkpoint_every` (and
        `eval_every`) to the same value and `max_checkpoints` above the epoch budget.
      examples_per_class: M examples per manifold (paper: 50; lower bound 2/M).
      num_manifolds: at most P classes per manifold set (paper: 100).
      n_t: Gaussian samples per manifold of the MFTMA (reference: 200).
      max_features: layers wider than this are randomly projected before MFTMA.
      rewind_runs: how many runs (in seed order) of each point are rewound (0: none).
      rewind_epochs: epochs to rewind to (None: epoch 0 and every checkpointed epoch).
      embed_examples: examples per subset in the 2-D embedding of the first run (0: none).
      max_mftma_layers: MFTMA on at most this many probe layers, evenly spaced (None: all).
      **kwargs: `SweepExperiment` knobs (seeds, sweep, variants, parallel, ...).
    """

    name = 'memorization_geometry'
    paper = ('Stephenson, Padhy, Ganesh, Hui, Tang & Chung (ICLR 2021), "On the geometry of generalization '
             'and memorization in deep neural networks"')
    default_panels = {'train_accuracy': ['train/accuracy'], 'test_accuracy': ['test/accuracy'],
                      'permuted_accuracy': ['train/accuracy/permuted'],
                      'restored_accuracy': ['train/accuracy/restored']}
    panel_titles = {'train_accuracy': 'Train accuracy', 'test_accuracy': 'Test accuracy',
                    'permuted_accuracy': 'Permuted examples: accuracy on their random labels',
                    'restored_accuracy': 'Restored examples: accuracy on their true labels'}
    default_quantities = {'permuted acc': ['train/accuracy/permuted'], 'restored acc': ['train/accuracy/restored']}
    axis_labels = {'models.resnet18.width_multiplier': 'width'}
    # Shrinks the 2-step smoke test of every gin file (tests/gin_files_test.py).
    smoke_bindings = ('data.Spheres.train_per_class = 20', 'data.Spheres.test_per_class = 10',
                      'data.Spheres.ambient_dim = 64', 'data.Digits.image_size = 32', 'data.Digits.channels = 3',
                      'experiments.MemorizationGeometry.steps_per_epoch = 1',
                      'experiments.MemorizationGeometry.examples_per_class = 4',
                      'experiments.MemorizationGeometry.n_t = 10',
                      'experiments.MemorizationGeometry.max_mftma_layers = 1',
                      'experiments.MemorizationGeometry.embed_examples = 10', 'metrics.GradientSplit.max_examples = 32',
                      'metrics.GradientSplit.batch_size = 32',
                      'models.vgg16.width_multiplier = 0.125', 'models.alexnet.width_multiplier = 0.125',
                      'models.resnet18.width_multiplier = 0.125')

    def __init__(self, workdir: str, seed: int = 0, steps_per_epoch: int = gin.REQUIRED,
                 examples_per_class: int = 50, num_manifolds: int = 100, n_t: int = 200,
                 max_features: Optional[int] = 5000, rewind_runs: int = 1,
                 rewind_epochs: Optional[Sequence[int]] = None, embed_examples: int = 200,
                 max_mftma_layers: Optional[int] = None, **kwargs):
        super().__init__(workdir=workdir, seed=seed, **kwargs)
        for knob, value, low in (('steps_per_epoch', steps_per_epoch, 1), ('examples_per_class', examples_per_class, 2),
                                 ('num_manifolds', num_manifolds, 3), ('n_t', n_t, 1), ('rewind_runs', rewind_runs, 0),
                                 ('embed_examples', embed_examples, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise config.ConfigError(f'MemorizationGeometry.{knob} must be an integer >= {low}, got {value!r}.')
        self.steps_per_epoch, self.examples_per_class = steps_per_epoch, examples_per_class
        self.num_manifolds, self.n_t, self.max_features = num_manifolds, n_t, max_features
        self.rewind_runs, self.rewind_epochs, self.embed_examples = rewind_runs, rewind_epochs, embed_examples
        self.max_mftma_layers = max_mftma_layers
        self._gin = config.parsed_files_and_bindings()  # the runs add their bindings to these
        self._summary: dict = {}
        self._embedding: dict = {}

    def _jobs(self, results) -> dict:
        """Finished runs grouped by sweep point (the spec's values without the seed), in order."""
        groups: dict = {}
        for spec, record in results:
            if record and record.get('status') == 'done':
                point = ', '.join(f'{self.labels.get(k, k.split(".")[-1])}={v}' for k, v in spec.values.items()
                                  if k != 'seed') or 'all seeds'
                groups.setdefault(point, []).append((spec, record))
        files, params = self._gin
        knobs = dict(steps_per_epoch=self.steps_per_epoch, rewind_epochs=self.rewind_epochs,
                     max_layers=self.max_mftma_layers,
                     mftma=dict(num_classes=self.num_manifolds, examples_per_class=self.examples_per_class,
                                n_t=self.n_t, max_features=self.max_features))
        return {point: [dict(files=list(files), params=list(params), bindings=list(spec.bindings),
                             run_dir=str(self.run_dir(spec)), seed=self.seed if spec.seed is None else spec.seed,
                             record=record, rewind=i < self.rewind_runs,
                             embed_examples=self.embed_examples if (p == 0 and i == 0) else 0, **knobs)
                        for i, (spec, record) in enumerate(members)]
                for p, (point, members) in enumerate(groups.items())}

    def _analyze_all(self, jobs: list) -> list:
        """`analyze_run_config` of every job: here (in_process) or in `parallel` spawned processes."""
        if self.in_process or self.parallel == 1 or len(jobs) == 1:
            out = [analyze_run_config(**job) for job in jobs]
            gin.clear_config()
            config.parse_gin(*self._gin, finalize=False)  # back to this experiment's configuration
            return out
        saved = os.environ.get('OPENBLAS_NUM_THREADS')
        os.environ['OPENBLAS_NUM_THREADS'] = '1'  # MFTMA is many small products (geometry/mftma.py)
        try:
            with futures.ProcessPoolExecutor(self.parallel, mp_context=multiprocessing.get_context('spawn')) as pool:
                return list(pool.map(_analyze_job, jobs))
        finally:
            if saved is None:
                os.environ.pop('OPENBLAS_NUM_THREADS', None)
            else:
                os.environ['OPENBLAS_NUM_THREADS'] = saved

    def summarize(self, results) -> dict:
        summary = super().summarize(results)
        summary['steps_per_epoch'] = self.steps_per_epoch
        groups = self._jobs(results)
        analyses = iter(self._analyze_all([job for jobs in groups.values() for job in jobs]))
        points = []
        for point, jobs in groups.items():
            runs = [next(analyses) for _ in jobs]
            if not points:
                self._embedding = runs[0]['embedding']
            points.append({'point': point, **memorization.aggregate(runs, self.examples_per_class)})
        if points:
            summary.update({k: v for k, v in points[0].items() if k != 'point'})
        if len(points) > 1:
            summary['points'] = points
        self._summary = summary
        return summary

    def report_sections(self, summary: dict) -> list:
        if 'mftma' not in summary:
            return ['No finished run to analyse.']
        layers, lines = summary['layers'], ['## Geometry of memorization', '']
        lines += [f'Best epoch per seed: {summary["best_epochs"]}; final epoch: {summary["final_epochs"]}; '
                  f'MFTMA lower bound 2/M = {summary["lower_bound"]:.3g}.', '', '### Subset accuracy', '',
                  report_lib.markdown_table([{'stage': s, **summary['subset_accuracy'][s]} for s in STAGES]), '']
        for stage in STAGES:
            geo = summary['mftma'][stage]
            rows = [{'layer': l, **{f'α {s}': geo[s][l]['capacity'] for s in SUBSETS},
                     'α permuted ±99%': geo['permuted'][l]['capacity_ci99'],
                     'R permuted': geo['permuted'][l]['radius'], 'D permuted': geo['permuted'][l]['dimension']}
                    for l in layers]
            lines += [f'### MFTMA at the {stage} epoch (means over seeds)', '', report_lib.markdown_table(rows), '']
        rows = summary.get('rewinding_subsets') or []
        if rows:
            lines += ['### Layer rewinding (final model, one layer from the rewind epoch)', '',
                      report_lib.markdown_table(rows), '']
        for p in summary.get('points', []):
            last = p['layers'][-1]
            lines.append(f'- {p["point"]}: test acc best {p["subset_accuracy"]["best"]["test"]:.4g} / final '
                         f'{p["subset_accuracy"]["final"]["test"]:.4g}; test-manifold D_M ({last}) best '
                         f'{p["mftma"]["best"]["test"][last]["dimension"]:.4g} / final '
                         f'{p["mftma"]["final"]["test"][last]["dimension"]:.4g}')
        return lines

    def extra_figures(self, results, figdir: pathlib.Path) -> list:
        s, written = self._summary, []
        records = [r for _, r in results if r and r.get('status') == 'done']
        draws = [
            ('Fig. 2A: subset accuracy', 'subset_accuracy.png', lambda p, t: figures.subset_accuracy_curves(
                records, self.steps_per_epoch, p, t)),
            ('Fig. 2B: last-layer embedding', 'embedding.png',
             lambda p, t: figures.embedding_grid(self._embedding, p, t)),
            ('Fig. 3A: MFTMA at the best epoch', 'mftma_best.png', lambda p, t: figures.mgm_panels(s, 'best', p, t)),
            ('Fig. 3B: MFTMA at the final epoch (faded: best)', 'mftma_final.png',
             lambda p, t: figures.mgm_panels(s, 'final', p, t, faded_stage='best')),
            ('Fig. 4A-B: layer rewinding', 'rewinding.png', lambda p, t: figures.rewinding_curves(s, p, t)),
            ('Fig. 4C-E: double descent', 'double_descent.png',
             lambda p, t: figures.double_descent(s.get('points', []), p, t)),
            ('Fig. 5: gradient norms and dep / ind ratios', 'gradients.png', lambda p, t: figures.gradient_panels(
                records, list(s.get('layers', [])) + ['logits'], self.steps_per_epoch, p, t)),
        ]
        for label, filename, draw in draws:
            if s and draw(figdir / filename, f'{label}\n{self.figure}'):
                written.append((label, figdir / filename))
        return written


def analyze_run_config(files, params, bindings, run_dir, seed, record, steps_per_epoch, mftma, rewind,
                       rewind_epochs, embed_examples, max_layers) -> dict:
    """Rebuilds a run's data and initial model under its gin configuration and analyses it."""
    gin.clear_config()
    config.parse_gin(files, list(params) + list(bindings), finalize=False)
    run = registry.EXPERIMENTS.get('single_run')(workdir=run_dir, seed=seed)
    keras.utils.set_random_seed(seed)
    data = run.build_dataset()
    model = run.build_model(data.info)  # the initial weights: models are seeded by the run seed
    logging.info('Analysing %s.', run_dir)
    out = memorization.analyze_run(model, data, record, pathlib.Path(run_dir) / 'checkpoints', steps_per_epoch,
                                   {**mftma, 'seed': seed}, rewind=rewind, rewind_epochs=rewind_epochs,
                                   embed_examples=embed_examples, seed=seed, max_layers=max_layers)
    keras.backend.clear_session()
    return out


def _analyze_job(job: dict) -> dict:
    """`analyze_run_config` in a fresh (spawned) process."""
    from extreme_mem import registry_imports  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

    return analyze_run_config(**job)
