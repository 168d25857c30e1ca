"""A model's int8 quantization as a whole: which layers `quantize` acts on, how the choice is
recorded (`get_config`, a preset's `config.json`) and re-applied when the model is rebuilt.

The layers' own int8 arithmetic is `models.layers.int8` (`Int8Dense`), which exports
these names too.

Examples:
>>> import keras
>>> from keras_bert_zoo.models.quantization import quantizable_filter
>>> wanted = quantizable_filter("query")
>>> wanted(keras.layers.Dense(2, name="query")), wanted(keras.layers.Dense(2, name="key"))
(True, False)
>>> wanted(keras.layers.LayerNormalization(name="query_norm"))  # no quantized form
False
"""

import contextlib
import gc
import re

import keras

from keras_bert_zoo.keras_compat import all_layers

__all__ = [
    "QUANTIZABLE",
    "quantizable_filter",
    "quantization_config",
    "requantize",
    "one_garbage_collection",
    "preset_extra",
    "check_float_policy",
]


# The layer classes `quantize` acts on (the others, LayerNorm, Dropout, ..., have no quantized form).
QUANTIZABLE = (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding)


def quantizable_filter(filters=None):
    """A `filters` callable for `keras.Model.quantize` that keeps Keras' meaning of `filters`
    (a regex on the layer name, a list of them, or a callable) and passes only the layers
    with a quantized form that are not quantized yet, so `quantize` does not warn once per
    LayerNorm, Dropout and input layer (33 warnings for a 2-layer classifier)."""

    def wanted(layer):
        if not isinstance(layer, QUANTIZABLE) or layer.quantization_mode is not None:
            return False
        if filters is None:
            return True
        if isinstance(filters, str):
            return bool(re.search(filters, layer.name))
        if isinstance(filters, (list, tuple)):
            return any(re.search(p, layer.name) for p in filters)
        return bool(filters(layer))

    return wanted


def quantization_config(model):
    """`{"mode": ..., "layers": [paths]}` of a model's quantized layers, None when it has none:
    what a model's `get_config` records so that `from_config` (and `.keras` loading) builds
    the same layers quantized before their int8 weights are loaded."""
    layers = [layer for layer in all_layers(model) if layer.quantization_mode is not None]
    if not layers:
        return None
    modes = sorted({layer.quantization_mode for layer in layers})
    if len(modes) > 1:
        from keras_bert_zoo.errors import UsageError

        raise UsageError(f"{model.name} mixes quantization modes {modes}; quantize it with one mode to save it.")
    return {"mode": modes[0], "layers": sorted(layer.path for layer in layers)}


def requantize(model, quantization):
    """Quantizes the layers a `quantization_config` lists (with Keras' default settings of
    its mode); a no-op for None. Their weights are then overwritten by the loaded ones."""
    if quantization:
        paths = set(quantization["layers"])
        model.quantize(quantization["mode"], filters=lambda layer: layer.path in paths)
    return model


@contextlib.contextmanager
def one_garbage_collection():
    """Runs the body with `gc.collect` deferred to one call at its end. Keras' `quantize`
    deletes each float kernel with `Layer.__delattr__`, which runs a full collection per
    variable: 0.7 s each in a process holding TensorFlow and a test session, 12 s for a
    2-layer classifier, which this makes one collection."""
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


def preset_extra(model):
    """What a preset's `config.json` records of a quantized model (`{"quantization": ...}`, or
    nothing): its weights are written dequantized (HF reads them as any float checkpoint) and
    `from_preset` quantizes the same layers again."""
    quantization = quantization_config(model)
    return {"quantization": quantization} if quantization else {}


def check_float_policy(dtype):
    """Refuses a quantized dtype policy (`"int8_from_float32"`, ...) given to a constructor.

    Keras builds every sub-layer of such a model quantized from the start: the LayerNorms
    and `BertEmbeddings` have no int8 call, checkpoints (float) cannot load into int8
    kernels, and the task heads would inherit it. A model is quantized after it holds its
    weights, with `model.quantize("int8")`."""
    policy = keras.dtype_policies.get(dtype) if dtype is not None else None
    mode = (
        None if isinstance(policy, keras.dtype_policies.DTypePolicyMap) else getattr(policy, "quantization_mode", None)
    )
    if mode:
        from keras_bert_zoo.errors import UsageError

        raise UsageError(
            f"dtype={getattr(policy, 'name', dtype)!r} is a quantized policy; build the model in "
            f"float32 (or mixed precision), load its weights, then call model.quantize({mode!r})."
        )
