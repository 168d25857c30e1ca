"""A float32 model computing in bfloat16 (or float16) for a while, on the same weights.

`computing_in(model, "bfloat16")` gives every float32 layer of `model` Keras' mixed policy
(`mixed_bfloat16`: float32 weights, cast to bfloat16 where they are read; softmax, LayerNorm
and logits stay float32, as the layers write them) and puts the float32 policy back on exit.
Nothing is copied and the weights stay float32, so a function traced inside the block (an
export, a `predict`) runs the matmuls at the hardware's bfloat16 rate while the model outside
it is unchanged. Used by `export_saved_model(..., precision="bfloat16")`.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo import BertBackbone
>>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
...                         intermediate_dim=16, max_sequence_length=8)
>>> x = {"token_ids": np.array([[2, 7, 3]]), "segment_ids": np.zeros((1, 3), "int32"),
...      "padding_mask": np.ones((1, 3), "int32")}
>>> with computing_in(backbone, "bfloat16"):
...     str(backbone(x)["sequence_output"].dtype)
'bfloat16'
>>> backbone.compute_dtype
'float32'
"""

import contextlib

__all__ = ["PRECISIONS", "computing_in", "precision_name"]

# precision name -> the Keras policy of a float32 layer computing in it
PRECISIONS = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def precision_name(precision):
    """`"bf16"` / `"bfloat16"` -> `"bfloat16"` (likewise float32, float16); a clear error otherwise."""
    from keras_bert_zoo.errors import UsageError

    name = _ALIASES.get(precision, precision)
    if name not in PRECISIONS:
        raise UsageError(f"precision={precision!r} is not one of {sorted(PRECISIONS)} (or bf16, fp16, fp32).")
    return name


@contextlib.contextmanager
def computing_in(model, precision):
    """Within the block, `model`'s float32 layers compute in `precision` (see the module)."""
    policy = PRECISIONS[precision_name(precision)]
    changed = []
    if policy is not None:
        # Every layer, nested ones included (an encoder block's Dense and LayerNorm layers
        # hold policies of their own).
        for layer in model._flatten_layers(include_self=True, recursive=True):
            if layer.dtype_policy.name == "float32":
                layer.dtype_policy = policy
                changed.append(layer)
    try:
        yield model
    finally:
        for layer in changed:
            layer.dtype_policy = "float32"
