"""The name table of KerasHub's BERT weights: our checkpoint names <-> KerasHub layer paths.

`keras_hub_format` reads a KerasHub preset's `.weights.h5` files through it and
`keras_hub_writer` writes them: each weight is `(our name, (layer name, sub-path), var
index, kind)`, and Keras 3 keys a layer by its class in snake case, numbered in layer
order (`backbone_keys`).

Examples:
>>> from keras_bert_zoo.convert.keras_hub_names import backbone_keys, backbone_table
>>> backbone_table(num_layers=2)[0]
('embeddings.word_embeddings.weight', ('token_embedding', ''), 0, 'embedding')
>>> backbone_keys(num_layers=2)["transformer_layer_1"]
'transformer_encoder_1'
"""

__all__ = ["backbone_table", "backbone_layer_order", "backbone_keys", "snake_numbered", "HEAD_TABLES", "HEAD_KEYS"]


def _dense(path, name):
    return [(f"{name}.weight", path, 0, "kernel"), (f"{name}.bias", path, 1, "vector")]


def _norm(path, name):
    return [(f"{name}.weight", path, 0, "vector"), (f"{name}.bias", path, 1, "vector")]


def backbone_table(num_layers):
    """`(our name, (layer name, sub-path), var index, kind)` for every backbone weight."""
    table = [
        ("embeddings.word_embeddings.weight", ("token_embedding", ""), 0, "embedding"),
        ("embeddings.position_embeddings.weight", ("position_embedding", ""), 0, "embedding"),
        ("embeddings.token_type_embeddings.weight", ("segment_embedding", ""), 0, "embedding"),
        *_norm(("embeddings_layer_norm", ""), "embeddings.LayerNorm"),
    ]
    for i in range(num_layers):
        layer, p = f"transformer_layer_{i}", f"encoder.layer.{i}"
        attention = "_self_attention_layer/"
        table += [
            *_dense((layer, attention + "query_dense"), f"{p}.attention.self.query"),
            *_dense((layer, attention + "key_dense"), f"{p}.attention.self.key"),
            *_dense((layer, attention + "value_dense"), f"{p}.attention.self.value"),
            *_dense((layer, attention + "output_dense"), f"{p}.attention.output.dense"),
            *_norm((layer, "_self_attention_layer_norm"), f"{p}.attention.output.LayerNorm"),
            *_dense((layer, "_feedforward_intermediate_dense"), f"{p}.intermediate.dense"),
            *_dense((layer, "_feedforward_output_dense"), f"{p}.output.dense"),
            *_norm((layer, "_feedforward_layer_norm"), f"{p}.output.LayerNorm"),
        ]
    return table + _dense(("pooled_dense", ""), "pooler.dense")


HEAD_TABLES = {
    "BertTextClassifier": _dense(("logits", ""), "classifier"),
    "BertMaskedLM": [
        *_dense(("mlm_head", "_intermediate_dense"), "cls.predictions.transform.dense"),
        *_norm(("mlm_head", "_intermediate_layer_norm"), "cls.predictions.transform.LayerNorm"),
        ("cls.predictions.bias", ("mlm_head", ""), 0, "vector"),
    ],
}


def snake_numbered(classes):
    """Keras 3's h5 keys for a list of layer classes: snake case, `_1`, `_2`... per class."""
    seen, keys = {}, []
    for cls in classes:
        n = seen.get(cls, 0)
        keys.append(cls if n == 0 else f"{cls}_{n}")
        seen[cls] = n + 1
    return keys


def backbone_layer_order(num_layers):
    """KerasHub `BertBackbone`'s layers in Keras' order: `(snake-case class, layer name)`."""
    order = [
        ("input_layer", "token_ids"),
        ("input_layer", "segment_ids"),
        ("input_layer", "padding_mask"),
        ("reversible_embedding", "token_embedding"),
        ("position_embedding", "position_embedding"),
        ("embedding", "segment_embedding"),
        ("add", "embeddings_add"),
        ("layer_normalization", "embeddings_layer_norm"),
        ("dropout", "embeddings_dropout"),
    ]
    order += [("transformer_encoder", f"transformer_layer_{i}") for i in range(num_layers)]
    return order + [("dense", "pooled_dense")]


def backbone_keys(num_layers):
    """`{layer name: h5 key}` of a KerasHub backbone's weights file (`transformer_layer_1` -> `transformer_encoder_1`)."""
    order = backbone_layer_order(num_layers)
    return {name: key for key, (_, name) in zip(snake_numbered([cls for cls, _ in order]), order, strict=True)}


# The task layers' keys in task.weights.h5 (after the backbone's inputs, which count).
HEAD_KEYS = {"logits": "dense", "mlm_head": "masked_lm_head"}
