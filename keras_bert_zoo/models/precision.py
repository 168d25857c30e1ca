"""A float32 task model's twin that computes in bfloat16 (or float16), with its weights.

`with_precision(model, "bfloat16")` builds the model again from its config under Keras'
`mixed_bfloat16` policy, exactly as a user's script does after
`keras.mixed_precision.set_global_policy("mixed_bfloat16")` (float32 weights, cast to bfloat16
where they are read; softmax, LayerNorm and the task's logits float32, as the layers write
them), copies the weights in and attaches the same preprocessor. The model given is not
changed. Used by `export_saved_model(..., precision="bfloat16")`. A mixed model goes back to
float32 the same way, and a quantized model keeps its int8 layers.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo import BertBackbone, BertClassifier
>>> from keras_bert_zoo.models.precision import with_precision
>>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
...                         intermediate_dim=16, max_sequence_length=8)
>>> model = BertClassifier(backbone, num_classes=2)
>>> half = with_precision(model, "bf16")
>>> half.backbone.get_layer("encoder_layer_0").compute_dtype, model.backbone.compute_dtype
('bfloat16', 'float32')
"""

import keras

from keras_bert_zoo.errors import UsageError

__all__ = ["PRECISIONS", "precision_name", "with_precision"]

# precision name -> the Keras policy of a float32 model computing in it
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def precision_name(precision):
    """`"bf16"` / `"bfloat16"` -> `"bfloat16"` (likewise float32, float16); a clear error otherwise."""
    name = _ALIASES.get(precision, precision)
    if name not in PRECISIONS:
        raise UsageError(f"precision={precision!r} is not one of {sorted(PRECISIONS)} (or bf16, fp16, fp32).")
    return name


def with_precision(model, precision):
    """`model` itself when it computes in `precision` already; otherwise its twin computing in
    `precision` (see the module). The model may be mixed already (a bfloat16 twin's float32
    twin is the float32 model again) or `quantize("int8")`-ed: the twin is quantized the same
    way, with the same int8 weights (its int8 layers run the int8 product in float32 and cast
    the output to bfloat16, `models.layers.int8`)."""
    policy = PRECISIONS[precision_name(precision)]
    if policy == model.backbone.dtype_policy.name:
        return model
    config = model.get_config()
    if "preprocessor" in config:
        # The same preprocessor object, given to the constructor: a twin that `from_config`
        # quantizes takes no new sub-layer after (Keras locks its tracker).
        config["preprocessor"] = model.preprocessor
    config["backbone"]["config"].pop("dtype", None)  # the global policy decides, as in a user's script
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        twin = type(model).from_config(config)
    finally:
        keras.config.set_dtype_policy(previous)
    twin.set_weights(model.get_weights())
    return twin
