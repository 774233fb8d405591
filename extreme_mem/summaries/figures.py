"""Figures from results.json records (matplotlib, headless)."""

import os
from typing import Mapping

from extreme_mem.summaries import results as results_lib


def plot_curves(records: Mapping[str, dict], tag: str, path: os.PathLike, title: str = '', logx: bool = False) -> None:
    """One line per run: `tag` against optimizer steps; saved as a PNG at `path`."""
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, record in records.items():
        steps, values = results_lib.series(record or {}, tag)
        if steps:
            ax.plot(steps, values, label=label)
    ax.set_xlabel('optimizer steps')
    ax.set_ylabel(tag)
    if logx:
        ax.set_xscale('symlog')
    ax.set_title(title or tag)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.fspath(path)) or '.', exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
