"""Learning-rate schedules by name, as Keras schedules of the optimizer step.

`Trainer.schedule` names one of `SCHEDULES` (or is a callable with the same signature);
`Trainer.warmup_steps` puts a linear warm-up in front of any of them. Each schedule's own knobs
are gin bindings (`train.cosine.alpha = 0.01`); the rate and the step budget come from the
trainer only (they are denylisted here, so a binding cannot be silently overridden).

- `constant`: the rate.
- `stagewise`: the papers' step decays: boundaries are fractions of the step budget and the
  rate is multiplied by `factor` at each one (0.2 at 30/60/80% in the geometry paper; ÷3 at
  1/3 and 2/3 in the random-labels paper).
- `cosine`: `lr · (α + (1 − α) · ½ (1 + cos(π · min(t, T) / T)))` over the budget T
  (Loshchilov & Hutter, ICLR 2017, without restarts; `keras.optimizers.schedules.CosineDecay`).
- warm-up: `lr_t · min(1, (t + 1) / W)` for W warm-up steps (Goyal et al., 2017, section 2.2),
  multiplying whichever schedule follows; t counts updates already applied, so the first
  update uses `lr_0 / W` and update W − 1 the full rate.
"""

from typing import Callable, Sequence, Union

import gin
import keras
import numpy as np
import tensorflow as tf

_TRAINER_ARGS = ['learning_rate', 'num_steps']


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def constant(learning_rate: float = 0.01, num_steps: int = 0):
    """A constant rate (`num_steps` is accepted for a uniform signature)."""
    del num_steps
    _check_rate(learning_rate)
    return float(learning_rate)


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def stagewise(
    learning_rate: float = 0.01,
    num_steps: int = 0,
    boundaries: Sequence[float] = (0.3, 0.6, 0.8),
    factor: float = 0.2,
):
    """`learning_rate · factor^k` after the k-th boundary (a fraction of `num_steps`).

    Raises:
      ValueError: boundaries not increasing in (0, 1), or non-positive rate/factor.
    """
    _check_rate(learning_rate)
    _check_budget('stagewise', num_steps)
    if factor <= 0:
        raise ValueError(f'stagewise factor must be > 0, got {factor!r}.')
    b = list(boundaries)
    if any(not 0 < x < 1 for x in b) or b != sorted(b):
        raise ValueError(f'stagewise boundaries must be increasing fractions in (0, 1), got {b!r}.')
    steps = [int(round(x * num_steps)) for x in b]
    values = [float(learning_rate * factor**k) for k in range(len(b) + 1)]
    return keras.optimizers.schedules.PiecewiseConstantDecay(steps, values)


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def cosine(learning_rate: float = 0.01, num_steps: int = 0, alpha: float = 0.0):
    """Cosine decay from `learning_rate` to `alpha · learning_rate` over `num_steps`.

    Raises:
      ValueError: non-positive rate or budget, or `alpha` outside [0, 1].
    """
    _check_rate(learning_rate)
    if not 0 <= alpha <= 1:
        raise ValueError(f'cosine alpha must be in [0, 1], got {alpha!r}.')
    _check_budget('cosine', num_steps)
    return keras.optimizers.schedules.CosineDecay(float(learning_rate), int(num_steps), alpha=float(alpha))


SCHEDULES = {'constant': constant, 'stagewise': stagewise, 'cosine': cosine}

Schedule = Union[float, keras.optimizers.schedules.LearningRateSchedule]


class Warmup(keras.optimizers.schedules.LearningRateSchedule):
    """`inner(t) · min(1, (t + 1) / warmup_steps)`: linear warm-up in front of any schedule."""

    def __init__(self, inner: Schedule, warmup_steps: int):
        if warmup_steps <= 0:
            raise ValueError(f'warmup_steps must be positive, got {warmup_steps!r}.')
        self.inner, self.warmup_steps = inner, int(warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        ramp = tf.minimum(1.0, (step + 1.0) / float(self.warmup_steps))
        return _value(self.inner, step) * ramp

    def get_config(self):
        return {'inner': self.inner, 'warmup_steps': self.warmup_steps}


class Scaled(keras.optimizers.schedules.LearningRateSchedule):
    """`multiplier · inner(t)`: the schedule of a layer with a learning-rate multiplier."""

    def __init__(self, inner: Schedule, multiplier: float):
        self.inner, self.multiplier = inner, float(multiplier)

    def __call__(self, step):
        return _value(self.inner, tf.cast(step, tf.float32)) * self.multiplier

    def get_config(self):
        return {'inner': self.inner, 'multiplier': self.multiplier}


def _value(schedule: Schedule, step):
    if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        return tf.cast(schedule(step), tf.float32)
    return tf.constant(float(schedule), tf.float32)


def make(
    schedule: Union[str, Callable], learning_rate: float, num_steps: int, warmup_steps: int = 0
) -> Schedule:
    """The schedule `schedule` (a name in `SCHEDULES` or a callable), with optional warm-up.

    Args:
      schedule: name, or `f(learning_rate=..., num_steps=...) -> float or LearningRateSchedule`.
      learning_rate: the peak rate.
      num_steps: the step budget (optimizer steps).
      warmup_steps: linear warm-up length; 0 for none.

    Raises:
      ValueError: unknown name (the message lists the valid ones) or a negative `warmup_steps`.
    """
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(f'Unknown learning-rate schedule {schedule!r}; valid: {sorted(SCHEDULES)}.')
        schedule = SCHEDULES[schedule]
    if not callable(schedule):
        raise ValueError(f'schedule must be a name in {sorted(SCHEDULES)} or a callable, got {schedule!r}.')
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, (int, np.integer)) or warmup_steps < 0:
        raise ValueError(f'warmup_steps must be an integer >= 0, got {warmup_steps!r}.')
    base = schedule(learning_rate=learning_rate, num_steps=num_steps)
    return Warmup(base, warmup_steps) if warmup_steps else base


def _check_rate(learning_rate: float) -> None:
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float, np.number)):
        raise ValueError(f'learning_rate must be a number, got {learning_rate!r}.')
    if not learning_rate > 0:
        raise ValueError(f'learning_rate must be > 0, got {learning_rate!r}.')


def _check_budget(name: str, num_steps: int) -> None:
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps <= 0:
        raise ValueError(f'{name} needs a positive num_steps (the step budget), got {num_steps!r}.')
