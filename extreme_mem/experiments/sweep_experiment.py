"""`SweepExperiment`: the base of every paper experiment (DESIGN.md section 8).

A paper experiment is a sweep of `single_run`s (axes × named variants × seeds, or random
points) followed by a report built from the runs' `results.json` files only:

    specs() ──► run_specs() ──► summarize() ──► report.md, report.json, figures/*.png

Each run is its own `launch/train.py --experiment=single_run` process, started with the gin
files and `--gin_param`s this experiment was launched with plus the run's bindings
(`sweep.run_sweep`), in `<workdir>/runs/<run_name>/`. A rerun reruns every run's process, which
skips it (done, same configuration), resumes it (checkpoints) or refuses it (another
configuration; `overwrite` starts it over).

The report scaffold gives a runs table (axis values, status, steps, accuracies and the final
value of each summary quantity), one panel per tag group against steps (split by variant when
variants are crossed with a sweep), and `report.md` / `report.json`. A paper overrides the hooks
marked [Optional]: `run_row`, `summarize`, `report_sections`, `extra_figures`.
"""

import json
import math
import pathlib
import textwrap
from typing import Mapping, Optional, Sequence

import numpy as np
from absl import logging

from extreme_mem import config
from extreme_mem.experiments import base
from extreme_mem.experiments import sweep as sweep_lib
from extreme_mem.experiments import workdir_lock
from extreme_mem.summaries import report as report_lib
from extreme_mem.summaries import tensorboard as tensorboard_lib

Results = Sequence  # [(sweep.RunSpec, results.json dict or None)]


class SweepExperiment(base.Experiment):
    """Runs a sweep of single runs, then writes its report.

    Class attributes a paper sets: `name` (registry name), `paper` (citation),
    `default_panels` (panel -> alternative tags plotted against steps), `panel_titles`,
    `log_panels` (panel-name prefixes drawn with a log y axis), `default_quantities` (name ->
    alternative tags whose final value is a runs-table column `final <name>`), `axis_labels`
    (binding key -> label).

    Args:
      workdir: sweep directory: `runs/<run>/`, `sweep.{md,json}`, `report.{md,json}`, `figures/`.
      seed: seed of every run without its own (see `seeds`).
      overwrite: see `base.Experiment`; passed to every run.
      figure: what the report reproduces, e.g. 'Fig. 1a and 2 (CIFAR-10)'.
      sweep: binding key -> values (a grid; comma-joined keys zip, see `sweep.expand_axes`).
      variants: variant name -> bindings, crossed with the sweep.
      random_axes: binding key -> `(kind, args)` (`sweep.random_points`), instead of `sweep`.
      num_samples: random points drawn from `random_axes`.
      seeds: every spec is run once per seed.
      panels: replaces `default_panels`.
      quantities: replaces `default_quantities`.
      axis_labels: merged over the class's `axis_labels`.
      parallel: runs at once.
      timeout: seconds per run (None: no limit); a timed-out run resumes on the next rerun.
      in_process: run the single runs in this process, one after another (tests, debugging).
    """

    name = 'sweep'
    paper = ''
    default_panels: dict = {'train_accuracy': ['train/accuracy'], 'test_accuracy': ['test/accuracy']}
    panel_titles: dict = {'train_accuracy': 'Train accuracy', 'test_accuracy': 'Test accuracy'}
    log_panels: tuple = ()
    default_quantities: dict = {}
    axis_labels: dict = {}

    def __init__(
        self,
        workdir: str,
        seed: int = 0,
        overwrite: bool = False,
        figure: str = '',
        sweep: Optional[Mapping[str, Sequence]] = None,
        variants: Optional[Mapping[str, Mapping]] = None,
        random_axes: Optional[Mapping[str, tuple]] = None,
        num_samples: int = 0,
        seeds: Optional[Sequence[int]] = None,
        panels: Optional[Mapping[str, Sequence[str]]] = None,
        quantities: Optional[Mapping[str, Sequence[str]]] = None,
        axis_labels: Optional[Mapping[str, str]] = None,
        parallel: int = 2,
        timeout: Optional[float] = None,
        in_process: bool = False,
    ):
        super().__init__(workdir=workdir, seed=seed, overwrite=overwrite)
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise config.ConfigError(f'{type(self).__name__}.parallel must be an integer >= 1, got {parallel!r}.')
        if random_axes and sweep:
            raise config.ConfigError(f'{type(self).__name__}: give either sweep or random_axes, not both.')
        if random_axes and num_samples < 1:
            raise config.ConfigError(f'{type(self).__name__}.num_samples must be >= 1 with random_axes, '
                                     f'got {num_samples!r}.')
        self.figure = figure
        self.sweep = dict(sweep or {})
        self.variants = dict(variants or {})
        self.random_axes = dict(random_axes or {})
        self.num_samples = int(num_samples)
        self.seeds = list(seeds or [])
        self.panels = {k: report_lib.alternatives(v) for k, v in (panels or self.default_panels).items()}
        self.quantities = {k: report_lib.alternatives(v) for k, v in (quantities or self.default_quantities).items()}
        self.labels = {**self.axis_labels, **dict(axis_labels or {})}
        self.parallel = parallel
        self.timeout = timeout
        self.in_process = bool(in_process)
        # The gin files and bindings this experiment was launched with; every run starts from them.
        self._launch_config = config.parsed_files_and_bindings()
        self._specs = self.specs()  # validates the axes now, before any run

    # ---- runs ---------------------------------------------------------------------------------

    def specs(self) -> list:
        """[Optional] The runs of this experiment (default: variants × sweep or random points × seeds)."""
        if self.random_axes:
            return sweep_lib.random_search(self.random_axes, self.num_samples, seed=self.seed,
                                           variants=self.variants, seeds=self.seeds)
        return sweep_lib.make_specs(self.sweep, self.variants, self.seeds)

    def run_dir(self, spec: sweep_lib.RunSpec) -> pathlib.Path:
        return sweep_lib.run_dir(self.workdir, spec)

    def run_specs(self, specs: Sequence[sweep_lib.RunSpec]) -> list:
        """Runs (or skips, or resumes) `specs`; returns `[(spec, record)]`."""
        files, params = self._launch_config
        return sweep_lib.run_sweep(specs, self.workdir, gin_files=files, gin_params=params, seed=self.seed,
                                   parallel=self.parallel, timeout=self.timeout, overwrite=self.overwrite,
                                   in_process=self.in_process)

    def run_all(self, specs: Sequence[sweep_lib.RunSpec]) -> list:
        """[Optional] Runs every spec with one `run_specs` call; a paper whose runs start from other
        runs' weights (e.g. downstream after upstream) runs them in stages here."""
        return self.run_specs(specs)

    def run(self) -> dict:
        """Runs every spec, then writes the report; returns the summary (report.json content)."""
        with workdir_lock.WorkdirLock(self.workdir):
            logging.info('%s: %d runs into %s', self.figure or self.name, len(self._specs), self.workdir)
            results = self.run_all(self._specs)
            sweep_lib.aggregate(results, self.workdir)
            summary = self.write_report(results)
        summary['status_line'] = sweep_lib.status_line(results)
        summary['ok'] = sweep_lib.all_ok(results)
        logging.info('%s: %s.', self.figure or self.name, summary['status_line'])
        return summary

    # ---- report hooks -------------------------------------------------------------------------

    def label(self, spec: sweep_lib.RunSpec, with_variant: bool = True) -> str:
        """'variant, σ = 0.01' for legends."""
        point = ', '.join(f'{self.labels.get(k, k.split(".")[-1])} = {sweep_lib._format(v)}'  # pylint: disable=protected-access
                          for k, v in spec.values.items() if k != 'variant')
        variant = str(spec.values.get('variant', ''))
        if with_variant and variant:
            return f'{variant}, {point}' if point else variant
        return point or variant or spec.name

    def run_row(self, spec: sweep_lib.RunSpec, record: Optional[dict]) -> dict:
        """[Optional] Extra columns of this run's row in the runs table."""
        del spec, record
        return {}

    def summarize(self, results: Results) -> dict:
        """[Optional: extend with super()] `{'figure', 'runs': [row per run]}` from the records."""
        rows = []
        for spec, record in results:
            record = record or {}
            row = {'run': spec.name}
            for k, v in spec.values.items():
                row[k if k in ('variant', 'seed') else self.labels.get(k, k.split('.')[-1])] = v
            row.update({
                'status': record.get('status', 'missing'),
                'steps': record.get('final_step'),
                'train acc': report_lib.last_value(record, 'train/accuracy'),
                'test acc': report_lib.last_value(record, 'test/accuracy'),
                'best test acc': report_lib.best_value(record, 'test/accuracy'),
            })
            for name, tags in self.quantities.items():
                row[f'final {name}'] = report_lib.last_value(record, tags)
            row.update(self.run_row(spec, record))
            rows.append(row)
        return {'figure': self.figure, 'runs': rows}

    def report_sections(self, summary: dict) -> list:
        """[Optional] Markdown lines placed after the runs table."""
        del summary
        return []

    def extra_figures(self, results: Results, figdir: pathlib.Path) -> list:
        """[Optional] Draws paper-only figures; returns `[(label, path)]` of those written."""
        del results, figdir
        return []

    # ---- helpers for paper hooks --------------------------------------------------------------

    def pivot_table(self, rows: Sequence[dict], column: str) -> str:
        """Markdown table of `column` per grid point (rows) and variant (columns)."""
        axis_cols = [self.labels.get(k, k.split('.')[-1]) for k in sweep_keys(self.sweep)]
        table: dict = {}
        for r in rows:
            key = tuple(r.get(c) for c in axis_cols)
            table.setdefault(key, {c: r.get(c) for c in axis_cols})[f'{column}: {r.get("variant")}'] = r[column]
        return report_lib.markdown_table(list(table.values()), axis_cols + [f'{column}: {v}' for v in self.variants])

    def final_vs_axis_figure(self, results: Results, path: pathlib.Path, axis_key: str, tag: str,
                             xlabel: str, ylabel: str, title: str) -> list:
        """The final value of `tag` against the sweep axis `axis_key`, one line per variant (and
        other axis values), the mean over seeds; a log x axis when the values span a decade.

        Returns:
          `[(title's first line, path)]`, or [] when fewer than 2 points have the axis.
        """
        points: dict = {}
        for spec, record in results:
            x = spec.values.get(axis_key)
            if not isinstance(x, (int, float)) or isinstance(x, bool):
                continue
            others = {k: v for k, v in spec.values.items() if k not in (axis_key, 'seed', 'variant')}
            group = ', '.join([str(spec.values.get('variant', ''))] * bool(spec.values.get('variant'))
                              + [f'{self.labels.get(k, k.split(".")[-1])} = {v}' for k, v in others.items()])
            points.setdefault(group, {}).setdefault(float(x), []).append(report_lib.last_value(record, tag))
        if sum(len(p) for p in points.values()) < 2:
            return []
        curves = {g: [(x, np.nanmean(ys) if np.isfinite(ys).any() else math.nan) for x, ys in p.items()]
                  for g, p in points.items()}
        xs = [x for p in points.values() for x in p]
        if report_lib.plot_curves(curves, path, xlabel=xlabel, ylabel=ylabel, title=title,
                                  logx=min(xs) > 0 and max(xs) / min(xs) >= 10):
            return [(title.split('\n')[0], path)]
        return []

    # ---- report -------------------------------------------------------------------------------

    def split_by_variant(self) -> bool:
        """Panels are drawn per variant when variants are crossed with a sweep of several points."""
        points = len(sweep_lib.expand_axes(self.sweep)) if not self.random_axes else self.num_samples
        return len(self.variants) > 1 and points * max(len(self.seeds), 1) > 1

    def panel_figures(self, results: Results, figdir: pathlib.Path) -> tuple:
        """One PNG per panel (and per variant when split); returns `([(label, path)], notes)`."""
        written, notes = [], []
        split = self.split_by_variant()
        if split:
            groups = {v: [(s, r) for s, r in results if s.values.get('variant') == v] for v in self.variants}
        else:
            groups = {'': list(results)}
        for panel, tags in self.panels.items():
            title = self.panel_titles.get(panel, panel)
            drawn_any = False
            for group, members in groups.items():
                records = {self.label(s, with_variant=not split): r for s, r in members}
                path = figdir / (f'{panel}_{sweep_lib.safe_name(group)}.png' if group else f'{panel}.png')
                label = f'{title} — {group}' if group else title
                full_title = '\n'.join([label] + textwrap.wrap(self.figure, 80))
                if report_lib.plot_panel(records, tags, path, title=full_title,
                                         logy=bool(self.log_panels) and panel.startswith(tuple(self.log_panels))):
                    written.append((label, path))
                    drawn_any = True
            if not drawn_any:
                notes.append(f'Panel `{panel}` skipped: no run logged {", ".join(f"`{t}`" for t in tags)}.')
        return written, notes

    def write_report(self, results: Results) -> dict:
        """Writes `report.md`, `report.json` and `figures/*.png` from `[(spec, record)]`; returns the summary."""
        workdir = pathlib.Path(self.workdir)
        figdir = workdir / 'figures'
        summary = self.summarize(results)
        figures, notes = self.panel_figures(results, figdir)
        figures += self.extra_figures(results, figdir)
        done = sum(r.get('status') == 'done' for r in summary['runs'])
        lines = [f'# {self.figure or self.name}', '']
        if self.paper:
            lines += [f'Reproduces {self.paper}.', '']
        lines += [f'Runs: `{len(results)}` single runs in `runs/` ({sweep_lib.status_line(results)}), each '
                  '`single_run` with this experiment\'s gin files and bindings plus its own; '
                  f'{done} done.', '']
        if self.sweep:
            lines.append('Sweep: ' + '; '.join(f'`{k}` ∈ {list(v)}' for k, v in self.sweep.items()) + '.')
        if self.random_axes:
            lines.append(f'Random search: {self.num_samples} points of '
                         + '; '.join(f'`{k}` ~ {kind}{tuple(a)}' for k, (kind, a) in self.random_axes.items()) + '.')
        if self.variants:
            lines.append('Variants: ' + '; '.join(f'**{k}** `{dict(v)}`' for k, v in self.variants.items()) + '.')
        if self.seeds:
            lines.append(f'Seeds: {self.seeds}.')
        lines += ['', '## Runs', '', report_lib.markdown_table(summary['runs']), '',
                  'Accuracies are final (last evaluation) except *best test acc* (max over evaluations); '
                  '*final* quantities are the last logged value.', '']
        lines += self.report_sections(summary)
        lines += ['', '## Figures', '']
        for label, path in figures:
            lines += [f'**{label}**', '', f'![{label}]({report_lib.relative_link(path, workdir)})', '']
        lines += [f'- {note}' for note in notes]
        config.write_atomic(workdir / 'report.md', '\n'.join(lines).rstrip() + '\n')
        summary['figures'] = [str(p) for _, p in figures]
        summary['notes'] = notes
        config.write_atomic(workdir / 'report.json', json.dumps(jsonable(summary), indent=1))
        tensorboard_lib.write_images(sweep_lib.tensorboard_dir(workdir) / tensorboard_lib.REPORT_RUN, figures,
                                     step=done)
        logging.info('Report: %s (%d figures)', workdir / 'report.md', len(figures))
        return summary


def jsonable(value):
    """`value` with NaN/inf as None and numpy scalars/arrays as Python values (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def sweep_keys(axes: Mapping[str, Sequence]) -> list:
    """The binding keys of `axes` (zipped keys split)."""
    return [k.strip() for key in axes for k in key.split(',') if k.strip()]
