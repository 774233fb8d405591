"""Zhang, Bengio, Hardt, Mozer & Singer (ICLR 2020), "Identity Crisis: Memorization and
Generalization under Extreme Overparameterization".

`IdentityCrisis` (registered `identity_crisis`) trains one net per (architecture, depth) to map ONE
training image to itself (MSE; appendix A), then reports where each lands between the identity
and the constant function. Each run is a `single_run` on `identity_image` (data/identity_images.py:
the `train_index`-th training example of class `train_class` of the configured dataset, default
`sample_photos`) with the `identity_correlation` plugin (Fig. 4's correlations at every
evaluation) and, for linear nets, `theorem1_error`. After the runs, paper-only steps rebuild each
run's model from its checkpoint (under the run's own gin config) for the prediction grids (Figs.
1-3, 9, 10), input-size robustness (Figs. 6-7), layer-wise information loss with an untrained
reference (Fig. 5) and intermediate-layer pictures (appendix F). Gin files: gin/zhang2020/;
docs: docs/zhang2020.md.
"""

import contextlib
import pathlib
from typing import Mapping, Optional, Sequence

import gin
import numpy as np
import tensorflow as tf
from absl import logging

from extreme_mem import config, registry
from extreme_mem.data import identity_images
from extreme_mem.experiments import sweep as sweep_lib
from extreme_mem.experiments import sweep_experiment
from extreme_mem.metrics import identity_analysis as analysis
from extreme_mem.metrics import identity_correlation as ic
from extreme_mem.summaries import report as report_lib

MODELS = {'linear': 'identity_linear', 'fcn': 'identity_fcn', 'cnn': 'identity_cnn'}


def _bound(key: str, default):
    """The value bound to `key` in the parsed config (macros resolved), or `default`."""
    try:
        value = gin.query_parameter(key)
        while isinstance(value, gin.config.ConfigurableReference) and str(value).startswith('%'):
            value = gin.query_parameter(str(value)[1:] + '/macro.value')
        return value
    except ValueError:
        return default


class _ByRho(dict):
    """`{ρ key: value}` that prints compactly in the markdown runs table (values in ρ order)."""

    def __str__(self):
        return ' '.join('—' if v is None or v != v else f'{v:.2f}' for v in self.values())


@registry.EXPERIMENTS.register('identity_crisis')
@gin.configurable(module='experiments', denylist=['workdir', 'seed', 'overwrite'])
class IdentityCrisis(sweep_experiment.SweepExperiment):
    """Zhang et al. (ICLR 2020): identity regression from one example, depth × architecture.

    Args:
      architectures: `{'linear'|'fcn'|'cnn': [depths]}` (hidden layers for fcn/cnn, weight layers
        for linear), crossed with the base class's variants / sweep / seeds.
      budgets: `{architecture: fraction or {depth: fraction}}`: those runs train for that fraction
        of `train.Trainer.num_steps` (at least 1 step), e.g. to afford deep CNNs on a CPU.
      train_class, train_index: the training image (`data.IdentityImage`).
      sizes: input sizes of the robustness test (CNNs; section 3.3), on the first `vis_images`
        images (the training image, then the evaluation set).
      info_examples: (train, test) examples of the source for Fig. 5's classifier.
      vis_images: images in the input-size and intermediate-layer analyses.
      depth_cap: every depth above it becomes it (duplicates dropped): a cheap trial of a file.
      **kwargs: `SweepExperiment` knobs.
    """

    name = 'identity_crisis'
    paper = ('Zhang, Bengio, Hardt, Mozer & Singer (ICLR 2020), "Identity Crisis: Memorization and '
             'Generalization under Extreme Overparameterization"')
    default_panels = {'train_loss': ['train/loss'], 'identity_0': ['eval/identity_correlation/0'],
                      'constant_0': ['eval/constant_correlation/0']}
    panel_titles = {'train_loss': 'Training MSE', 'identity_0': 'Correlation with identity, ρ = 0',
                    'constant_0': 'Correlation with constant, ρ = 0'}
    log_panels = ('train_loss',)
    # What tests/gin_files_test.py adds to its 2-step runs of gin/zhang2020/*.gin.
    smoke_bindings = ('experiments.IdentityCrisis.depth_cap = 2', 'CHANNELS = 4', 'models.identity_fcn.width = 16',
                      'metrics.IdentityCorrelation.num_per_rho = 2',
                      'experiments.IdentityCrisis.info_examples = (6, 6)',
                      'experiments.IdentityCrisis.sizes = (7, 14)', 'experiments.IdentityCrisis.vis_images = 2')

    def __init__(self, workdir: str, seed: int = 0, architectures: Optional[Mapping[str, Sequence[int]]] = None,
                 budgets: Optional[Mapping] = None, train_class: Optional[int] = 0, train_index: int = 0,
                 sizes: Sequence[int] = (7, 14, 28, 56, 112), info_examples: Sequence[int] = (200, 100),
                 vis_images: int = 4, depth_cap: Optional[int] = None, **kwargs):
        self.architectures = {arch: list(dict.fromkeys(min(int(d), depth_cap or int(d)) for d in depths))
                              for arch, depths in (architectures or {'cnn': [1, 3, 5]}).items()}
        unknown = [a for a in list(self.architectures) + list(budgets or {}) if a not in MODELS]
        if unknown:
            raise config.ConfigError(f'Unknown architectures {unknown}; valid: {list(MODELS)}.')
        self.budgets, self.train_class, self.train_index = dict(budgets or {}), train_class, int(train_index)
        self.sizes, self.info_examples, self.vis_images = [int(s) for s in sizes], tuple(info_examples), vis_images
        source = _bound('experiments.Experiment.dataset', 'sample_photos')
        self.source = _bound('data.IdentityImage.source', 'sample_photos') if source == 'identity_image' else source
        self._analysis, self._rows = {}, {}
        super().__init__(workdir=workdir, seed=seed, **kwargs)

    def specs(self) -> list:
        """(architecture, depth) × the base specs (variants × sweep × seeds), with identity bindings."""
        metrics = [m for m in _bound('experiments.Experiment.metrics', []) if m not in ('theorem1_error',)]
        common = {'experiments.Experiment.dataset': 'identity_image', 'experiments.Experiment.loss': 'mse',
                  'data.IdentityImage.source': self.source, 'data.IdentityImage.train_class': self.train_class,
                  'data.IdentityImage.train_index': self.train_index}
        specs = []
        for base in super().specs():
            for arch, depths in self.architectures.items():
                for depth in depths:
                    extra = ['theorem1_error'] if arch == 'linear' else []
                    bindings = {**common, 'experiments.Experiment.model': MODELS[arch],
                                f'models.{MODELS[arch]}.depth': int(depth),
                                'experiments.Experiment.metrics': sorted(set(metrics) | {'identity_correlation'})
                                + extra}
                    fraction = self.budgets.get(arch)
                    fraction = fraction.get(depth) if isinstance(fraction, Mapping) else fraction
                    if fraction is not None:
                        steps = max(1, int(round(float(fraction) * _bound('train.Trainer.num_steps', 10_000))))
                        bindings['train.Trainer.num_steps'] = steps
                    name = f'{arch},depth={depth}' + (f',{base.name}' if base.values else '')
                    specs.append(sweep_lib.RunSpec(
                        sweep_lib.safe_name(name), {'architecture': arch, 'depth': int(depth), **base.values},
                        tuple(f'{k} = {v!r}' for k, v in bindings.items()) + base.bindings, base.seed))
        return specs

    @contextlib.contextmanager
    def _run_config(self, spec):
        """The gin config of `spec`'s run (this experiment's files and params + its bindings)."""
        files, params = config.parsed_files_and_bindings()
        gin.clear_config()
        config.parse_gin(files, list(params) + list(spec.bindings), finalize=False)
        try:
            yield
        finally:
            gin.clear_config()
            config.parse_gin(files, params, finalize=False)

    def _analyse(self, spec, record) -> dict:
        """Paper-only steps on the run's checkpointed model (and its untrained twin)."""
        ckpt = tf.train.latest_checkpoint(str(self.run_dir(spec) / 'checkpoints'))
        if not record or record.get('status') != 'done' or not ckpt:
            return {}
        seed = self.seed if spec.seed is None else spec.seed
        with self._run_config(spec):
            data = registry.DATASETS.get('identity_image')().load(seed=seed)
            build = registry.MODELS.get(MODELS[spec.values['architecture']])
            model = build(input_shape=data.info.input_shape, num_outputs=data.info.num_classes, seed=seed)
            untrained = build(input_shape=data.info.input_shape, num_outputs=data.info.num_classes, seed=seed)
            tf.train.Checkpoint(model=model).restore(ckpt).expect_partial()
            source = identity_images.IdentityImage().load_source(seed) if spec.values['architecture'] == 'cnn' else None
        predict = ic.predict_fn(model)
        images = np.concatenate([data.train.images, data.test.images])
        out = {'inputs': images, 'predictions': predict(images), 'rank': identity_images.patch_rank(images[0])}
        if source is not None:
            shown = images[:self.vis_images]  # the training image and the first evaluation images
            resized = {size: analysis.resize_images(shown, size) for size in self.sizes}
            predicted = {size: predict(x) for size, x in resized.items()}
            out['sizes'] = {size: float(np.mean(ic.pearson(predicted[size], x))) for size, x in resized.items()}
            out['size_grid'] = {s: (resized[s], predicted[s]) for s in (min(self.sizes), max(self.sizes))}
            n_tr, n_te = self.info_examples
            args = (source.train.images[:n_tr], source.train.true_labels[:n_tr], source.test.images[:n_te],
                    source.test.true_labels[:n_te], source.info.num_classes)
            out['layerwise'] = analysis.layerwise_errors(model, *args)
            if spec.values['depth'] == max(self.architectures['cnn']):  # Fig. 5's untrained reference
                out['layerwise_untrained'] = analysis.layerwise_errors(untrained, *args)
            out['layers'] = [(name, [analysis.top_singular_image(a) for a in act])
                             for name, act in analysis.chain_activations(model, shown)]
        with tf.summary.create_file_writer(str(self.run_dir(spec) / 'tensorboard' / 'eval')).as_default(step=0):
            grid = analysis.image_grid([list(images), list(out['predictions'])])
            tf.summary.image('predictions', grid[None, ..., None].astype(np.float32))
        return out

    def summarize(self, results) -> dict:
        summary = super().summarize(results)
        for row, (spec, record) in zip(summary['runs'], results):
            for key in ('train acc', 'test acc', 'best test acc'):
                row.pop(key, None)
            row['train_loss'] = report_lib.last_value(record, 'train/loss')
            for kind in ('identity', 'constant'):
                row[f'{kind}_correlation'] = _ByRho((ic.rho_key(r), report_lib.last_value(
                    record, f'eval/{kind}_correlation/{ic.rho_key(r)}')) for r in ic.RHOS)
            if spec.values['architecture'] == 'linear':
                row['theorem1_relative_error'] = report_lib.last_value(record, 'eval/theorem1_relative_error')
            try:
                self._analysis[spec.name] = self._analyse(spec, record)
            except Exception as e:  # pylint: disable=broad-except  (a report never fails on one run)
                logging.exception('Analysis of %s failed.', spec.name)
                self._analysis[spec.name] = {'error': str(e)}
            found = self._analysis[spec.name]
            if 'sizes' in found:
                row['input_size_identity_correlation'] = {str(k): v for k, v in found['sizes'].items()}
                row['layerwise_error'] = found['layerwise']
                if 'layerwise_untrained' in found:
                    row['layerwise_error_untrained'] = found['layerwise_untrained']
        self._rows = {spec.name: row for row, (spec, _) in zip(summary['runs'], results)}
        ranks = [a['rank'] for a in self._analysis.values() if 'rank' in a]
        if ranks:
            r, full, cond = ranks[0]
            summary['theorem2'] = {'rank': r, 'full_rank': full, 'conditioning': cond}
        summary['training_image'] = {'dataset': self.source, 'class': self.train_class, 'index': self.train_index}
        return summary

    def report_sections(self, summary) -> list:
        lines = ['## Training image', '']
        image = summary['training_image']
        lines.append(f"Example {image['index']} of class {image['class']} of `{image['dataset']}`.")
        if 'theorem2' in summary:
            t2 = summary['theorem2']
            lines.append(f"Theorem 2: its 5×5 patches span r = {t2['rank']} of {t2['full_rank']} dimensions "
                         f"(s_min/s_max = {t2['conditioning']:.3g}); r = {t2['full_rank']} guarantees a one-layer "
                         'CNN learns the identity.')
        for kind in ('identity', 'constant'):
            lines += ['', f'## Fig. 4: correlation with the {kind} function (rows: runs, columns: ρ)', '']
            rows = [{'run': r['run'], **r[f'{kind}_correlation']} for r in summary['runs']]
            lines.append(report_lib.markdown_table(rows))
        sized = [r for r in summary['runs'] if 'input_size_identity_correlation' in r]
        if sized:
            lines += ['', '## Figs. 6-7: identity correlation at other input sizes (trained at the image size)', '',
                      report_lib.markdown_table([{'run': r['run'], **r['input_size_identity_correlation']}
                                                 for r in sized])]
            lines += ['', '## Fig. 5: similarity-classifier error per layer (input … output)', '']
            for r in sized:
                for label, key in (('trained', 'layerwise_error'), ('untrained', 'layerwise_error_untrained')):
                    if key in r:
                        lines.append(f"- {r['run']} ({label}): " + ', '.join(f'{v:.3f}' for v in r[key].values()))
        linear = [r for r in summary['runs'] if r.get('theorem1_relative_error') is not None]
        if linear:
            lines += ['', '## Theorem 1', '']
            lines += [f"- {r['run']}: relative error to the closed form {r['theorem1_relative_error']:.3g}"
                      for r in linear]
        return lines

    def extra_figures(self, results, figdir: pathlib.Path) -> list:
        plt, written = report_lib.pyplot(), []
        rows = [(s, self._rows[s.name]) for s, _ in results]
        for arch in MODELS:
            runs = [(s, r) for s, r in rows if s.values['architecture'] == arch]
            if not runs:
                continue
            fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(runs) + 2))
            for ax, kind in zip(axes, ('constant', 'identity')):
                values = np.array([list(r[f'{kind}_correlation'].values()) for _, r in runs], dtype=float)
                im = ax.imshow(values, vmin=0, vmax=1, cmap='viridis', aspect='auto')
                ax.set(xticks=range(len(ic.RHOS)), xticklabels=[ic.rho_key(x) for x in ic.RHOS],
                       yticks=range(len(runs)), yticklabels=[s.name for s, _ in runs],
                       xlabel='ρ: train-test correlation', title=f'correlation to {kind} function')
                fig.colorbar(im, ax=ax)
            written.append((f'Fig. 4 ({arch})', _save(fig, figdir / f'fig4_{arch}.png')))
            grids = [(s, self._analysis.get(s.name, {})) for s, _ in runs]
            grids = [(s, a) for s, a in grids if 'predictions' in a]
            if grids:
                image_rows = [list(grids[0][1]['inputs'])] + [list(a['predictions']) for _, a in grids]
                labels = ['input'] + [s.name for s, _ in grids]
                written.append((f'Predictions ({arch}; first column: the training image)',
                                _grid_figure(image_rows, labels, figdir / f'predictions_{arch}.png')))
        fig, ax = plt.subplots(figsize=(6, 4))
        for arch in MODELS:
            runs = [(s, r) for s, r in rows if s.values['architecture'] == arch]
            for kind, style in (('identity', '-o'), ('constant', '--s')):
                means = [np.mean(list(r[f'{kind}_correlation'].values())) for _, r in runs]
                if runs:
                    ax.plot([s.values['depth'] for s, _ in runs], means, style, label=f'{arch}: {kind}')
        ax.set(xlabel='depth', ylabel='mean correlation over ρ', title='Fig. 8: mean correlation vs depth')
        report_lib.save_figure(fig, ax, figdir / 'fig8_mean_vs_depth.png', legend=True)
        written.append(('Fig. 8', figdir / 'fig8_mean_vs_depth.png'))
        cnns = [(s, self._analysis[s.name]) for s, _ in rows if 'layerwise' in self._analysis.get(s.name, {})]
        if cnns:
            fig, ax = plt.subplots(figsize=(7, 4))
            for s, a in cnns:
                ax.plot(list(a['layerwise'].values()), '-o', ms=3, label=self.label(s))
            for s, a in cnns:
                if 'layerwise_untrained' in a:
                    ax.plot(list(a['layerwise_untrained'].values()), 'r-', lw=3, label=f'{self.label(s)}, untrained')
            ax.set(xlabel='layer index (0 = input)', ylabel='error rate', title='Fig. 5: layer-wise information loss')
            report_lib.save_figure(fig, ax, figdir / 'fig5_layerwise_error.png', legend=True)
            written.append(('Fig. 5', figdir / 'fig5_layerwise_error.png'))
            for s, a in cnns:
                size_rows, labels = [], []
                for size, (x, y) in a['size_grid'].items():
                    size_rows += [list(x), list(y)]
                    labels += [f'{size}×{size} input', f'{size}×{size} output']
                written.append((f'Figs. 6-7: {self.label(s)} on other input sizes',
                                _grid_figure(size_rows, labels, figdir / f'input_size_{s.name}.png')))
                layer_rows = [list(images) for _, images in a['layers']]
                written.append((f'Appendix F: {self.label(s)}, top singular vector per layer',
                                _grid_figure(layer_rows, [n for n, _ in a['layers']],
                                             figdir / f'layers_{s.name}.png')))
        return written



def _save(fig, path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    report_lib.pyplot().close(fig)
    return path


def _grid_figure(rows, labels, path: pathlib.Path) -> pathlib.Path:
    """A grid of images (one row per label), each min-max scaled, saved as a PNG."""
    plt = report_lib.pyplot()
    grid = analysis.image_grid(rows)
    fig, ax = plt.subplots(figsize=(min(16, 1 + 0.9 * max(len(r) for r in rows)), 0.5 + 0.9 * len(rows)))
    ax.imshow(grid, cmap='gray', vmin=0, vmax=1)
    height = grid.shape[0] / len(rows)
    ax.set_yticks([height * (i + 0.5) for i in range(len(rows))], labels, fontsize=7)
    ax.set_xticks([])
    return _save(fig, path)
