"""Which parts of the package need the TensorFlow backend, and the error the others give.

The Keras-native path runs on every Keras 3 backend (TensorFlow, JAX, torch): the task
models' `fit` / `evaluate` / `predict` on raw inputs (preprocessing stays in `tf.data`,
as in KerasHub), `from_preset` / `save_to_preset` and the task helpers (`predict_tags`,
`predict_answers`, `encode`, `fill_mask`). TensorFlow only: distribution strategies
(`make_strategy`), SavedModel export (`export_saved_model`) and the jobs (`finetune`,
`pretrain`, and the `bert-zoo` verbs that run them); under another backend they raise
`UsageError` at once, before any work (docs/backends.md).

Examples:
>>> from keras_bert_zoo.backends import require_tensorflow
>>> require_tensorflow("export_saved_model")  # the tests run on TensorFlow: nothing raised
"""

import keras

from keras_bert_zoo.errors import UsageError

__all__ = ["require_tensorflow"]


def require_tensorflow(what):
    """Raises `UsageError` naming `what`, the backend Keras runs on and the way out, unless
    Keras runs on TensorFlow."""
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise UsageError(
            f"{what} needs the TensorFlow backend, and Keras runs on {backend} (KERAS_BACKEND={backend}); "
            "set KERAS_BACKEND=tensorflow, or on this backend use the Keras-native path "
            "(model.fit / evaluate / predict on raw inputs, from_preset / save_to_preset)."
        )
