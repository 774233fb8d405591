"""Figures of Stephenson et al. (ICLR 2021) from runs' results.json records and `memorization` summaries.

Each function writes one PNG (headless matplotlib through `summaries.report`) and returns True
when it drew something (False when its inputs are missing, e.g. a metric that was not logged).
"""

import math
import os
from typing import Mapping, Sequence

import numpy as np

from extreme_mem.analysis import memorization
from extreme_mem.summaries import report

SUBSET_COLORS = {'unpermuted': 'tab:blue', 'permuted': 'tab:orange', 'restored': 'tab:green', 'test': 'tab:red',
                 'train': 'black', 'all': 'black'}


def _mean_series(records: Sequence[dict], tag: str, steps_per_epoch: int) -> tuple:
    """Epochs and the mean over records of `tag` at the steps every record logged."""
    curves = [memorization.series(r, tag) for r in records]
    curves = [c for c in curves if len(c[0])]
    if not curves:
        return np.array([]), np.array([])
    common = sorted(set.intersection(*(set(c[0].tolist()) for c in curves)))
    values = np.mean([[v[list(s).index(t)] for t in common] for s, v in curves], axis=0)
    return np.asarray(common) / steps_per_epoch, values


def subset_accuracy_curves(records: Sequence[dict], steps_per_epoch: int, path: os.PathLike, title: str) -> bool:
    """Fig. 2A (right) / A.3: train, test and subset accuracies against epochs (mean over seeds)."""
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = False
    for name, tag in (('train', 'train/accuracy'), ('test', 'test/accuracy'),
                      *((s, f'train/accuracy/{s}') for s in ('unpermuted', 'permuted', 'restored'))):
        x, y = _mean_series(records, tag, steps_per_epoch)
        if len(x):
            ax.plot(x, y, label=name, color=SUBSET_COLORS[name], ls='--' if name in ('train', 'test') else '-')
            drawn = True
    ax.set(xlabel='epoch', ylabel='accuracy', ylim=(0, 1.02))
    ax.set_title(title, fontsize=8)
    report.save_figure(fig, ax, path, legend=drawn)
    return drawn


def mgm_panels(summary: Mapping, stage: str, path: os.PathLike, title: str, faded_stage: str = '') -> bool:
    """Fig. 3 / A.4: α_M (99% CI error bars, lower bound 2/M), R_M, D_M, ρ_center against layer per subset."""
    geo, layers = summary.get('mftma', {}).get(stage), summary.get('layers', [])
    if not geo or not layers:
        return False
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    x = np.arange(len(layers))
    for ax, q in zip(axes, memorization.QUANTITIES):
        for s in memorization.SUBSETS:
            y = [geo[s][l][q] for l in layers]
            err = [geo[s][l]['capacity_ci99'] for l in layers] if q == 'capacity' else None
            err = None if err is None or all(e is None or not np.isfinite(e) for e in err) else \
                [0.0 if e is None or not np.isfinite(e) else e for e in err]
            ax.errorbar(x, y, yerr=err, marker='o', ms=3, capsize=2, color=SUBSET_COLORS[s], label=s)
            if faded_stage and summary['mftma'].get(faded_stage):
                ax.plot(x, [summary['mftma'][faded_stage][s][l][q] for l in layers], color=SUBSET_COLORS[s], alpha=0.25)
        if q == 'capacity':
            ax.axhline(summary.get('lower_bound', math.nan), color='gray', ls=':', label='2/M')
        ax.set_xticks(x, layers, rotation=60, fontsize=7)
        ax.set_title(q)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    report.save_figure(fig, axes[-1], path)
    return True


def rewinding_curves(summary: Mapping, path: os.PathLike, title: str) -> bool:
    """Fig. 4A-B: train and test accuracy against rewind epoch, one line per rewound layer."""
    rows = summary.get('rewinding') or []
    if not rows:
        return False
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    layers = list(dict.fromkeys(r['layer'] for r in rows))
    cmap = plt.get_cmap('viridis')
    for i, layer in enumerate(layers):
        pts = sorted((r['epoch'], r['train_acc'], r['test_acc']) for r in rows if r['layer'] == layer)
        color = cmap(i / max(len(layers) - 1, 1))
        for ax, k in zip(axes, (1, 2)):
            ax.plot([p[0] for p in pts], [p[k] for p in pts], color=color, label=layer)
    best = summary.get('subset_accuracy', {}).get('best', {}).get('test')
    if best is not None:
        axes[1].axhline(best, color='gray', ls=':', label='best epoch, mean over seeds (early stopping)')
    for ax, split in zip(axes, ('train', 'test')):
        ax.set(xlabel='rewind epoch', ylabel=f'{split} accuracy', title=f'{split} accuracy, one layer rewound')
    axes[0].grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    report.save_figure(fig, axes[1], path, legend=True)
    return True


def gradient_panels(records: Sequence[dict], layers: Sequence[str], steps_per_epoch: int, path: os.PathLike,
                    title: str) -> bool:
    """Fig. 5A-C (‖∇L‖ per layer on all / unpermuted / permuted) and 5D-G (dep and ind ratios, A.1)."""
    if not records or not any(memorization.series(records[0], f'train/grad_norm/all/{l}')[0].size for l in layers):
        return False
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    cmap = plt.get_cmap('viridis')
    for i, layer in enumerate(layers):
        color = cmap(i / max(len(layers) - 1, 1))
        for ax, subset in zip(axes[:3], ('all', 'unpermuted', 'permuted')):
            x, y = _mean_series(records, f'train/grad_norm/{subset}/{layer}', steps_per_epoch)
            ax.plot(x, y, color=color, label=layer)
            ax.set(title=f'‖∇L‖ on {subset}', xlabel='epoch', yscale='log')
        for ax, part in zip(axes[3:], ('dep', 'ind')):
            x, u = _mean_series(records, f'train/grad_norm_{part}/unpermuted/{layer}', steps_per_epoch)
            _, p = _mean_series(records, f'train/grad_norm_{part}/permuted/{layer}', steps_per_epoch)
            if len(x) and len(p) == len(u):
                ax.plot(x, u / np.maximum(p, 1e-30), color=color, label=layer)
            ax.axhline(1.0, color='gray', ls=':')
            ax.set(title=f'‖∇L_{part}‖ unpermuted / permuted', xlabel='epoch', yscale='log')
    for ax in axes[:-1]:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    report.save_figure(fig, axes[-1], path)
    return True


def embedding_grid(embeddings: Mapping, path: os.PathLike, title: str) -> bool:
    """Fig. 2B: last-layer features in 2-D per stage (rows) and subset (columns), coloured by label."""
    stages = [s for s in memorization.STAGES if s in embeddings]
    if not stages:
        return False
    plt = report.pyplot()
    fig, axes = plt.subplots(len(stages), 4, figsize=(14, 3.4 * len(stages)), squeeze=False)
    for r, stage in enumerate(stages):
        emb = embeddings[stage]
        for c, subset in enumerate(memorization.SUBSETS):
            ax = axes[r][c]
            xy, labels = np.asarray(emb[subset]['xy']), np.asarray(emb[subset]['labels'])
            ax.scatter(xy[:, 0], xy[:, 1], c=labels, cmap='tab10', s=6, vmin=0, vmax=9)
            ax.set_title(f'{stage}: {subset} ({emb["method"]})', fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title, fontsize=9)
    report.save_figure(fig, axes[-1][-1], path)
    return True


def double_descent(points: Sequence[Mapping], path: os.PathLike, title: str, subset: str = 'test') -> bool:
    """Fig. 4C-E: test accuracy and last-layer test-manifold geometry at best / final against the swept value."""
    if len(points) < 2:
        return False
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    labels = [p['point'] for p in points]
    x = np.arange(len(points))
    for stage, color in (('best', 'tab:blue'), ('final', 'tab:orange')):
        axes[0].plot(x, [p['subset_accuracy'][stage]['test'] for p in points], 'o-', color=color, label=stage)
        for ax, q in zip(axes[1:], memorization.QUANTITIES):
            ys = [p['mftma'][stage][subset][p['layers'][-1]][q] for p in points]
            ax.plot(x, ys, 'o-', color=color, label=stage)
            ax.set_title(f'{q} ({subset} manifolds, last layer)')
    axes[0].set_title('test accuracy')
    for ax in axes:
        ax.set_xticks(x, labels, rotation=45, fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    report.save_figure(fig, axes[0], path, legend=True)
    return True
