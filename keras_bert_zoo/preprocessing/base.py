"""`PreprocessingLayer`: the base of every layer that runs on strings in `tf.data`.

Keras converts a layer's inputs to backend tensors and casts them to its dtype;
string tensors and ragged tensors must pass through untouched, and python strings
and lists must be accepted as they are. Preprocessing always runs with TensorFlow
ops on the host (CPU), whatever the Keras backend, so that it can live in a
`tf.data` pipeline and inside an exported SavedModel.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError

__all__ = ["PreprocessingLayer", "to_string_tensor", "preset_settings", "windows_runner"]

# Tracing a preprocessor's `windows` as a `tf.function` costs 0.9-1.7 s once; run eagerly,
# a chunk costs 0.05-0.12 s more than traced (tagging: 1,024 sentences; SQuAD: 512
# questions at 256; 2 cores, 2026-12-04). Up to this many chunks, eager is the faster.
_EAGER_CHUNKS = 8


class PreprocessingLayer(keras.layers.Layer):
    """Base class: no input conversion, no build, CPU placement."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Keep tf.string / tf.RaggedTensor inputs as they are.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def __call__(self, *args, **kwargs):
        with tf.device("cpu"):
            return super().__call__(*args, **kwargs)

    def get_build_config(self):
        return None

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Preprocessors keep their tokenizer as a nested, serialised layer.
        if isinstance(config.get("tokenizer"), dict):
            config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return super().from_config(config)


def to_string_tensor(text, name="text"):
    """Converts python/numpy text to a `tf.string` tensor, refusing other dtypes clearly."""
    if isinstance(text, tf.RaggedTensor):
        raise ArgumentTypeError(
            f"`{name}` must be a dense tf.string tensor of shape [batch] or [], got a RaggedTensor."
        )
    if not isinstance(text, tf.Tensor):
        if isinstance(text, (bytes, str)):
            text = tf.constant(text, dtype=tf.string)
        else:
            array = np.asarray(text, dtype=object) if not isinstance(text, np.ndarray) else text
            if array.size and not all(isinstance(v, (str, bytes)) for v in array.reshape(-1)):
                raise ArgumentTypeError(
                    f"`{name}` must contain strings, got {array.dtype} values such as "
                    f"{array.reshape(-1)[0]!r}. Pass raw text; use `preprocessor=None` if you bring token ids."
                )
            text = tf.constant(array.astype(object) if array.size else np.zeros([0], dtype=object), dtype=tf.string)
    if text.dtype != tf.string:
        raise ArgumentTypeError(
            f"`{name}` must be a tf.string tensor, got dtype {text.dtype.name}. Pass raw text; "
            "use `preprocessor=None` if you bring token ids."
        )
    if text.shape.rank is not None and text.shape.rank == 2 and text.shape[-1] == 1:
        text = tf.squeeze(text, -1)  # [batch, 1] columns, as from a DataFrame
    if text.shape.rank is not None and text.shape.rank > 1:
        raise UsageError(f"`{name}` must have shape [batch] or [] (a scalar), got shape {text.shape}.")
    return text


def preset_settings(path, filename, sequence_length=None, **overrides):
    """A preprocessor's saved settings (`path/filename`, JSON; `{}` when absent), with
    `sequence_length` (when given, else the saved one, else 128) and `overrides` applied."""
    settings = {}
    saved_path = os.path.join(os.fspath(path), filename)
    if os.path.exists(saved_path):
        from keras_bert_zoo.files import read_json

        settings = read_json(saved_path, filename, "restore it from the model's source (or save the model again)")
    if sequence_length is not None:
        settings["sequence_length"] = sequence_length
    settings.setdefault("sequence_length", 128)
    settings.update(overrides)
    return settings


def windows_runner(preprocessor, with_labels, num_chunks):
    """The function that cuts `num_chunks` chunks of raw input into windows.

    `preprocessor.windows` run eagerly for a small input (at most `_EAGER_CHUNKS`
    chunks: a `fit` on a few thousand sentences), its traced `compiled_windows` for a
    larger one, and the traced one whenever it exists already.
    """
    traced = preprocessor.compiled_windows(with_labels, trace=num_chunks > _EAGER_CHUNKS)
    return traced if traced is not None else preprocessor.windows
