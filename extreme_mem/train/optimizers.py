"""Keras optimizers by name: sgd (momentum, Nesterov), adam, rmsprop, adagrad.

`Trainer.optimizer` names one of `OPTIMIZERS`; the trainer passes the learning rate (a float or a
schedule), `momentum`, `nesterov` and `weight_decay`, which are denylisted here so a gin binding
cannot be silently overridden. The other hyperparameters are gin bindings on the factory
(`train.adam.beta_2 = 0.99`, `train.rmsprop.rho = 0.95`, `train.adagrad.epsilon = 1e-10`).

Weight decay is decoupled (Loshchilov & Hutter, ICLR 2019, "AdamW"), as Keras applies it: before
each update `w ← w − lr_t · weight_decay · w`, then the optimizer's own update with the gradient
of the loss alone.
"""

from typing import Optional

import gin
import keras

_TRAINER_ARGS = ['learning_rate', 'weight_decay', 'momentum', 'nesterov']


def _wd(weight_decay: float) -> Optional[float]:
    return float(weight_decay) if weight_decay else None


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def sgd(learning_rate, weight_decay=0.0, momentum=0.0, nesterov=False) -> keras.optimizers.Optimizer:
    """`v ← μ v − lr g;  w ← w + v` (Nesterov: `w ← w + μ v − lr g`)."""
    return keras.optimizers.SGD(learning_rate, momentum=momentum, nesterov=nesterov, weight_decay=_wd(weight_decay))


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def adam(
    learning_rate, weight_decay=0.0, momentum=0.0, nesterov=False, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
    amsgrad=False,
) -> keras.optimizers.Optimizer:
    """Kingma & Ba (ICLR 2015), Algorithm 1, with Keras's epsilon placement (`ε̂` of section 2)."""
    del momentum, nesterov  # rejected by `make` when set
    return keras.optimizers.Adam(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, amsgrad=amsgrad,
                                 weight_decay=_wd(weight_decay))


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def rmsprop(
    learning_rate, weight_decay=0.0, momentum=0.0, nesterov=False, rho=0.9, epsilon=1e-7, centered=False,
) -> keras.optimizers.Optimizer:
    """Tieleman & Hinton (2012): `s ← ρ s + (1 − ρ) g²;  w ← w − lr g / √(s + ε)` (Keras form)."""
    del nesterov
    return keras.optimizers.RMSprop(learning_rate, rho=rho, momentum=momentum, epsilon=epsilon, centered=centered,
                                    weight_decay=_wd(weight_decay))


@gin.configurable(module='train', denylist=_TRAINER_ARGS)
def adagrad(
    learning_rate, weight_decay=0.0, momentum=0.0, nesterov=False, initial_accumulator_value=0.1, epsilon=1e-7,
) -> keras.optimizers.Optimizer:
    """Duchi et al. (JMLR 2011): `s ← s + g²;  w ← w − lr g / √(s + ε)` (Keras form)."""
    del momentum, nesterov
    return keras.optimizers.Adagrad(learning_rate, initial_accumulator_value=initial_accumulator_value,
                                    epsilon=epsilon, weight_decay=_wd(weight_decay))


OPTIMIZERS = {'sgd': sgd, 'adam': adam, 'rmsprop': rmsprop, 'adagrad': adagrad}
_USES_MOMENTUM = ('sgd', 'rmsprop')


def make(
    name: str, learning_rate, weight_decay: float = 0.0, momentum: float = 0.0, nesterov: bool = False
) -> keras.optimizers.Optimizer:
    """The optimizer `name` with the given rate (float or Keras schedule).

    Raises:
      ValueError: unknown name (the message lists the valid ones); `momentum` for an optimizer
        without one, `nesterov` other than with sgd, or a negative `momentum`/`weight_decay`.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f'Unknown optimizer {name!r}; valid: {sorted(OPTIMIZERS)}.')
    for arg, value in (('momentum', momentum), ('weight_decay', weight_decay)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f'{arg} must be a number >= 0, got {value!r}.')
    if momentum and name not in _USES_MOMENTUM:
        raise ValueError(f'momentum={momentum!r} applies to {list(_USES_MOMENTUM)}, not {name!r} '
                         '(for adam set train.adam.beta_1).')
    if nesterov and name != 'sgd':
        raise ValueError(f'nesterov applies to sgd only, not {name!r}.')
    return OPTIMIZERS[name](learning_rate, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov)
