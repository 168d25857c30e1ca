"""`BertBackbone`: the BERT encoder as a Functional Keras model."""

import keras
from keras import ops

from keras_bert_zoo import hardware
from keras_bert_zoo.models import loading, lora
from keras_bert_zoo.models.layers import int8
from keras_bert_zoo.models.layers.embeddings import BertEmbeddings
from keras_bert_zoo.models.layers.encoder_block import AttentionLayout, BertEncoderBlock, attention_layout
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.layers.int8 import Int8Dense
from keras_bert_zoo.models.presets import backbone_config
from keras_bert_zoo.models.weight_names import lora_weight_specs

__all__ = ["BertBackbone"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertBackbone(keras.Model):
    """BERT encoder: embeddings, post-LayerNorm Transformer layers and the pooler.

    Args:
        vocabulary_size: int, size of the WordPiece vocabulary.
        num_layers: int, number of encoder layers.
        num_heads: int, attention heads per layer.
        hidden_dim: int, model width.
        intermediate_dim: int, feed-forward width.
        max_sequence_length: int, number of learned positions (512).
        num_segments: int, token types (2).
        dropout: float, dropout rate everywhere (0.1).
        activation: str, `"gelu"` = exact erf GELU (HF), `"gelu_approximate"` = tanh
            form (original Google code).
        layer_norm_epsilon: float, 1e-12 as in the original code (Keras' default
            1e-3 would change every output).
        initializer_range: float, stddev of the TruncatedNormal init (0.02).
        output_hidden_states: bool, also return `hidden_states`.
        dtype: dtype policy, e.g. `"mixed_bfloat16"`.

    Inputs: a dict of int Tensors of shape `[batch, seq]`: `token_ids`,
    `segment_ids`, `padding_mask` (1 for real tokens, 0 for padding; a row packed
    with several sequences numbers them 1, 2, 3, ...: each attends only to itself and
    its positions restart at 0, see `preprocessing.packing`).

    Outputs: a dict with `sequence_output` `[batch, seq, hidden]`, `pooled_output`
    `[batch, hidden]` (Dense+tanh on position 0) and, with
    `output_hidden_states=True`, `hidden_states` `[batch, num_layers + 1, seq, hidden]`
    (embedding output, then each layer's output).

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> outputs = backbone({
    ...     "token_ids": np.array([[2, 7, 9, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... })
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 8), (1, 8))
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        output_hidden_states=False,
        dtype=None,
        **kwargs,
    ):
        int8.check_float_policy(dtype)
        # === Layers ===
        embeddings = BertEmbeddings(
            vocabulary_size=vocabulary_size,
            hidden_dim=hidden_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            initializer_range=initializer_range,
            dtype=dtype,
            name="embeddings",
        )
        encoder_layers = [
            BertEncoderBlock(
                num_heads=num_heads,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                initializer_range=initializer_range,
                dtype=dtype,
                name=f"encoder_layer_{i}",
            )
            for i in range(num_layers)
        ]
        pooler = Int8Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_initializer(initializer_range),
            dtype=dtype,
            name="pooler",
        )

        # === Functional Model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        attention_bias, position_ids = AttentionLayout(name="attention_layout")(padding_mask)
        x = embeddings(token_ids, segment_ids, position_ids)
        hidden_states = [x]
        for layer in encoder_layers:
            x = layer(x, attention_bias)
            hidden_states.append(x)
        outputs = {"sequence_output": x, "pooled_output": pooler(x[:, 0, :])}
        if output_hidden_states:
            outputs["hidden_states"] = ops.stack(hidden_states, axis=1)
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )
        hardware.warn_if_emulated(self.dtype_policy.compute_dtype)  # bf16 on a CPU without it: say so once
        self.embeddings = embeddings
        self.encoder_layers = encoder_layers
        self.pooler = pooler

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.output_hidden_states = output_hidden_states

    def pooled_output(self, inputs, query_index=None, training=None):
        """`pooled_output` alone, with the last layer computed only at the tokens it reads.

        The pooler reads one token per sequence (`[CLS]`) of the last layer. Its keys
        and values need every token, but its attention output and feed-forward only
        that one: `BertEncoderBlock(query_index=...)` skips the rest, the same
        arithmetic for the token kept (MiniLM: ~14% fewer multiply-adds per token, in
        training too). `BertClassifier` and `BertMultipleChoice` call this.

        Args:
            inputs: the backbone's input dict.
            query_index: optional int `[n, 2]` `(row, position)` of the `[CLS]` tokens to
                pool, for rows packed with several sequences (`preprocessing.packing`);
                default position 0 of every row, as the pooled output of `__call__`.
            training: bool, dropout on.

        Returns:
            float `[n, hidden]` (`[batch, hidden]` by default), equal to
            `self(inputs)["pooled_output"]` up to float rounding.
        """
        bias, positions = attention_layout(inputs["padding_mask"])
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], positions, training=training)
        for layer in self.encoder_layers[:-1]:
            x = layer(x, bias, training=training)
        if query_index is None:
            rows = ops.arange(ops.shape(x)[0], dtype="int32")
            query_index = ops.stack([rows, ops.zeros_like(rows)], axis=1)
        return self.pooler(self.encoder_layers[-1](x, bias, query_index=query_index, training=training))

    # --- LoRA (KerasHub's API; see keras_bert_zoo.models.lora) ---------------------------
    def default_lora_layer_names(self):
        """The sub-layers `enable_lora` targets by default: `["query", "value"]`."""
        return list(lora.DEFAULT_TARGETS)

    def enable_lora(self, rank, target_layer_names=None, lora_alpha=None):
        """Freezes the backbone and adds trainable LoRA adapters, as KerasHub's `enable_lora`.

        Every weight is frozen except, in each encoder layer, the targeted projections'
        adapters (`lora_kernel_a` `[in, rank]`, `lora_kernel_b` `[rank, out]`, the second
        zero so the outputs do not change) and their biases. A task model's head stays
        trainable. The adapters are saved with the model (`.keras`, `save_to_preset`,
        training checkpoints) and `from_preset` / `load_model` restore them.

        Args:
            rank: int, the rank of the update `alpha / rank * a @ b` added to each kernel.
            target_layer_names: names among `query`, `key`, `value`, `attention_output`,
                `intermediate`, `output_dense`; default `default_lora_layer_names()`.
            lora_alpha: float, the update's scale numerator; default `rank` (scale 1,
                Keras' default).

        Examples:
        >>> from keras_bert_zoo import BertBackbone
        >>> backbone = BertBackbone.from_preset("bert_tiny_uncased", load_weights=False)
        >>> backbone.enable_lora(8)
        >>> sum(w.numpy().size for w in backbone.trainable_weights)  # 2 layers x (q, v) x (8x128 + 8x128 + 128)
        8704
        """
        lora.enable_lora(self, rank, target_layer_names, lora_alpha)

    def save_lora_weights(self, filepath):
        """Writes the LoRA adapters alone (a `.lora.h5` file, as KerasHub's), with their settings."""
        lora.save_lora_weights(self, filepath)

    def load_lora_weights(self, filepath):
        """Reads `save_lora_weights`' file; enables LoRA with its settings first if it is off."""
        lora.load_lora_weights(self, filepath)

    @property
    def token_embedding(self):
        """The word-embedding layer (the MLM decoder is tied to its matrix)."""
        return self.embeddings.word_embeddings

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras' `Model.quantize` on the layers that have a quantized form (Dense and
        Embedding; LayerNorm stays float32), without a warning for each of the others.
        `"int8"`: int8 weights, one scale per output channel (per row for embeddings),
        inputs quantized per row on the fly; on TensorFlow with VNNI the encoder's matmuls
        run oneDNN's int8 kernel (`models.layers.int8`). `get_config` records the layers
        quantized, so `.keras` files reload quantized.

        Examples:
        >>> from keras_bert_zoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> backbone.quantize("int8")
        >>> backbone.encoder_layers[0].query.quantization_mode
        'int8'
        """
        hardware.warn_if_emulated(mode)
        with int8.one_garbage_collection():
            super().quantize(mode, config=config, filters=int8.quantizable_filter(filters), **kwargs)

    def get_config(self):
        quantization = int8.quantization_config(self)
        config = {
            **({"quantization": quantization} if quantization else {}),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
            "output_hidden_states": self.output_hidden_states,
        }
        settings = lora.lora_settings(self)
        if settings:  # {"rank", "alpha", "target_layer_names"}, re-enabled by from_config
            config["lora"] = settings
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        dtype = config.pop("dtype", None)
        settings = config.pop("lora", None)
        quantization = config.pop("quantization", None)
        if isinstance(dtype, dict):
            dtype = keras.dtype_policies.deserialize(dtype)
        backbone = int8.requantize(cls(dtype=dtype, **config), quantization)
        if settings:
            backbone.enable_lora(settings["rank"], settings["target_layer_names"], settings["alpha"])
        return backbone

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, **kwargs):
        """Builds a backbone from a preset name, a Hub repo or a local checkpoint directory.

        A preset *name* loads that size's official pretrained checkpoint from the
        Hugging Face Hub (`bert_base_uncased` -> `google-bert/bert-base-uncased`, see
        `keras_bert_zoo.models.presets.PRETRAINED_REPOS`), through `huggingface_hub`'s
        cache, so it works offline once cached; `load_weights=False` builds the
        architecture alone (random initialisation), with nothing fetched (a line on
        stderr says so).

        Args:
            name_or_path: one of
                - a name from `keras_bert_zoo.presets()`;
                - `"hf://ORG/NAME"` or `"hf://ORG/NAME@REVISION"`: any BERT repo on the Hub;
                - a directory in HF format (`config.json`, and `model.safetensors` or else
                  HF TF2's `tf_model.h5`; never the pickled `pytorch_model.bin`), original
                  Google format (`bert_config.json`, `bert_model.ckpt.*`), KerasHub /
                  keras-nlp format (`config.json` with `registered_name`
                  `keras_hub>BertBackbone`, `model.weights.h5`), or one written by
                  `save_to_preset`.
            load_weights: bool, False builds the architecture without reading weights.
            **kwargs: overrides of constructor arguments (`dropout`,
                `output_hidden_states`, `dtype`, ...).

        A checkpoint without pooler weights loads with a random pooler (a warning
        says so); backbone tensors the config does not account for (e.g. layers
        beyond `num_hidden_layers`) are named on stderr. Task heads in the
        checkpoint are ignored here: load them with the task's `from_preset`.

        Raises:
            CheckpointError: a Hub repo that is neither cached nor reachable (one line
                naming it and the fixes), or a directory that cannot be loaded (one whose
                `vocab.txt` has more tokens than the config's `vocab_size` among them).

        Examples:
        >>> from keras_bert_zoo import BertBackbone
        >>> backbone = BertBackbone.from_preset("bert_tiny_uncased", load_weights=False)  # random
        >>> backbone.count_params()
        4385920
        """
        name_or_path = loading.resolve(name_or_path, load_weights)
        if loading.is_preset_name(name_or_path):
            loading.note_random_init(name_or_path)
            return cls(**{**backbone_config(name_or_path), **kwargs})
        checkpoint = loading.open_checkpoint(name_or_path)
        # A vocab.txt longer than the embedding table fails later, deep in TensorFlow; refuse it now.
        from keras_bert_zoo.preprocessing.vocab_file import (
            check_vocab_txt_fits,
        )  # lazy: its package loads tensorflow_text

        check_vocab_txt_fits(checkpoint.path)
        backbone = cls.from_checkpoint(checkpoint, load_weights=load_weights, **kwargs)
        if load_weights:
            loading.report_unused(checkpoint, cls.__name__, backbone_only=True)
        return int8.requantize(backbone, checkpoint.extra.get("quantization"))

    @classmethod
    def from_checkpoint(cls, checkpoint, load_weights=True, pooler_needed=True, **kwargs):
        """A backbone of an opened checkpoint's architecture (`kwargs` override it), loaded.

        `checkpoint` is what `keras_bert_zoo.models.loading.open_checkpoint` returns;
        `pooler_needed=False` loads a checkpoint without pooler weights silently.
        Task models call this with their checkpoint, then load their heads from it.
        """
        backbone = cls(**{**checkpoint.backbone_kwargs, **kwargs})
        adapters = getattr(checkpoint, "lora", None)  # a preset saved with LoRA (PEFT adapter files)
        if adapters:
            backbone.enable_lora(adapters["rank"], adapters["target_layer_names"], adapters["alpha"])
        if load_weights:
            loading.load_backbone_weights(backbone, checkpoint, pooler_needed=pooler_needed)
            if adapters:
                loading.assign_weights(checkpoint, lora_weight_specs(backbone))
        return backbone

    def save_to_preset(self, path, format="keras_bert_zoo"):
        """Writes the backbone as a preset directory.

        Args:
            path: directory to write.
            format: `"keras_bert_zoo"` (default): `config.json` + `model.safetensors`,
                the HF BERT layout, which loads back with `from_preset` exactly and with
                HF `transformers.BertModel.from_pretrained` too. `"keras_hub"`: a KerasHub
                preset (`config.json`, `metadata.json`, `model.weights.h5`) that
                `keras_hub.models.BertBackbone.from_preset(path)` loads.

        With LoRA enabled, `"keras_bert_zoo"` writes the frozen weights to `model.safetensors`
        and the adapters (and the targeted biases) as HF PEFT does, to `adapter_config.json`
        + `adapter_model.safetensors`: `from_preset` restores the LoRA model, and
        `peft.PeftModel.from_pretrained(transformers.BertModel.from_pretrained(path), path)`
        computes the same. `"keras_hub"` merges the adapters into the kernels, as KerasHub's
        own preset saving does.
        """
        if loading.save_as(path, self, format):
            return
        loading.write_preset(path, backbone=self, extra=int8.preset_extra(self))
