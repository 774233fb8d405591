"""Layer rewinding: put one layer's parameters from an earlier checkpoint into a trained model.

Stephenson et al. (ICLR 2021), section 4 "Undoing memorization by rewinding individual layers"
and Fig. 4A-B (after Zhang, Bengio & Singer 2019, "Are all layers created equal?"): for each layer
and rewind epoch E, that layer's parameters at epoch E replace its final parameters, every other
layer keeps its final ones, and the model is evaluated.

Works for any Keras model and any pair of weight states: a *state* is `{layer name: [arrays]}`
(`snapshot`), read from the model itself or from a checkpoint of the trainer
(`checkpoint_state`, which restores the model's variables only, then puts the model back as it
was). A rewinding *unit* (`layer_groups`) is a Conv/Dense layer together with its batch-norm layer
`<name>_bn` (models/units.py), so a unit's normalisation statistics travel with its kernel; any
other layer with weights is a unit of its own.
"""

import os
import re
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

_CKPT = re.compile(r'^ckpt-(\d+)\.index$')


def snapshot(model) -> dict:
    """`{layer name: [weight arrays]}` of every layer with weights (trainable or not), copied."""
    return {l.name: [np.array(w) for w in l.get_weights()] for l in model.layers if l.weights}


def assign(model, state: Mapping[str, Sequence[np.ndarray]]) -> None:
    """Sets the weights of the layers named in `state` (others are left as they are)."""
    for name, weights in state.items():
        model.get_layer(name).set_weights(list(weights))


def checkpoint_steps(directory: os.PathLike) -> list:
    """Sorted optimizer steps of the `ckpt-<step>` checkpoints in `directory` ([] if none)."""
    if not os.path.isdir(directory):
        return []
    return sorted(int(m.group(1)) for m in map(_CKPT.match, os.listdir(directory)) if m)


def checkpoint_state(model, prefix: str) -> dict:
    """The weight state stored in a trainer checkpoint (`<dir>/ckpt-<step>`), read through `model`.

    The checkpoint holds `model` (plus optimizer etc., ignored). The model's own weights are put
    back afterwards.

    Raises:
      FileNotFoundError: no checkpoint at `prefix`.
    """
    if not tf.io.gfile.exists(f'{prefix}.index'):
        raise FileNotFoundError(f'No checkpoint at {prefix!r} (expected {prefix}.index).')
    current = snapshot(model)
    tf.train.Checkpoint(model=model).restore(prefix).expect_partial()
    state = snapshot(model)
    assign(model, current)
    return state


def layer_groups(model) -> dict:
    """Rewinding units in model order: `{unit: [layer names]}` (a Conv/Dense with its `<name>_bn`)."""
    names = [l.name for l in model.layers if l.weights]
    kernels = [l.name for l in model.layers if l.weights and hasattr(l, 'kernel')]
    groups = {k: [k] + ([f'{k}_bn'] if f'{k}_bn' in names else []) for k in kernels}
    grouped = {n for g in groups.values() for n in g}
    for n in names:
        if n not in grouped:
            groups[n] = [n]
    order = {n: i for i, n in enumerate(names)}
    return dict(sorted(groups.items(), key=lambda kv: order[kv[1][0]]))


def rewound(final: Mapping[str, Sequence[np.ndarray]], early: Mapping[str, Sequence[np.ndarray]],
            layers: Sequence[str]) -> dict:
    """`final` with the weights of `layers` taken from `early`."""
    missing = [l for l in layers if l not in early or l not in final]
    if missing:
        raise KeyError(f'Layers {missing} are not in both states; layers: {sorted(final)}.')
    return {**final, **{l: early[l] for l in layers}}


def rewind_table(model, final: Mapping, states: Mapping[int, Mapping], evaluate: Callable[..., dict],
                 groups: Optional[Mapping[str, Sequence[str]]] = None) -> list:
    """Evaluates the final model with each unit rewound to each earlier state.

    Args:
      model: the model (its weights are restored to `final` at the end).
      final: the final weight state.
      states: rewind epoch (or any key) -> weight state.
      evaluate: `evaluate(model) -> {name: value}` (e.g. `{'train_acc', 'test_acc'}`).
      groups: units to rewind (default `layer_groups(model)`).

    Returns:
      Rows `{'layer': unit, 'epoch': key, **evaluate(model)}`, units outer, epochs inner.
    """
    groups = layer_groups(model) if groups is None else groups
    rows = []
    try:
        for unit, layers in groups.items():
            for epoch, state in states.items():
                assign(model, rewound(final, state, layers))
                rows.append({'layer': unit, 'epoch': epoch, **evaluate(model)})
    finally:
        assign(model, final)
    return rows
