"""The one name table between our variables and checkpoint tensors.

It lives with the models (each model names its own weights: `backbone_weight_specs`,
a task's `head_weight_specs`); `keras_bert_zoo.convert` reads and writes files by it.

Every weight is named once, in HF's dotted form without the `bert.` prefix
(`encoder.layer.3.attention.self.query.weight`). The Google TF1 name is derived from
it by a fixed rule (`bert/encoder/layer_3/attention/self/query/kernel`), so the HF and
Google loaders share this table and differ only in how they look a name up.

`kind` says how the tensor is laid out:
- `"kernel"`: a Dense kernel; HF stores `[out, in]` (transposed), Google `[in, out]`.
- `"embedding"`: an embedding table `[rows, dim]`, identical everywhere.
- `"vector"`: a bias or LayerNorm scale/offset.
"""

import dataclasses
import re

from keras_bert_zoo.models.layers.int8 import dense_kernel, embedding_matrix

__all__ = [
    "WeightSpec",
    "BLOCK_DENSE_NAMES",
    "backbone_weight_specs",
    "lora_weight_specs",
    "head_dense_specs",
    "google_name",
    "spec_value",
]

# An encoder block's Dense sub-layers and their names inside `encoder.layer.N.`.
BLOCK_DENSE_NAMES = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "intermediate": "intermediate.dense",
    "output_dense": "output.dense",
}


@dataclasses.dataclass(frozen=True)
class WeightSpec:
    name: str  # HF name without the "bert." prefix
    variable: object  # the keras.Variable it fills (a quantized layer's: its float value, written only)
    kind: str  # "kernel" | "embedding" | "vector"
    google_name: str = None  # overrides the derived TF1 name
    google_transposed: bool = False  # Google stores this kernel as [out, in] too
    in_backbone: bool = True  # HF prefixes backbone weights with "bert." in task models
    lora_layer: object = None  # the LoRA-enabled layer whose frozen kernel `variable` is


def spec_value(spec, merged=False):
    """The float32 numpy value of `spec`'s variable; `merged=True` folds a LoRA layer's
    adapters into its kernel (`kernel + alpha / rank * a @ b`, what the layer computes with)."""
    import numpy as np
    from keras import ops

    value = spec.lora_layer.kernel if merged and spec.lora_layer is not None else spec.variable
    return np.asarray(ops.convert_to_numpy(value), dtype=np.float32)


def _dense(prefix, layer):
    # Under LoRA `layer.kernel` is the merged tensor: the checkpoint holds the frozen kernel.
    lora = getattr(layer, "lora_enabled", False)
    kernel = layer.kernel_variable if lora else dense_kernel(layer)
    return [
        WeightSpec(f"{prefix}.weight", kernel, "kernel", lora_layer=layer if lora else None),
        WeightSpec(f"{prefix}.bias", layer.bias, "vector"),
    ]


def _layer_norm(prefix, layer):
    return [
        WeightSpec(f"{prefix}.weight", layer.gamma, "vector"),
        WeightSpec(f"{prefix}.bias", layer.beta, "vector"),
    ]


def backbone_weight_specs(backbone):
    """Every variable of a `BertBackbone`, with its checkpoint name."""
    emb = backbone.embeddings
    specs = [
        WeightSpec("embeddings.word_embeddings.weight", embedding_matrix(emb.word_embeddings), "embedding"),
        WeightSpec("embeddings.position_embeddings.weight", embedding_matrix(emb.position_embeddings), "embedding"),
        WeightSpec("embeddings.token_type_embeddings.weight", embedding_matrix(emb.token_type_embeddings), "embedding"),
        *_layer_norm("embeddings.LayerNorm", emb.layer_norm),
    ]
    for i, block in enumerate(backbone.encoder_layers):
        p = f"encoder.layer.{i}"
        dense = {name: _dense(f"{p}.{hf}", getattr(block, name)) for name, hf in BLOCK_DENSE_NAMES.items()}
        specs += [
            *dense["query"],
            *dense["key"],
            *dense["value"],
            *dense["attention_output"],
            *_layer_norm(f"{p}.attention.output.LayerNorm", block.attention_layer_norm),
            *dense["intermediate"],
            *dense["output_dense"],
            *_layer_norm(f"{p}.output.LayerNorm", block.output_layer_norm),
        ]
    specs += _dense("pooler.dense", backbone.pooler)
    return specs


def lora_weight_specs(backbone):
    """The LoRA adapters of a backbone (none without LoRA), named as HF PEFT names them:
    `encoder.layer.N.attention.self.query.lora_A.weight` `[rank, in]` (ours, `lora_kernel_a`,
    is `[in, rank]`: a "kernel", stored transposed) and `...lora_B.weight` `[out, rank]`."""
    specs = []
    for i, block in enumerate(backbone.encoder_layers):
        for name, hf in BLOCK_DENSE_NAMES.items():
            layer = getattr(block, name)
            if layer.lora_enabled:
                specs += [
                    WeightSpec(f"encoder.layer.{i}.{hf}.lora_A.weight", layer.lora_kernel_a, "kernel"),
                    WeightSpec(f"encoder.layer.{i}.{hf}.lora_B.weight", layer.lora_kernel_b, "kernel"),
                ]
    return specs


def head_dense_specs(prefix, layer, google_prefix=None, google_transposed=False):
    """Specs for a task head's Dense layer (e.g. `classifier`, `qa_outputs`).

    `google_prefix` names the TF1 variables when they do not follow the derived rule
    (run_classifier.py stores `output_weights` `[num_labels, hidden]` and `output_bias`).
    """
    kernel_name = bias_name = None
    if google_prefix:
        kernel_name = f"{google_prefix}/output_weights"
        bias_name = f"{google_prefix}/output_bias"
    return [
        WeightSpec(
            f"{prefix}.weight", dense_kernel(layer), "kernel", kernel_name, google_transposed, in_backbone=False
        ),
        WeightSpec(f"{prefix}.bias", layer.bias, "vector", bias_name, in_backbone=False),
    ]


def google_name(spec):
    """The TF1 variable name of a spec, by the rule the original checkpoints follow."""
    if spec.google_name:
        return spec.google_name
    name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", spec.name)
    parts = name.split(".")
    last = parts.pop()
    if parts[-1] == "LayerNorm":
        parts.append({"weight": "gamma", "bias": "beta"}[last])
    elif spec.kind == "kernel":
        parts.append({"weight": "kernel", "bias": "bias"}[last])
    elif spec.kind == "vector":
        parts.append(last)
    # embeddings: the TF1 variable is the table itself, no suffix
    path = "/".join(parts)
    return path if not spec.in_backbone else f"bert/{path}"
