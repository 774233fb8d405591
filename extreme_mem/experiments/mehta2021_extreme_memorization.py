"""Mehta, Cutkosky & Neyshabur (ICLR 2021), "Extreme Memorization via Scale of Initialization".

`ExtremeMemorization` (registered `extreme_memorization`) runs one figure of the paper: a sweep
of single runs (the init scale σ of the first layer, learning rates, ...) times named variants
(activations, losses, architectures, datasets), then writes `report.md`, `report.json` and
`figures/*.png` from the runs' `results.json` files only. Gin files: `gin/mehta2021/*.gin`;
README section: `docs/mehta2021.md`.

Runs, skipping and resuming come from `sweep_experiment.SweepExperiment`: each run is a
`single_run` process with this experiment's gin files and bindings plus the run's (variant
bindings first, then sweep values), so a sweep macro such as `INIT_SCALE` overrides every
`%INIT_SCALE`. This module adds the paper's panels (titles and axis labels in the paper's
words), the final alignment Ω per run, the rank correlation of best test accuracy with Ω
(Fig. 1b; Spearman ρ is reported from 5 runs on, else "too few runs"), the final test accuracy
against σ, and the test-accuracy drop across σ.

Paper → tags: Fig. 2a/6d train accuracy `train/accuracy`; Fig. 1a/6c test accuracy
`test/accuracy`; Fig. 2b ‖∇W1‖/‖W1‖ `train/relative_grad_norm/hidden`; "hidden layer gradients"
`train/grad_alignment/hidden`; "top layer gradients" `train/grad_alignment/logits`; "logit
gradients" `train/grad_alignment/logits_grad`; "hidden layer activations" (representation
alignment Ωʳ) `train/rep_alignment/hidden`.
"""

import math
import pathlib
import textwrap
from typing import Mapping, Optional, Sequence

import gin
import numpy as np

from extreme_mem import registry
from extreme_mem.experiments import sweep_experiment
from extreme_mem.summaries import report as report_lib

PAPER = 'Mehta, Cutkosky & Neyshabur (ICLR 2021), "Extreme Memorization via Scale of Initialization"'

# Panel name -> alternative tags (each run plots the first it logged); the paper's panels.
DEFAULT_PANELS = {
    'test_accuracy': ['test/accuracy'],
    'train_accuracy': ['train/accuracy'],
    'relative_grad_norm_hidden': ['train/relative_grad_norm/hidden'],
    'grad_alignment_hidden': ['train/grad_alignment/hidden'],
    'grad_alignment_top': ['train/grad_alignment/logits'],
    'grad_alignment_logits': ['train/grad_alignment/logits_grad'],
    'rep_alignment_hidden': ['train/rep_alignment/hidden'],
}
PANEL_TITLES = {
    'test_accuracy': 'Test accuracy',
    'train_accuracy': 'Train accuracy',
    'relative_grad_norm_hidden': 'Relative norms ‖∇W₁‖ / ‖W₁‖',
    'grad_alignment_hidden': 'Hidden layer gradients: in-class alignment Ω',
    'grad_alignment_top': 'Top layer gradients: in-class alignment Ω',
    'grad_alignment_logits': 'Logit gradients: in-class alignment Ω',
    'rep_alignment_hidden': 'Hidden layer activations: in-class alignment Ωʳ',
    'rep_alignment_last_hidden': 'Last hidden layer activations: in-class alignment Ωʳ',
    'relative_grad_norm_hidden1': 'Relative norms ‖∇W₁‖ / ‖W₁‖',
    'grad_alignment_hidden1': 'First hidden layer gradients: in-class alignment Ω',
    'rep_alignment_hidden1': 'First hidden layer activations: in-class alignment Ωʳ',
    'rep_alignment_hidden3': 'Last hidden layer activations: in-class alignment Ωʳ',
}
# Y-axis labels of the paper's tags (eqs. 5-6: Ω of per-example gradients, Ωʳ of representations).
TAG_LABELS = {
    'train/relative_grad_norm/hidden': '‖∇W₁‖ / ‖W₁‖',
    'train/relative_grad_norm/hidden1': '‖∇W₁‖ / ‖W₁‖',
    'train/relative_grad_norm': 'relative gradient norm ‖∇W‖ / ‖W‖',
    'train/grad_alignment': 'in-class gradient alignment Ω',
    'train/rep_alignment': 'in-class representation alignment Ωʳ',
}
report_lib.label_tags(TAG_LABELS)
# Summary quantity name -> its Fig. 1b x label (others: 'final ' + the tag's label).
QUANTITY_LABELS = {
    'grad_alignment_hidden': 'final hidden layer gradient alignment Ω',
    'rep_alignment_hidden': 'final hidden layer representation alignment Ωʳ',
}
# Spearman ρ is reported from this many runs on (with n = 3, ρ = ±1 and p = 0 say nothing).
MIN_SPEARMAN_RUNS = 5
SIGMA = 'INIT_SCALE'  # the sweep key of σ, the first layer's init scale
# Summary quantity name -> alternative tags; its final value goes in the table, and its Spearman
# correlation with the best test accuracy in the report (Fig. 1b).
DEFAULT_OMEGAS = {
    'grad_alignment_hidden': ['train/grad_alignment/hidden'],
    'rep_alignment_hidden': ['train/rep_alignment/hidden'],
}


@registry.EXPERIMENTS.register('extreme_memorization')
@gin.configurable(module='experiments', denylist=['workdir', 'seed', 'overwrite'])
class ExtremeMemorization(sweep_experiment.SweepExperiment):
    """Mehta et al. (ICLR 2021): a figure's sweep of single runs, then its report and figures.

    Reproduces Figs. 1-2 and 4-27 (one gin file per figure in `gin/mehta2021/`): test/train
    accuracy, relative gradient norms and in-class gradient / representation alignment Ω
    (eqs. 5-6) against training steps as σ (the first layer's init scale) or another knob
    varies, and the rank correlation between best test accuracy and final Ω (Fig. 1b).
    Deviations from the paper are listed in `docs/mehta2021.md` and inline in the gin files.

    Args:
      omegas: name -> alternative tags of the alignment quantities tabulated at their final
        value and rank-correlated with the best test accuracy (default `DEFAULT_OMEGAS`).
      **kwargs: `SweepExperiment` arguments (`figure`, `sweep`, `variants`, `panels`, ...).
    """

    name = 'extreme_memorization'
    paper = PAPER
    default_panels = DEFAULT_PANELS
    panel_titles = PANEL_TITLES
    log_panels = ('relative_grad_norm',)
    default_quantities = DEFAULT_OMEGAS
    axis_labels = {'INIT_SCALE': 'σ'}
    # A tiny digits run for the 2-step smoke test of every gin file (32x32: keras.applications' minimum).
    smoke_bindings = ('METRIC_EVERY = 1', 'data.Digits.train_size = 64', 'data.Digits.test_size = 32',
                      'data.Digits.image_size = 32')

    def __init__(self, workdir: str, seed: int = 0, omegas: Optional[Mapping[str, Sequence[str]]] = None, **kwargs):
        super().__init__(workdir=workdir, seed=seed, quantities=omegas, **kwargs)

    def _grid_size(self) -> int:
        return len(self._specs) // max(len(self.variants), 1)

    def summarize(self, results: Sequence) -> dict:
        """Adds Spearman ρ(best test acc, final Ω) per quantity and group, and test-accuracy drops."""
        summary = super().summarize(results)
        rows = summary['runs']
        variants = list(self.variants) or ['']
        correlations, counts = {}, {}
        for name in self.quantities:
            groups = {'all runs': rows}
            if len(variants) > 1 and self._grid_size() > 1:  # per variant, across the sweep
                groups.update({v: [r for r in rows if r.get('variant') == v] for v in variants})
            for group, members in groups.items():
                acc, omega = [r['best test acc'] for r in members], [r[f'final {name}'] for r in members]
                correlations.setdefault(name, {})[group] = report_lib.spearman(acc, omega, min_n=MIN_SPEARMAN_RUNS)
                counts.setdefault(name, {})[group] = len(report_lib.finite_pairs(acc, omega))
        drops = {}
        for v in variants:
            accs = [r['test acc'] for r in rows if r.get('variant', '') == v and np.isfinite(r['test acc'])]
            if len(accs) > 1:
                drops[v] = {'max': max(accs), 'min': min(accs), 'drop': max(accs) - min(accs)}
        return {**summary, 'spearman': correlations, 'spearman_n': counts, 'test_accuracy_drop': drops}

    def report_sections(self, summary: dict) -> list:
        lines = ['## Best test accuracy vs final alignment (Spearman)', '']
        for name, groups in summary['spearman'].items():
            for group, result in groups.items():
                n = summary['spearman_n'][name][group]
                if result is None and n < MIN_SPEARMAN_RUNS:
                    lines.append(f'- `{name}`, {group}: too few runs (n = {n} with both values; '
                                 f'ρ is reported from n = {MIN_SPEARMAN_RUNS}).')
                elif result is None:
                    lines.append(f'- `{name}`, {group}: undefined (a constant input, n = {n}).')
                else:
                    lines.append(f'- `{name}`, {group}: Spearman ρ = {result["rho"]:.3f} '
                                 f'(p = {result["pvalue"]:.3g}, n = {result["n"]}).')
        lines.append('')
        drops = summary['test_accuracy_drop']
        if drops:
            lines += ['## Test accuracy across the sweep', '']
            for v, d in drops.items():
                lines.append(f'- {v or "all runs"}: final test accuracy from {d["max"]:.3f} down to {d["min"]:.3f} '
                             f'(drop {d["drop"]:.3f}).')
            if len(drops) > 1:
                (first, a), *others = drops.items()
                for v, d in others:
                    if d['drop'] < a['drop']:
                        factor = a['drop'] / d['drop'] if d['drop'] > 0 else math.inf
                        lines.append(f'- **{v}** loses far less test accuracy than **{first}** as the sweep goes on: '
                                     f'drop {d["drop"]:.3f} vs {a["drop"]:.3f} ({factor:.1f}× smaller).')
                    else:
                        lines.append(f'- **{v}** loses at least as much test accuracy as **{first}**: '
                                     f'drop {d["drop"]:.3f} vs {a["drop"]:.3f}.')
                lines += ['', self.pivot_table(summary['runs'], 'test acc')]
            lines.append('')
        return lines

    def extra_figures(self, results: Sequence, figdir: pathlib.Path) -> list:
        """Fig. 1b (best test accuracy against each final Ω, one colour per variant) and the final
        test accuracy against σ (one line per variant)."""
        subtitle = textwrap.wrap(self.figure, 80)
        written = []
        for name, tags in self.quantities.items():
            scatter = {}
            for spec, record in results:
                point = (report_lib.last_value(record, tags), report_lib.best_value(record, 'test/accuracy'),
                         self.label(spec, with_variant=False) if spec.values.keys() - {'variant'} else '')
                scatter.setdefault(spec.values.get('variant', ''), []).append(point)
            path = figdir / f'best_test_accuracy_vs_{name}.png'
            xlabel = QUANTITY_LABELS.get(name, f'final {report_lib.axis_label(tags)}')
            title = '\n'.join([f'Best test accuracy vs {xlabel} (Fig. 1b)'] + subtitle)
            if report_lib.plot_scatter(scatter, path, xlabel=xlabel, ylabel='best test accuracy', title=title):
                written.append((f'Best test accuracy vs {xlabel} (Fig. 1b)', path))
        label = 'Final test accuracy vs initialization scale σ'
        written += self.final_vs_axis_figure(results, figdir / 'final_test_accuracy_vs_sigma.png', SIGMA, 'test/accuracy',
                                             xlabel='σ (initialization scale of the first layer)',
                                             ylabel='final test accuracy', title='\n'.join([label] + subtitle))
        return written
