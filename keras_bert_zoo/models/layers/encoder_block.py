"""One post-LayerNorm Transformer encoder layer, as in BERT."""

import math

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.layers import block_trace
from keras_bert_zoo.models.layers.activations import get_activation
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.layers.int8 import Int8Dense

__all__ = ["BertEncoderBlock", "AttentionLayout", "attention_layout", "DENSE_LAYERS"]

# The block's Dense sub-layers, by attribute name: the layers `BertBackbone.enable_lora`
# can target.
DENSE_LAYERS = ("query", "key", "value", "attention_output", "intermediate", "output_dense")

# The original BERT code adds -10000.0 to the attention scores of padding keys: after
# the softmax their weight is exp(-10000) == 0 in float32, without the overflow risk
# of -inf when a whole row is padding.
_MASK_PENALTY = -10000.0


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEncoderBlock(keras.layers.Layer):
    """Self-attention + feed-forward, each followed by residual add and LayerNorm.

    Sub-layers mirror the checkpoint names: `query`, `key`, `value`
    (`attention.self.*`), `attention_output` + `attention_layer_norm`
    (`attention.output.*`), `intermediate` (`intermediate.dense`), `output_dense`
    + `output_layer_norm` (`output.*`).

    Args:
        num_heads: int, attention heads; must divide `hidden_dim`.
        hidden_dim: int, model width.
        intermediate_dim: int, feed-forward width (4 x hidden in BERT).
        dropout: float, dropout on attention probabilities and on each residual branch.
        activation: str, `"gelu"` (exact erf) or `"gelu_approximate"` (tanh form).
        layer_norm_epsilon: float.

    Call args:
        x: float Tensor of shape `[batch, seq, hidden_dim]`.
        attention_bias: float Tensor of shape `[batch, 1, seq, seq]` (or
            `[batch, 1, 1, seq]`), 0 for keys to attend to and a large negative
            number for the others (`attention_layout`).

        query_index: optional int Tensor `[n, 2]` of `(row, position)` pairs: compute
            the layer's output only at those tokens (each still attends over its
            whole row). A pooled head reads one token per sequence of the last layer,
            so the other tokens' attention output and feed-forward are skipped there:
            the same arithmetic for the tokens kept, ~1/6 less work for MiniLM
            (`BertBackbone.pooled_output`).

    Returns:
        float Tensor of shape `[batch, seq, hidden_dim]`, or `[n, hidden_dim]` with
        `query_index`.
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise UsageError(
                f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}; "
                "choose num_heads that divides hidden_dim."
            )
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.head_dim = hidden_dim // num_heads

        def dense(units, name):
            # Int8Dense: Keras' Dense that saves LoRA adapters unmerged (`LoraDense`) and, quantized
            # to int8, multiplies with oneDNN's int8 kernel (`int8`).
            return Int8Dense(
                units,
                kernel_initializer=bert_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        def layer_norm(name):
            return keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name)

        self.query = dense(hidden_dim, "query")
        self.key = dense(hidden_dim, "key")
        self.value = dense(hidden_dim, "value")
        self.attention_output = dense(hidden_dim, "attention_output")
        self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.intermediate = dense(intermediate_dim, "intermediate")
        self.output_dense = dense(hidden_dim, "output_dense")
        self.output_layer_norm = layer_norm("output_layer_norm")
        self.attention_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.residual_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self._activation_fn = get_activation(activation)

    def build(self, x_shape, attention_bias_shape=None):
        hidden_shape = tuple(x_shape[:-1]) + (self.hidden_dim,)
        for layer in (self.query, self.key, self.value, self.attention_output):
            layer.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    def _split_heads(self, rows, b, s):
        # [b * s, h] -> [b, heads, s, head_dim]
        return ops.transpose(ops.reshape(rows, (b, s, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def _self_attention(self, rows, b, s, attention_bias, training, query_index=None):
        k = self._split_heads(self.key(rows), b, s)
        v = self._split_heads(self.value(rows), b, s)
        if query_index is None:
            q = self._split_heads(self.query(rows), b, s)
        else:  # one query per kept token, against the keys and values of its own row
            q_rows = query_index[:, 0]
            q = self._split_heads(
                self.query(ops.take(rows, q_rows * s + query_index[:, 1], axis=0)), ops.shape(query_index)[0], 1
            )
            k, v = ops.take(k, q_rows, axis=0), ops.take(v, q_rows, axis=0)
            attention_bias = ops.take(ops.reshape(attention_bias, (-1, s)), q_rows * s + query_index[:, 1], axis=0)[
                :, None, None, :
            ]
        # Scale q, not the [s, s] score matrix: same result, fewer multiplies.
        q = q * ops.cast(1.0 / math.sqrt(self.head_dim), q.dtype)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        # Softmax in float32 even under mixed precision: bf16 scores lose the
        # small differences that decide where attention goes.
        # (Keras autocasts the bias to the compute dtype; -10000 survives bf16 closely enough.)
        scores = ops.cast(scores, "float32") + ops.cast(attention_bias, "float32")
        probs = ops.cast(ops.softmax(scores, axis=-1), v.dtype)
        probs = self.attention_dropout(probs, training=training)
        context = ops.matmul(probs, v)  # [b, heads, s, head_dim]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, self.hidden_dim))
        return self.attention_output(context)

    def __call__(self, x, attention_bias, query_index=None, training=None, **kwargs):
        # Inference inside a traced function: one trace for every block of this shape
        # (`block_trace`: the first evaluate / predict of a process traces ~half the ops).
        if training in (False, True) and not kwargs and (query_index is None or not training):
            if training:
                out = block_trace.training_call(self, x, attention_bias)
            else:
                out = block_trace.inference_call(self, x, attention_bias, query_index=query_index)
            if out is not None:
                return out
        return super().__call__(x, attention_bias, query_index=query_index, training=training, **kwargs)

    def call(self, x, attention_bias, query_index=None, training=None):
        # The dense layers run on the [batch * seq, hidden] rows: on a 3-D input Keras'
        # matmul is a tensordot, which reshapes to 2-D and back with ~15 graph ops per
        # layer (and more in its gradient); on rows each is one MatMul. Same arithmetic;
        # MiniLM's forward graph 2,550 -> 1,530 ops to trace and optimise (issue 24).
        b, s = ops.shape(x)[:2]  # one Shape op for both (a graph op each per call)
        rows = ops.reshape(x, (-1, self.hidden_dim))
        attended = self._self_attention(rows, b, s, attention_bias, training, query_index)
        attended = self.residual_dropout(attended, training=training)
        if query_index is not None:
            rows = ops.take(rows, query_index[:, 0] * s + query_index[:, 1], axis=0)
        rows = self.attention_layer_norm(rows + attended)
        h = self._activation_fn(self.intermediate(rows), training=training)
        h = self.residual_dropout(self.output_dense(h), training=training)
        out = self.output_layer_norm(rows + h)
        return out if query_index is not None else ops.reshape(out, (b, s, self.hidden_dim))

    def lora_state(self):
        """`((name, rank, alpha), ...)` of the Dense sub-layers with LoRA enabled (empty: none)."""
        return tuple(
            (name, layer.lora_rank, layer.lora_alpha)
            for name in DENSE_LAYERS
            if (layer := getattr(self, name)).lora_enabled
        )

    def compute_output_shape(self, x_shape, attention_bias_shape=None, query_index_shape=None):
        if query_index_shape is not None:
            return (query_index_shape[0], self.hidden_dim)
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class AttentionLayout(keras.layers.Layer):
    """`padding_mask` -> the attention bias and the position ids (`attention_layout`)."""

    def call(self, padding_mask):
        return attention_layout(padding_mask)


def attention_layout(padding_mask):
    """`[batch, seq]` mask -> `[batch, 1, seq, seq]` float32 additive bias and int32
    `[batch, seq]` position ids.

    `padding_mask` is 0 for padding and 1 for real tokens; a *packed* row, holding
    several sequences one after another, numbers them 1, 2, 3, ... instead
    (`preprocessing.packing`). A token attends to the real tokens with its own number
    (padding queries, whose outputs nobody reads, to every real token, as in the
    original), and its position restarts at 0 with each sequence. So each packed
    sequence is computed exactly as if it were alone in its row; a 0/1 mask gives the
    original bias (0 on real keys, -10000 on padding) and positions 0, 1, 2, ...
    """
    ids = ops.cast(padding_mask, "int32")
    real = ops.greater(ids, 0)
    same = ops.equal(ids[:, :, None], ids[:, None, :])  # [batch, query, key]
    allowed = ops.logical_and(real[:, None, :], ops.logical_or(same, ops.logical_not(real)[:, :, None]))
    bias = ops.where(allowed, 0.0, _MASK_PENALTY)[:, None, :, :]
    # A real token's position = the tokens of its own sequence before it (sequences are
    # contiguous); padding keeps its index, as in an unpacked row.
    index = ops.arange(ops.shape(ids)[1], dtype="int32")
    earlier = ops.less(index[None, :], index[:, None])  # [query, key]: key before query
    before = ops.sum(ops.cast(ops.logical_and(same, earlier[None]), "int32"), axis=-1)
    positions = ops.where(real, before, index[None, :])
    return ops.cast(bias, "float32"), positions
