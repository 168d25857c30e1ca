"""A float32 task model's twin that computes in bfloat16 (or float16), with its weights.

`with_precision(model, "bfloat16")` builds the model again from its config under Keras'
`mixed_bfloat16` policy, exactly as a user's script does after
`keras.mixed_precision.set_global_policy("mixed_bfloat16")` (float32 weights, cast to bfloat16
where they are read; softmax, LayerNorm and the task's logits float32, as the layers write
them), copies the weights in and attaches the same preprocessor. The model given is not
changed. Used by `export_saved_model(..., precision="bfloat16")`.

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
    """`model` itself for float32; otherwise its twin computing in `precision` (see the module)."""
    policy = PRECISIONS[precision_name(precision)]
    if policy == model.backbone.dtype_policy.name:
        return model
    if model.backbone.dtype_policy.name != "float32":
        raise UsageError(f"the model computes under {model.backbone.dtype_policy.name!r}; with_precision "
                         "starts from a float32 model.")
    config = model.get_config()
    config.pop("preprocessor", None)
    config["backbone"]["config"].pop("dtype", None)  # the global policy decides, as in a user's script
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        twin = type(model).from_config(config)
    finally:
        keras.config.set_dtype_policy(previous)
    twin.set_weights(model.get_weights())
    twin.preprocessor = getattr(model, "preprocessor", None)
    return twin
