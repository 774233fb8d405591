"""Activations that are not Keras built-ins, registered as serializable Keras objects so a
trained model saves to and loads from `model.keras` (`keras.models.load_model`)."""

import keras


@keras.saving.register_keras_serializable(package='extreme_mem')
def sin(x):
    """sin(x), elementwise: the periodic activation of Mehta et al. (2021), section 3."""
    return keras.ops.sin(x)
