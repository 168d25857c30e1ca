"""BERT input embeddings: word + position + token-type, then LayerNorm and dropout."""

import keras
from keras import ops

from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.layers.int8 import embedding_matrix

__all__ = ["BertEmbeddings"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEmbeddings(keras.layers.Layer):
    """Sum of word, learned position and token-type (segment) embeddings.

    Sub-layer names mirror the checkpoint names (`word_embeddings`,
    `position_embeddings`, `token_type_embeddings`, `LayerNorm`) so that the
    converters are a name table.

    Args:
        vocabulary_size: int, number of WordPiece ids.
        hidden_dim: int, embedding width.
        max_sequence_length: int, number of learned positions.
        num_segments: int, number of token types (2 for sentence pairs).
        dropout: float, dropout after the LayerNorm.
        layer_norm_epsilon: float, 1e-12 as in the original BERT code.

    Call args:
        token_ids: int Tensor of shape `[batch, seq]`.
        segment_ids: int Tensor of shape `[batch, seq]`.

    Returns:
        float Tensor of shape `[batch, seq, hidden_dim]`.
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        init = lambda: bert_initializer(initializer_range)  # noqa: E731
        self.word_embeddings = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=init(),
            dtype=self.dtype_policy,
            name="word_embeddings",
        )
        self.position_embeddings = keras.layers.Embedding(
            max_sequence_length,
            hidden_dim,
            embeddings_initializer=init(),
            dtype=self.dtype_policy,
            name="position_embeddings",
        )
        self.token_type_embeddings = keras.layers.Embedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=init(),
            dtype=self.dtype_policy,
            name="token_type_embeddings",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None, position_ids_shape=None):
        self.word_embeddings.build(token_ids_shape)
        self.position_embeddings.build((self.max_sequence_length,))
        self.token_type_embeddings.build(token_ids_shape)
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_dim,))
        self.built = True

    def call(self, token_ids, segment_ids, position_ids=None, training=None):
        words = self.word_embeddings(token_ids)
        if position_ids is None:
            # Positions 0..seq-1 in every row: slice the table instead of a gather.
            seq_len = ops.shape(token_ids)[1]
            # The float table, also once quantized (`.embeddings` is then the raw int8 one).
            table = ops.convert_to_tensor(embedding_matrix(self.position_embeddings))
            positions = ops.slice(table, (0, 0), (seq_len, self.hidden_dim))[None, :, :]
        else:
            positions = self.position_embeddings(position_ids)
        positions = ops.cast(positions, words.dtype)
        segments = self.token_type_embeddings(segment_ids)
        x = words + segments + positions
        x = self.layer_norm(x)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None, position_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            hidden_dim=self.hidden_dim,
            max_sequence_length=self.max_sequence_length,
            num_segments=self.num_segments,
            dropout=self.dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
        )
        return config
