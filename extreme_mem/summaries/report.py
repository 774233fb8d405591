"""Reports of a sweep from its `results.json` records only: tables, rank correlations, figures.

Readers for experiments and colabs (headless matplotlib).

Generic (no paper knowledge): a paper experiment picks the panels (tags to plot), the summary
quantities and the text. Every function tolerates missing runs, statuses and tags: a panel no run
logged is skipped with a note instead of failing, so a report can be built from a partial or
resumed sweep at any time.

Panels and summary quantities are given as *alternative tags*: a list of tags of which each run
uses the first one it logged. This lets runs of different architectures share a panel (e.g. the
last hidden layer is `hidden` in an MLP and `fc` in the ConvNet).
"""

import math
import os
import pathlib
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from extreme_mem.summaries import results as results_lib

Tags = Union[str, Sequence[str]]

# Axis labels of tags, in the papers' words: a paper experiment adds its own with `label_tags`. A
# tag matches its exact entry, else its `split/quantity` entry (any layer).
TAG_LABELS = {
    'train/accuracy': 'train accuracy',
    'test/accuracy': 'test accuracy',
    'train/loss': 'train loss',
    'test/loss': 'test loss',
}


def label_tags(labels: Mapping[str, str]) -> None:
    """Adds `{tag or 'split/quantity': axis label}` entries used by `axis_label`."""
    TAG_LABELS.update(labels)


def axis_label(tags: Tags) -> str:
    """The label of the first of `tags` with one in `TAG_LABELS` (exact, then without the layer);
    else `short_name(tags)`."""
    for tag in alternatives(tags):
        for key in (tag, '/'.join(tag.split('/')[:2])):
            if key in TAG_LABELS:
                return TAG_LABELS[key]
    return short_name(tags)


def alternatives(tags: Tags) -> list:
    """`tags` as a list of alternative tags (a single tag becomes a one-element list)."""
    return [tags] if isinstance(tags, str) else list(tags)


def short_name(tags: Tags) -> str:
    """A label for alternative tags: the tag itself, or their common prefix and '…'."""
    tags = alternatives(tags)
    if len(tags) == 1:
        return tags[0]
    return os.path.commonprefix(tags) + '…'


def pick_tag(record: Optional[dict], tags: Tags) -> Optional[str]:
    """The first of `tags` that `record` logged (in its history or final values); None if none."""
    if not record:
        return None
    logged = set(record.get('final', {}))
    for h in record.get('history', []):
        logged.update(k for k, v in h.items() if v is not None)
    for tag in alternatives(tags):
        if tag in logged:
            return tag
    return None


def last_value(record: Optional[dict], tags: Tags) -> float:
    """The last logged value of the first available tag (final values win over history); NaN if none."""
    tag = pick_tag(record, tags)
    if tag is None:
        return math.nan
    final = record.get('final', {}).get(tag)
    if final is not None:
        return float(final)
    _, values = results_lib.series(record, tag)
    return float(values[-1]) if values else math.nan


def best_value(record: Optional[dict], tags: Tags, mode: str = 'max') -> float:
    """Max (or min) of the first available tag over the history and final values; NaN if none."""
    if mode not in ('max', 'min'):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}.")
    tag = pick_tag(record, tags)
    if tag is None:
        return math.nan
    _, values = results_lib.series(record, tag)
    final = record.get('final', {}).get(tag)
    values = [float(v) for v in values] + ([float(final)] if final is not None else [])
    if not values:
        return math.nan
    return max(values) if mode == 'max' else min(values)


def finite_pairs(x: Sequence[float], y: Sequence[float]) -> list:
    """The pairs of (x, y) with both values finite."""
    return [(float(a), float(b)) for a, b in zip(x, y) if np.isfinite(a) and np.isfinite(b)]


def spearman(x: Sequence[float], y: Sequence[float], min_n: int = 3) -> Optional[dict]:
    """Spearman rank correlation of the finite pairs of (x, y).

    Args:
      min_n: fewer finite pairs give None (with very few runs ρ is coarse and its p-value
        meaningless: n = 3 gives ρ = ±1 with p = 0).

    Returns:
      `{'rho', 'pvalue', 'n'}`, or None with fewer than `max(min_n, 3)` finite pairs or a
      constant input (the correlation is undefined).
    """
    from scipy import stats  # pylint: disable=g-import-not-at-top

    pairs = finite_pairs(x, y)
    if len(pairs) < max(int(min_n), 3):
        return None
    xs, ys = np.array(pairs).T
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return None
    result = stats.spearmanr(xs, ys)
    return {'rho': float(result.statistic), 'pvalue': float(result.pvalue), 'n': len(pairs)}


def format_value(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return '—'
    if isinstance(v, float):
        return f'{v:.4g}'
    return str(v)


def markdown_table(rows: Sequence[dict], columns: Optional[Sequence[str]] = None) -> str:
    """A markdown table of dict rows (columns: `columns` or the first row's keys)."""
    if not rows:
        return '(no runs)'
    cols = list(columns or rows[0])
    lines = ['| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)]
    lines += ['| ' + ' | '.join(format_value(r.get(c)) for c in cols) + ' |' for r in rows]
    return '\n'.join(lines)


def pyplot():
    """matplotlib's pyplot on the headless Agg backend (imported lazily)."""
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

    return plt


def save_figure(fig, ax, path: os.PathLike, legend: bool = False) -> None:
    """Grid, optional legend, tight layout; writes the PNG (creating its directory) and closes."""
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.fspath(path)) or '.', exist_ok=True)
    fig.savefig(path, dpi=100)
    pyplot().close(fig)


def plot_panel(
    records: Mapping[str, Optional[dict]],
    tags: Tags,
    path: os.PathLike,
    title: str = '',
    ylabel: str = '',
    logy: bool = False,
) -> list:
    """One line per run: the first available of `tags` against optimizer steps, saved as a PNG.

    Args:
      records: legend label -> results.json record (None for a missing run).
      tags: alternative tags (see module docstring).
      path: PNG path (parent directories are created).
      title: axes title (default: the tags).
      ylabel: y label (default: the tags).
      logy: log-scale y axis (values <= 0 are not drawn).

    Returns:
      The labels of the runs drawn; empty (and no file written) if no run logged any tag.
    """
    drawn = []
    lines = []
    for label, record in records.items():
        tag = pick_tag(record, tags)
        if tag is None:
            continue
        steps, values = results_lib.series(record, tag)
        if steps:
            lines.append((label, steps, values))
            drawn.append(label)
    if not lines:
        return []
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, steps, values in lines:
        ax.plot(steps, values, label=label)
    name = ' | '.join(alternatives(tags))
    ax.set_xlabel('optimizer steps')
    ax.set_ylabel(ylabel or axis_label(tags))
    if logy:
        ax.set_yscale('log')
    ax.set_title(title or name, fontsize=10)
    save_figure(fig, ax, path, legend=True)
    return drawn


def plot_scatter(
    groups: Mapping[str, Sequence[tuple]],
    path: os.PathLike,
    xlabel: str,
    ylabel: str,
    title: str = '',
) -> int:
    """Scatter of (x, y, annotation) points, one colour per group; saved as a PNG.

    Returns:
      The number of finite points drawn (no file is written when it is 0).
    """
    finite = {g: [(x, y, a) for x, y, a in pts if np.isfinite(x) and np.isfinite(y)] for g, pts in groups.items()}
    count = sum(len(p) for p in finite.values())
    if not count:
        return 0
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for group, pts in finite.items():
        if pts:
            xs, ys, _ = zip(*pts)
            ax.scatter(xs, ys, label=group or None, s=30)
    _annotate(ax, [(x, y, note) for pts in finite.values() for x, y, note in pts if note])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    save_figure(fig, ax, path, legend=any(g for g in finite))
    return count


def _annotate(ax, notes: Sequence[tuple], min_pixels: float = 10.0) -> None:
    """Writes `(x, y, text)` notes next to their points, stacking the texts of points closer than
    `min_pixels` on screen so they do not overlap."""
    ax.autoscale_view()
    placed = []
    for x, y, note in notes:
        px = ax.transData.transform((x, y))
        near = sum(1 for q in placed if np.hypot(*(q - px)) < min_pixels)
        placed.append(px)
        ax.annotate(str(note), (x, y), fontsize=7, xytext=(4, 3 - 9 * near), textcoords='offset points',
                    va='bottom' if not near else 'top')


def plot_curves(
    groups: Mapping[str, Sequence[tuple]],
    path: os.PathLike,
    xlabel: str,
    ylabel: str,
    title: str = '',
    logx: bool = False,
) -> int:
    """One line with markers per group through its finite (x, y) points, sorted by x; saved as a PNG.

    Args:
      groups: legend label ('' for none) -> [(x, y)].
      logx: log-scale x axis (points with x <= 0 are not drawn).

    Returns:
      The number of points drawn (no file is written when it is 0).
    """
    finite = {g: sorted((float(x), float(y)) for x, y in pts
                        if np.isfinite(x) and np.isfinite(y) and (x > 0 or not logx))
              for g, pts in groups.items()}
    count = sum(len(p) for p in finite.values())
    if not count:
        return 0
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for group, pts in finite.items():
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker='o', label=group or None)
    if logx:
        ax.set_xscale('log')
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    save_figure(fig, ax, path, legend=any(g for g in finite))
    return count


def relative_link(path: os.PathLike, start: os.PathLike) -> str:
    """`path` relative to directory `start`, with forward slashes (for markdown links)."""
    return pathlib.Path(os.path.relpath(path, start)).as_posix()
