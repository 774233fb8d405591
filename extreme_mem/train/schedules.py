"""Learning-rate schedules from the papers, as Keras schedules of the optimizer step.

`stagewise` covers the papers' step decays: boundaries are fractions of the step budget, and
the rate is multiplied by `factor` at each one (0.2 at 30/60/80% in the geometry paper; ÷3 at
1/3 and 2/3 in the random-labels paper).
"""

from typing import Sequence

import gin
import keras


@gin.configurable(module='train')
def constant(learning_rate: float = 0.01, num_steps: int = 0):
    """A constant rate (`num_steps` is accepted for a uniform signature)."""
    del num_steps
    _check_rate(learning_rate)
    return float(learning_rate)


@gin.configurable(module='train')
def stagewise(
    learning_rate: float = 0.01,
    num_steps: int = gin.REQUIRED,
    boundaries: Sequence[float] = (0.3, 0.6, 0.8),
    factor: float = 0.2,
):
    """`learning_rate · factor^k` after the k-th boundary (a fraction of `num_steps`).

    Raises:
      ValueError: boundaries not increasing in (0, 1), or non-positive rate/factor.
    """
    _check_rate(learning_rate)
    if factor <= 0:
        raise ValueError(f'stagewise factor must be > 0, got {factor!r}.')
    b = list(boundaries)
    if any(not 0 < x < 1 for x in b) or b != sorted(b):
        raise ValueError(f'stagewise boundaries must be increasing fractions in (0, 1), got {b!r}.')
    steps = [int(round(x * num_steps)) for x in b]
    values = [float(learning_rate * factor**k) for k in range(len(b) + 1)]
    return keras.optimizers.schedules.PiecewiseConstantDecay(steps, values)


def _check_rate(learning_rate: float) -> None:
    if not learning_rate > 0:
        raise ValueError(f'learning_rate must be > 0, got {learning_rate!r}.')
