"""Mehta, Cutkosky & Neyshabur (ICLR 2021), "Extreme Memorization via Scale of Initialization".

`ExtremeMemorization` (registered `extreme_memorization`) runs one figure of the paper: a sweep
of single runs (the init scale σ of the first layer, learning rates, ...) times named variants
(activations, losses, architectures, datasets), then writes `report.md`, `report.json` and
`figures/*.png` from the runs' `results.json` files only. Gin files: `gin/mehta2021/*.gin`;
README section: `docs/mehta2021.md`.

How the runs get their configuration: the experiment writes the whole parsed gin config of its
own process (every file, include and `--gin_param` it was launched with, flattened, with its
`import` lines; `flat_config_text`) to `<workdir>/sweep_config.gin`. Each run is then
`launch/train.py --experiment=single_run --gin_file=<workdir>/sweep_config.gin` plus the run's
bindings as `--gin_param`s (variant bindings first, then sweep values), in
`<workdir>/runs/<run_name>/` (`sweep.run_sweep`). Runs therefore never recurse into the sweep
(they are `single_run`), a sweep macro such as `INIT_SCALE` overrides every `%INIT_SCALE`, and
a rerun skips finished runs and resumes the others from their checkpoints.

Paper → tags: Fig. 2a/6d train accuracy `train/accuracy`; Fig. 1a/6c test accuracy
`test/accuracy`; Fig. 2b ‖∇W1‖/‖W1‖ `train/relative_grad_norm/hidden`; "hidden layer gradients"
`train/grad_alignment/hidden`; "top layer gradients" `train/grad_alignment/logits`; "logit
gradients" `train/grad_alignment/logits_grad`; "hidden layer activations" (representation
alignment Ω^r) `train/rep_alignment/hidden`.
"""

import itertools
import json
import math
import os
import pathlib
import re
import textwrap
from typing import Mapping, Optional, Sequence

import gin
import numpy as np
from absl import logging

from extreme_mem import config, registry
from extreme_mem.experiments import base
from extreme_mem.summaries import report as report_lib
from extreme_mem.experiments import sweep as sweep_lib
from extreme_mem.summaries import results as results_lib

CONFIG_FILENAME = 'sweep_config.gin'
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
    'relative_grad_norm_hidden': 'Relative norms ‖∇W1‖ / ‖W1‖',
    'grad_alignment_hidden': 'Hidden layer gradients: Ω_in-class',
    'grad_alignment_top': 'Top layer gradients: Ω_in-class',
    'grad_alignment_logits': 'Logit gradients: Ω_in-class',
    'rep_alignment_hidden': 'Hidden layer activations: Ω^r_in-class',
    'rep_alignment_last_hidden': 'Last hidden layer activations: Ω^r_in-class',
    'relative_grad_norm_hidden1': 'Relative norms ‖∇W1‖ / ‖W1‖',
    'grad_alignment_hidden1': 'First hidden layer gradients: Ω_in-class',
    'rep_alignment_hidden1': 'First hidden layer activations: Ω^r_in-class',
    'rep_alignment_hidden3': 'Last hidden layer activations: Ω^r_in-class',
}
# Summary quantity name -> alternative tags; its final value goes in the table, and its Spearman
# correlation with the best test accuracy in the report (Fig. 1b).
DEFAULT_OMEGAS = {
    'grad_alignment_hidden': ['train/grad_alignment/hidden'],
    'rep_alignment_hidden': ['train/rep_alignment/hidden'],
}
DEFAULT_AXIS_LABELS = {'INIT_SCALE': 'σ'}
LOG_PANELS = ('relative_grad_norm',)  # panels drawn with a log y axis (prefix match)


def _short(key: str) -> str:
    return key.split('.')[-1]


def _safe_name(text: str) -> str:
    return re.sub(r'[^A-Za-z0-9_.=,+-]', '_', text) or 'run'


def expand_axes(axes: Optional[Mapping[str, Sequence]]) -> list:
    """Grid points of `axes` as a list of `{binding_key: value}` dicts, in order.

    Args:
      axes: binding key -> list of values. A key made of several comma-separated binding keys
        is a *zipped* axis whose values are tuples, one entry per key, e.g.
        `{'INIT_SCALE, losses.hinge.margin': [(0.001, 1.0), (0.01, 10.0)]}` (a margin that
        scales with σ). None or {} is a single point with no bindings.

    Raises:
      ValueError: an axis without values, or a zipped value of the wrong length.
    """
    if not axes:
        return [{}]
    choices = []
    for key, values in axes.items():
        keys = [k.strip() for k in key.split(',') if k.strip()]
        values = list(values)
        if not keys or not values:
            raise ValueError(f'Sweep axis {key!r} needs a binding key and at least one value, got {values!r}.')
        if len(keys) == 1:
            choices.append([{keys[0]: v} for v in values])
            continue
        points = []
        for v in values:
            if not isinstance(v, (tuple, list)) or len(v) != len(keys):
                raise ValueError(f'Zipped sweep axis {key!r} needs {len(keys)}-tuples, got {v!r}.')
            points.append(dict(zip(keys, v)))
        choices.append(points)
    grid = []
    for combo in itertools.product(*choices):
        point = {}
        for part in combo:
            point.update(part)
        grid.append(point)
    return grid


def make_specs(axes: Optional[Mapping[str, Sequence]], variants: Optional[Mapping[str, Mapping]] = None) -> list:
    """One `sweep.RunSpec` per (variant, grid point).

    Args:
      axes: see `expand_axes`.
      variants: variant name -> `{binding_key: value}` applied before the axis values; None: one
        unnamed variant without bindings.

    Returns:
      RunSpecs named `<variant>,<axis>=<value>,...` (the axis part alone without variants, as
      `launch/sweep.py` names runs), with `values` holding `variant` (if any) and the axis values.
    """
    points = expand_axes(axes)
    named = bool(variants)
    specs = []
    for variant, variant_bindings in (variants or {'': {}}).items():
        for values in points:
            parts = ([str(variant)] if named else []) + ([sweep_lib.make_spec(values).name] if values else [])
            bindings = {**dict(variant_bindings or {}), **values}
            specs.append(sweep_lib.RunSpec(
                name=_safe_name(','.join(parts)),
                values={**({'variant': variant} if named else {}), **values},
                bindings=tuple(f'{k} = {v!r}' for k, v in bindings.items()),
            ))
    return specs


def flat_config_text() -> str:
    """The parsed gin config as one gin file that a fresh process parses to the same bindings.

    `gin.config_str()` is not used for the bindings because it pretty-prints values with
    `pprint`, which sorts dict keys (the order of `variants` and `panels` matters here); its
    `import` lines are kept. Values are written with `repr`, so macros stay references
    (`%INIT_SCALE`) and a later binding of the macro changes every use.
    """
    imports = [line for line in gin.config_str().splitlines() if line.startswith(('import ', 'from '))]
    macros, bindings = [], []
    for key, value in config.config_dict().items():
        if key.endswith('/gin.macro.value'):
            macros.append(f'{key[: -len("/gin.macro.value")]} = {value}')
        else:
            bindings.append(f'{key} = {value}')
    header = ['# Flattened gin config of an extreme_memorization sweep (written by the sweep; do not edit).']
    return '\n'.join(header + imports + [''] + macros + [''] + bindings) + '\n'


def _point_label(values: dict, axis_labels: Mapping[str, str]) -> str:
    """'σ = 0.01, margin = 10' for a run's axis values (its variant excluded)."""
    parts = []
    for k, v in values.items():
        if k != 'variant':
            parts.append(f'{axis_labels.get(k, _short(k))} = ' + (f'{v:g}' if isinstance(v, float) else str(v)))
    return ', '.join(parts)


@registry.EXPERIMENTS.register('extreme_memorization')
@gin.configurable(module='experiments', denylist=['workdir', 'seed'])
class ExtremeMemorization(base.Experiment):
    """Mehta et al. (ICLR 2021): a figure's sweep of single runs, then its report and figures.

    Reproduces Figs. 1-2 and 4-27 (one gin file per figure in `gin/mehta2021/`): test/train
    accuracy, relative gradient norms and in-class gradient / representation alignment Ω
    (eqs. 5-6) against training steps as σ (the first layer's init scale) or another knob
    varies, and the rank correlation between best test accuracy and final Ω (Fig. 1b).
    Deviations from the paper are listed in `docs/mehta2021.md` and inline in the gin files.

    Overrides `run` (unlike single-run experiments): the runs themselves are `single_run`
    subprocesses built by the inherited hooks from the same gin config (module docstring).

    Args:
      workdir: sweep directory: `runs/<run>/`, `sweep_config.gin`, `sweep.{md,json}`,
        `report.{md,json}`, `figures/`.
      seed: seed of every run.
      figure: what the report reproduces, e.g. 'Fig. 1a and 2 (CIFAR-10)'.
      sweep: binding key -> values (a grid; comma-joined keys zip, see `expand_axes`).
      variants: variant name -> bindings, crossed with the sweep (e.g. sin vs relu).
      panels: panel name -> alternative tags to plot against steps (default `DEFAULT_PANELS`).
      omegas: name -> alternative tags of the alignment quantities tabulated at their final
        value and rank-correlated with the best test accuracy (default `DEFAULT_OMEGAS`).
      axis_labels: binding key -> label in legends and tables (default `{'INIT_SCALE': 'σ'}`).
      parallel: runs at once.
      timeout: seconds per run (None: no limit).
      in_process: run the single runs in this process, one after another (tests and
        debugging: they then share TF state; the default runs each in its own process).
    """

    name = 'extreme_memorization'

    def __init__(
        self,
        workdir: str,
        seed: int = 0,
        figure: str = '',
        sweep: Optional[Mapping[str, Sequence]] = None,
        variants: Optional[Mapping[str, Mapping]] = None,
        panels: Optional[Mapping[str, Sequence[str]]] = None,
        omegas: Optional[Mapping[str, Sequence[str]]] = None,
        axis_labels: Optional[Mapping[str, str]] = None,
        parallel: int = 2,
        timeout: Optional[float] = None,
        in_process: bool = False,
    ):
        super().__init__(workdir=workdir, seed=seed)
        if parallel < 1:
            raise ValueError(f'parallel must be >= 1, got {parallel}.')
        self._figure = figure
        self._sweep = dict(sweep or {})
        self._variants = dict(variants or {})
        self._panels = {k: report_lib.alternatives(v) for k, v in (panels or DEFAULT_PANELS).items()}
        self._omegas = {k: report_lib.alternatives(v) for k, v in (omegas or DEFAULT_OMEGAS).items()}
        self._axis_labels = {**DEFAULT_AXIS_LABELS, **dict(axis_labels or {})}
        self._parallel = int(parallel)
        self._timeout = timeout
        self._in_process = bool(in_process)
        self.specs = make_specs(self._sweep, self._variants)  # validates the axes now

    # ---- running ------------------------------------------------------------------------------

    def _write_config(self) -> pathlib.Path:
        path = pathlib.Path(self.workdir) / CONFIG_FILENAME
        text = flat_config_text()
        if path.exists() and path.read_text() != text:
            logging.warning('%s changed since this sweep started; runs already done are kept as they are.', path)
        config.write_atomic(path, text)
        return path

    def _run_in_process(self, config_path: pathlib.Path) -> list:
        import keras  # pylint: disable=g-import-not-at-top

        results = []
        try:
            for spec in self.specs:
                directory = sweep_lib.run_dir(self.workdir, spec)
                record = results_lib.read(directory)
                if not (record and record.get('status') == 'done'):
                    gin.clear_config()
                    config.parse_gin([str(config_path)], spec.bindings)
                    try:
                        record = registry.EXPERIMENTS.get('single_run')(workdir=str(directory), seed=self.seed).run()
                    except Exception:  # pylint: disable=broad-except  (a failed run must not stop the sweep)
                        logging.exception('Run %s failed.', spec.name)
                        record = results_lib.read(directory) or {'final': {}, 'history': []}
                        record['status'] = 'failed'
                    keras.backend.clear_session()
                results.append((spec, record))
        finally:
            gin.clear_config()
            config.parse_gin([str(config_path)])  # restore this process's config
        return results

    def run(self) -> dict:
        """Runs (or resumes) every run of the sweep, then writes the report; returns its summary."""
        os.makedirs(self.workdir, exist_ok=True)
        config_path = self._write_config()
        logging.info('%s: %d runs into %s', self._figure or self.name, len(self.specs), self.workdir)
        if self._in_process:
            results = self._run_in_process(config_path)
        else:
            results = sweep_lib.run_sweep(self.specs, self.workdir, experiment='single_run',
                                          gin_files=[str(config_path)], seed=self.seed,
                                          parallel=self._parallel, timeout=self._timeout)
        sweep_lib.aggregate(results, self.workdir, columns=sweep_lib.DEFAULT_COLUMNS)
        return self.write_report(results)

    # ---- report -------------------------------------------------------------------------------

    def _label(self, spec, with_variant: bool) -> str:
        point = _point_label(spec.values, self._axis_labels)
        variant = spec.values.get('variant', '')
        if with_variant and variant:
            return f'{variant}, {point}' if point else str(variant)
        return point or str(variant) or spec.name

    def summarize(self, results: Sequence) -> dict:
        """Per-run rows, Spearman correlations and variant drops from `[(spec, record)]`."""
        rows = []
        for spec, record in results:
            record = record or {}
            row = {'run': spec.name}
            if 'variant' in spec.values:
                row['variant'] = spec.values['variant']
            for k, v in spec.values.items():
                if k != 'variant':
                    row[self._axis_labels.get(k, _short(k))] = v
            row.update({
                'status': record.get('status', 'missing'),
                'steps': record.get('final_step'),
                'train acc': report_lib.last_value(record, 'train/accuracy'),
                'test acc': report_lib.last_value(record, 'test/accuracy'),
                'best test acc': report_lib.best_value(record, 'test/accuracy'),
            })
            for name, tags in self._omegas.items():
                row[f'final {name}'] = report_lib.last_value(record, tags)
            rows.append(row)

        variants = list(self._variants) or ['']
        correlations = {}
        for name in self._omegas:
            groups = {'all runs': rows}
            if len(variants) > 1 and len(expand_axes(self._sweep)) > 1:  # per variant, across the sweep
                groups.update({v: [r for r in rows if r.get('variant') == v] for v in variants})
            for group, members in groups.items():
                result = report_lib.spearman([r['best test acc'] for r in members],
                                             [r[f'final {name}'] for r in members])
                correlations.setdefault(name, {})[group] = result

        drops = {}
        for v in variants:
            members = [r for r in rows if r.get('variant', '') == v and np.isfinite(r['test acc'])]
            if len(members) > 1:
                accs = [r['test acc'] for r in members]
                drops[v] = {'max': max(accs), 'min': min(accs), 'drop': max(accs) - min(accs)}
        return {'figure': self._figure, 'runs': rows, 'spearman': correlations, 'test_accuracy_drop': drops}

    def _figures(self, results: Sequence, figdir: pathlib.Path) -> tuple[list, list]:
        """Draws every panel (per variant when variants are crossed with a sweep) and the Fig. 1b scatters."""
        written, notes = [], []
        variants = list(self._variants)
        split = len(variants) > 1 and len(expand_axes(self._sweep)) > 1
        if split:
            groups = {v: [(s, r) for s, r in results if s.values.get('variant') == v] for v in variants}
        else:
            groups = {'': list(results)}
        for panel, tags in self._panels.items():
            title = PANEL_TITLES.get(panel, panel)
            logy = panel.startswith(LOG_PANELS)
            drawn_any = False
            for group, members in groups.items():
                records = {self._label(s, with_variant=not split): r for s, r in members}
                path = figdir / (f'{panel}_{_safe_name(group)}.png' if group else f'{panel}.png')
                label = f'{title} — {group}' if group else title
                full_title = '\n'.join([label] + textwrap.wrap(self._figure, 80))
                if report_lib.plot_panel(records, tags, path, title=full_title, logy=logy):
                    written.append((label, path))
                    drawn_any = True
            if not drawn_any:
                notes.append(f'Panel `{panel}` skipped: no run logged {", ".join(f"`{t}`" for t in tags)}.')
        for name, tags in self._omegas.items():
            scatter = {}
            for spec, record in results:
                point = (report_lib.last_value(record, tags), report_lib.best_value(record, 'test/accuracy'),
                         _point_label(spec.values, self._axis_labels))
                scatter.setdefault(spec.values.get('variant', ''), []).append(point)
            path = figdir / f'best_test_accuracy_vs_{name}.png'
            if report_lib.plot_scatter(scatter, path, xlabel=f'final {name} ({" | ".join(tags)})',
                                       ylabel='best test accuracy',
                                       title='\n'.join(['Best test accuracy vs final alignment (Fig. 1b)']
                                                        + textwrap.wrap(self._figure, 80))):
                written.append((f'Best test accuracy vs final {name} (Fig. 1b)', path))
            else:
                notes.append(f'Scatter of best test accuracy vs `{name}` skipped: no run logged '
                             f'{", ".join(f"`{t}`" for t in tags)}.')
        return written, notes

    def write_report(self, results: Sequence) -> dict:
        """Writes `report.md`, `report.json` and `figures/*.png` from `[(spec, record)]`; returns the summary."""
        workdir = pathlib.Path(self.workdir)
        summary = self.summarize(results)
        figures, notes = self._figures(results, workdir / 'figures')
        lines = [f'# {self._figure or "Extreme memorization sweep"}', '', f'Reproduces {PAPER}.', '']
        lines += [f'Runs: `{len(results)}` single runs in `runs/`, each `single_run` with `{CONFIG_FILENAME}` '
                  '(this sweep\'s flattened gin config) plus its bindings; '
                  f'{sum(r["status"] == "done" for r in summary["runs"])} done.', '']
        if self._sweep:
            lines.append('Sweep: ' + '; '.join(f'`{k}` ∈ {list(v)}' for k, v in self._sweep.items()) + '.')
        if self._variants:
            lines.append('Variants: ' + '; '.join(f'**{k}** `{dict(v)}`' for k, v in self._variants.items()) + '.')
        lines += ['', '## Runs', '', report_lib.markdown_table(summary['runs']), '',
                  'Accuracies are final (last evaluation) except *best test acc* (max over evaluations); '
                  '*final Ω* is the last logged value.', '']

        lines += ['## Best test accuracy vs final alignment (Spearman)', '']
        for name, groups in summary['spearman'].items():
            for group, result in groups.items():
                if result is None:
                    lines.append(f'- `{name}`, {group}: undefined '
                                 '(fewer than 3 runs with both values, or a constant input).')
                else:
                    lines.append(f'- `{name}`, {group}: Spearman ρ = {result["rho"]:.3f} '
                                 f'(p = {result["pvalue"]:.3g}, n = {result["n"]}).')
        lines.append('')

        if summary['test_accuracy_drop']:
            lines += ['## Test accuracy across the sweep', '']
            for v, d in summary['test_accuracy_drop'].items():
                lines.append(f'- {v or "all runs"}: final test accuracy from {d["max"]:.3f} down to {d["min"]:.3f} '
                             f'(drop {d["drop"]:.3f}).')
            if len(summary['test_accuracy_drop']) > 1:
                (first, a), *others = summary['test_accuracy_drop'].items()
                for v, d in others:
                    if d['drop'] < a['drop']:
                        factor = a['drop'] / d['drop'] if d['drop'] > 0 else math.inf
                        lines.append(f'- **{v}** loses far less test accuracy than **{first}** as the sweep goes on: '
                                     f'drop {d["drop"]:.3f} vs {a["drop"]:.3f} ({factor:.1f}× smaller).')
                    else:
                        lines.append(f'- **{v}** loses at least as much test accuracy as **{first}**: '
                                     f'drop {d["drop"]:.3f} vs {a["drop"]:.3f}.')
                lines += ['', self._pivot(summary['runs'])]
            lines.append('')

        lines += ['## Figures', '']
        for label, path in figures:
            lines += [f'**{label}**', '', f'![{label}]({report_lib.relative_link(path, workdir)})', '']
        for note in notes:
            lines.append(f'- {note}')
        config.write_atomic(workdir / 'report.md', '\n'.join(lines).rstrip() + '\n')
        summary['figures'] = [str(p) for _, p in figures]
        summary['notes'] = notes
        config.write_atomic(workdir / 'report.json', json.dumps(_jsonable(summary), indent=1))
        logging.info('Report: %s (%d figures)', workdir / 'report.md', len(figures))
        return summary

    def _pivot(self, rows: Sequence[dict]) -> str:
        """Final test accuracy per grid point (rows) and variant (columns)."""
        axis_cols = [self._axis_labels.get(k, _short(k)) for k in self._sweep_keys()]
        table: dict = {}
        for r in rows:
            key = tuple(r.get(c) for c in axis_cols)
            table.setdefault(key, {c: r.get(c) for c in axis_cols})[f'test acc: {r.get("variant")}'] = r['test acc']
        columns = axis_cols + [f'test acc: {v}' for v in self._variants]
        return report_lib.markdown_table(list(table.values()), columns)

    def _sweep_keys(self) -> list:
        return [k.strip() for key in self._sweep for k in key.split(',') if k.strip()]


def _jsonable(value):
    """`value` with NaN/inf as None and numpy scalars as Python numbers (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
