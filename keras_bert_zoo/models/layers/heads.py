"""Pretraining heads: the masked-LM head and the next-sentence head.

Names mirror the checkpoint (`cls.predictions.transform.dense`,
`cls.predictions.transform.LayerNorm`, `cls.predictions.bias`,
`cls.seq_relationship`), so loading them is a name table (see `BertPretrainer`).
"""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.layers.activations import get_activation
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.layers.int8 import embedding_matrix

__all__ = ["MaskedLMHead", "NextSentenceHead"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMHead(keras.layers.Layer):
    """Masked-LM head: Dense(hidden) + activation + LayerNorm, then the *tied* token
    embedding matrix transposed plus an output bias of its own.

    The decoder has no kernel of its own: it reads `token_embedding.embeddings`, so
    the input and output vocabularies share one matrix as in the original BERT. The
    embedding layer is not part of `get_config` (it belongs to the backbone); the
    model that owns both passes it again when it is rebuilt.

    Args:
        token_embedding: `keras.layers.Embedding` whose matrix `[vocab, hidden]`
            is the decoder.
        activation: str, `"gelu"` (exact erf, HF) or `"gelu_approximate"` (tanh,
            original Google code), as the backbone.
        layer_norm_epsilon: float, 1e-12 as everywhere in BERT.
        initializer_range: float, stddev of the dense kernel's TruncatedNormal init.

    Call args:
        sequence_output: float Tensor `[batch, seq, hidden]`.
        mask_positions: int Tensor `[batch, max_predictions]`, positions to predict.

    Returns:
        float32 logits `[batch, max_predictions, vocabulary_size]`.

    Examples:
    >>> import keras, numpy as np
    >>> from keras_bert_zoo.models.layers.heads import MaskedLMHead
    >>> embedding = keras.layers.Embedding(10, 4); embedding.build((None,))
    >>> head = MaskedLMHead(token_embedding=embedding)
    >>> tuple(head(np.ones((2, 5, 4), "float32"), np.zeros((2, 3), "int32")).shape)
    (2, 3, 10)
    """

    def __init__(
        self, token_embedding=None, activation="gelu", layer_norm_epsilon=1e-12, initializer_range=0.02, **kwargs
    ):
        super().__init__(**kwargs)
        if token_embedding is None:
            raise UsageError(
                "MaskedLMHead needs `token_embedding` (the backbone's word-embedding layer, "
                "`backbone.token_embedding`): its matrix is the tied decoder."
            )
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            token_embedding.output_dim,
            kernel_initializer=bert_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm"
        )
        self._activation_fn = get_activation(activation)

    def build(self, sequence_output_shape, mask_positions_shape=None):
        hidden = token_embedding_dim = self.token_embedding.output_dim
        self.dense.build((None, token_embedding_dim))
        self.layer_norm.build((None, hidden))
        self.bias = self.add_weight(name="bias", shape=(self.token_embedding.input_dim,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, mask_positions):
        # Only the predicted positions go through the head: 20 of 128 tokens, so the
        # [hidden x vocab] decoder matmul costs ~6x less than on every token.
        x = ops.take_along_axis(sequence_output, ops.cast(mask_positions, "int32")[:, :, None], axis=1)
        x = self.layer_norm(self._activation_fn(self.dense(x)))
        # The float matrix, also once quantized (`.embeddings` is then the raw int8 table).
        kernel = ops.cast(embedding_matrix(self.token_embedding), x.dtype)
        logits = ops.matmul(x, ops.transpose(kernel))
        # Logits in float32 under mixed precision: the softmax over 30k ids needs it.
        return ops.cast(logits, "float32") + ops.cast(self.bias, "float32")

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape):
        return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class NextSentenceHead(keras.layers.Layer):
    """Next-sentence head: Dense(2) on the pooled `[CLS]` output.

    Label 0 means "B follows A" and 1 "B is random", the original convention (HF's
    `next_sentence_label` too), so checkpoints' `seq_relationship` weights load as is.

    Args:
        initializer_range: float, stddev of the kernel's TruncatedNormal init.

    Call args:
        pooled_output: float Tensor `[batch, hidden]`.

    Returns:
        float32 logits `[batch, 2]`.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo.models.layers.heads import NextSentenceHead
    >>> tuple(NextSentenceHead()(np.ones((3, 8), "float32")).shape)
    (3, 2)
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=bert_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return tuple(pooled_output_shape[:-1]) + (2,)

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config
