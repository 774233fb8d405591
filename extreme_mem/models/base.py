"""Probe-layer convention shared by every model.

A probe layer is a layer whose output is a representation metrics read (representation
alignment, MFTMA, activation statistics). Models name them `<layer>_rep`; the probe's name in
tags is `<layer>` (e.g. Activation layer `hidden_rep` -> tag `train/rep_alignment/hidden`).
Parameterised layers (Dense, Conv2D) carry no activation so that their outputs are
pre-activations, which the factored per-example-gradient engine needs.
"""

import keras

PROBE_SUFFIX = '_rep'


def probe_name(layer_name: str) -> str:
    """`hidden_rep` -> `hidden`."""
    return layer_name[: -len(PROBE_SUFFIX)]


def probe_layers(model: keras.Model) -> dict[str, keras.layers.Layer]:
    """Probe name -> layer, in model order."""
    return {probe_name(l.name): l for l in model.layers if l.name.endswith(PROBE_SUFFIX)}


def with_probes(model: keras.Model) -> keras.Model:
    """A functional model with the same weights returning `(logits, {probe: representation})`."""
    probes = probe_layers(model)
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    return keras.Model(inputs, [model.outputs[0], {k: l.output for k, l in probes.items()}])
