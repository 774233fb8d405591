"""Post-training analyses of one run, and their aggregation over seeds (Stephenson et al., ICLR 2021).

A run trained with one checkpoint per epoch is analysed at three *stages* (section 4): `init`
(the initial weights), `best` (the evaluated epoch of highest test accuracy, earliest on ties) and
`final` (the last checkpoint). Per stage: accuracy on the four subsets of section 3.1
(`unpermuted`, `permuted`, `restored` from the run's `train/accuracy/<subset>` history, `test`
from `test/accuracy`) and the MFTMA manifold geometry (α_M, R_M, D_M, ρ_center) of the four
manifold sets per probe layer (metrics/manifold_geometry.py, P classes × M examples; lower bound
2/M, Cover's theorem, footnote 2). Optionally layer rewinding (analysis/rewinding.py) from every
epoch's checkpoint, and a 2-D embedding of the last probe layer (Fig. 2B).

`aggregate` averages runs of several seeds: means of every quantity and the 99% confidence
interval of the mean capacity (Student t, half-width; the paper's Fig. 3 error bars).
"""

import math
import os
from typing import Callable, Optional, Sequence

import numpy as np
from absl import logging
from scipy import stats as scipy_stats

from extreme_mem.analysis import rewinding
from extreme_mem.geometry import embedding
from extreme_mem.metrics import base as metrics_base
from extreme_mem.metrics import manifold_geometry
from extreme_mem.metrics import subset_accuracy
from extreme_mem.models import base as models_base

STAGES = ('init', 'best', 'final')
SUBSETS = ('unpermuted', 'permuted', 'restored', 'test')
QUANTITIES = manifold_geometry.QUANTITIES


def series(record: Optional[dict], tag: str) -> tuple:
    """(steps [k], values [k]) of `tag` in a results.json record's history, in step order."""
    pairs = sorted((h['step'], h[tag]) for h in (record or {}).get('history', []) if h.get(tag) is not None)
    return np.array([p[0] for p in pairs], int), np.array([p[1] for p in pairs], float)


def value_at(record: Optional[dict], tag: str, step: int) -> float:
    steps, values = series(record, tag)
    hit = np.flatnonzero(steps == step)
    return float(values[hit[-1]]) if len(hit) else math.nan


def stage_steps(record: dict, checkpoint_steps: Sequence[int]) -> dict:
    """`{'init': 0, 'best': step, 'final': step}`; `best` among evaluations with weights (step 0 or a checkpoint).

    Raises:
      ValueError: the run has no checkpoint.
    """
    if not checkpoint_steps:
        raise ValueError('The run has no checkpoints; set train.Trainer.checkpoint_every to one epoch and '
                         'max_checkpoints above the epoch budget.')
    available = {0, *checkpoint_steps}
    steps, acc = series(record, 'test/accuracy')
    keep = np.array([s in available for s in steps], bool)
    best = int(steps[keep][np.argmax(acc[keep])]) if keep.any() else int(max(checkpoint_steps))
    return {'init': 0, 'best': best, 'final': int(max(checkpoint_steps))}


def mean_ci(values: Sequence[float], level: float = 0.99) -> tuple:
    """(mean, half-width of the `level` Student-t confidence interval of the mean); NaNs dropped.

    One value gives a NaN half-width; no values give (NaN, NaN).
    """
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if len(v) == 0:
        return math.nan, math.nan
    if len(v) == 1:
        return float(v[0]), math.nan
    half = scipy_stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean()), float(half)


def predict(model, images: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """[n] argmax predictions in inference mode."""
    out = [np.argmax(np.asarray(model(images[a:a + batch_size], training=False)), -1)
           for a in range(0, len(images), batch_size)]
    return np.concatenate(out) if out else np.zeros([0], int)


def accuracy_evaluator(data, batch_size: int = 1024) -> Callable:
    """`evaluate(model) -> {'train_acc', 'test_acc', 'unpermuted_acc', 'permuted_acc', 'restored_acc'}`."""
    def evaluate(model):
        train_pred = predict(model, data.train.images, batch_size)
        out = {'train_acc': float(np.mean(train_pred == np.asarray(data.train.labels))),
               'test_acc': float(np.mean(predict(model, data.test.images, batch_size) == np.asarray(data.test.labels)))}
        out.update({f'{k}_acc': v for k, v in subset_accuracy.subset_accuracies(train_pred, data.train).items()})
        return out
    return evaluate


def embed_stage(model, data, layer: str, per_subset: int, seed: int, method: str = 'auto') -> dict:
    """2-D embedding of `layer` features of up to `per_subset` examples of each subset (Fig. 2B).

    Returns:
      `{'method': 'PCA'|'UMAP', subset: {'xy': [m, 2], 'labels': [m]}}`, one embedding fitted on
      all subsets together (restored points are the permuted ones with their true labels).
    """
    rng = np.random.default_rng(seed)
    probed = models_base.with_probes(model)
    chunks, labels = {}, {}
    for subset in SUBSETS:
        split = manifold_geometry.subset_split(data, subset)
        pos = np.sort(rng.choice(split.num_examples, min(per_subset, split.num_examples), replace=False))
        _, reps = probed(split.images[pos], training=False)
        chunks[subset] = np.asarray(reps[layer]).reshape(len(pos), -1)
        labels[subset] = np.asarray(split.labels)[pos]
    xy, name = embedding.embed_2d(np.concatenate(list(chunks.values())), method=method, seed=seed)
    out, start = {'method': name}, 0
    for subset, feats in chunks.items():
        out[subset] = {'xy': xy[start:start + len(feats)], 'labels': labels[subset]}
        start += len(feats)
    return out


def spaced(items: Sequence, k: Optional[int]) -> list:
    """At most `k` evenly spaced items of `items`, the last one included (all when k is None)."""
    if k is None or k >= len(items):
        return list(items)
    if k < 1:
        return []
    picks = np.unique(np.round(np.linspace(len(items) - 1, 0, k)).astype(int))
    return [items[i] for i in sorted(picks)]


def manifold_tags(model, data, step: int, mftma: dict) -> dict:
    """MFTMA tags `eval/mftma/<quantity>/<subset>/<layer>` of the four manifold sets; a set that
    cannot be analysed (too few classes or examples) is logged and left out."""
    tags = {}
    for subset in SUBSETS:
        plugin = manifold_geometry.ManifoldGeometryMetric(subsets=(subset,), **mftma)
        try:
            tags.update(plugin.evaluate(metrics_base.EvalContext(step=step, model=model, data=data, evals={})))
        except ValueError as e:
            logging.warning('MFTMA of the %s manifolds at step %d skipped: %s', subset, step, e)
    return tags


def analyze_run(model, data, record: dict, checkpoint_dir: os.PathLike, steps_per_epoch: int,
                mftma: dict, rewind: bool = False,
                rewind_epochs: Optional[Sequence[int]] = None, embed_examples: int = 0, seed: int = 0,
                max_layers: Optional[int] = None) -> dict:
    """Every per-run analysis of the paper for one run.

    Args:
      model: the run's model with its INITIAL weights (rebuilt with the run's seed).
      data: the run's data (same seed: same permuted labels).
      record: the run's results.json.
      checkpoint_dir: the run's `checkpoints/`, one checkpoint per epoch.
      steps_per_epoch: optimizer steps per epoch (epoch = step / steps_per_epoch).
      mftma: `manifold_geometry.ManifoldGeometryMetric` arguments (P, M, n_t, seed, ...) other than
        `subsets`. A subset whose manifolds cannot be analysed (e.g. fewer than 3 classes with 2
        examples) gets NaN values.
      rewind: run layer rewinding from every checkpointed epoch (and epoch 0).
      rewind_epochs: restrict rewinding to these epochs (None: all).
      embed_examples: examples per subset for the 2-D embedding of the last probe layer (0: none).
      seed: embedding sample seed.
      max_layers: analyse at most this many probe layers with MFTMA (evenly spaced, the last one
        included; None: all). The others get NaN values.

    Returns:
      `{'layers', 'steps': {stage: step}, 'epochs': {stage: epoch}, 'subset_accuracy':
      {stage: {subset: acc}}, 'mftma': {stage: {subset: {layer: {quantity: value}}}},
      'rewinding': [rows], 'embedding': {stage: ...}}`.
    """
    steps_available = rewinding.checkpoint_steps(checkpoint_dir)
    stages = stage_steps(record, steps_available)
    init = rewinding.snapshot(model)
    layers = list(models_base.probe_layers(model))
    mftma = {**mftma, 'layers': spaced(layers, max_layers)}

    def state(step):
        return init if step == 0 else rewinding.checkpoint_state(model, os.path.join(checkpoint_dir, f'ckpt-{step}'))

    out = {'layers': layers, 'steps': stages, 'epochs': {k: v / steps_per_epoch for k, v in stages.items()},
           'subset_accuracy': {}, 'mftma': {}, 'embedding': {}, 'rewinding': []}
    geometry_at: dict = {}  # step -> MFTMA tags (stages may share a step)
    for stage, step in stages.items():
        rewinding.assign(model, state(step))
        accs = {s: value_at(record, f'train/accuracy/{s}', step) for s in SUBSETS[:3]}
        accs['test'] = value_at(record, 'test/accuracy', step)
        out['subset_accuracy'][stage] = accs
        if step not in geometry_at:
            geometry_at[step] = manifold_tags(model, data, step, mftma)
        tags = geometry_at[step]
        out['mftma'][stage] = {s: {l: {q: tags.get(f'eval/mftma/{q}/{s}/{l}', math.nan) for q in QUANTITIES}
                                   for l in layers} for s in SUBSETS}
        if embed_examples:
            out['embedding'][stage] = embed_stage(model, data, layers[-1], embed_examples, seed)
    if rewind:
        final = state(stages['final'])
        epochs = {0: init, **{s // steps_per_epoch: s for s in steps_available if s % steps_per_epoch == 0}}
        if rewind_epochs is not None:
            epochs = {e: s for e, s in epochs.items() if e in set(rewind_epochs)}
        states = {e: (s if isinstance(s, dict) else state(s)) for e, s in sorted(epochs.items())}
        out['rewinding'] = rewinding.rewind_table(model, final, states, accuracy_evaluator(data))
    rewinding.assign(model, init)
    return out


def _nested_mean(items: Sequence, path: tuple) -> list:
    vals = []
    for item in items:
        for key in path:
            item = item.get(key, {}) if isinstance(item, dict) else {}
        vals.append(item if isinstance(item, (int, float)) else math.nan)
    return vals


def aggregate(runs: Sequence[dict], examples_per_class: int, level: float = 0.99) -> dict:
    """Means over seeds of `analyze_run` outputs, in the report.json layout.

    Returns:
      `{'layers', 'best_epoch' (median over seeds), 'best_epochs', 'final_epochs', 'lower_bound'
      (2 / M), 'subset_accuracy': {stage: {subset: mean}}, 'mftma': {stage: {subset: {layer:
      {capacity, radius, dimension, center_correlation, capacity_ci99}}}}, 'rewinding': rows
      {layer, epoch, train_acc, test_acc} (means over the runs that rewound), 'rewinding_subsets':
      the same rows with unpermuted/permuted/restored accuracies}`.
    """
    if not runs:
        return {}
    layers = runs[0]['layers']
    best = [r['epochs']['best'] for r in runs]
    out = {'layers': layers, 'best_epoch': float(np.median(best)), 'best_epochs': best,
           'final_epochs': [r['epochs']['final'] for r in runs], 'lower_bound': 2.0 / examples_per_class,
           'subset_accuracy': {}, 'mftma': {}}
    for stage in STAGES:
        out['subset_accuracy'][stage] = {s: mean_ci(_nested_mean(runs, ('subset_accuracy', stage, s)), level)[0]
                                         for s in SUBSETS}
        out['mftma'][stage] = {}
        for s in SUBSETS:
            out['mftma'][stage][s] = {}
            for l in layers:
                cell = {q: mean_ci(_nested_mean(runs, ('mftma', stage, s, l, q)), level)[0] for q in QUANTITIES}
                cell['capacity_ci99'] = mean_ci(_nested_mean(runs, ('mftma', stage, s, l, 'capacity')), level)[1]
                out['mftma'][stage][s][l] = cell
    rows: dict = {}
    for r in runs:
        for row in r.get('rewinding', []):
            rows.setdefault((row['layer'], row['epoch']), []).append(row)
    keys = ('train_acc', 'test_acc', 'unpermuted_acc', 'permuted_acc', 'restored_acc')
    means = [{'layer': layer, 'epoch': int(epoch),
              **{k: float(np.mean([x.get(k, math.nan) for x in group])) for k in keys}}
             for (layer, epoch), group in rows.items()]
    out['rewinding'] = [{k: m[k] for k in ('layer', 'epoch', 'train_acc', 'test_acc')} for m in means]
    out['rewinding_subsets'] = means
    return out
