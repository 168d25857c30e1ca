"""Activation names used in configs and checkpoints."""

import keras

__all__ = ["get_activation"]


def get_activation(name):
    """Returns the activation callable for a config name.

    `"gelu"` is the exact erf form (HF `hidden_act="gelu"`); `"gelu_approximate"` is the
    tanh form the original Google code used (HF `gelu_new`). The two differ by up to
    ~1e-3 per unit, enough to break numerical parity with a checkpoint's reference.
    """
    if name == "gelu":
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    return keras.activations.get(name)
