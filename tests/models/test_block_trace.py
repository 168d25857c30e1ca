"""Encoder blocks share one traced inference graph (`models.layers.block_trace`).

Inside a `tf.function`, every `BertEncoderBlock` of one configuration called with
`training=False` runs one concrete function with its own weights passed in: the block's
Python `call` runs once while tracing instead of once per block, and every model's outputs
stay its own (equal to the eager forward, <= 1e-5), frozen or not. Training steps share
one trace too, with the dropout seeds passed in, and train as the blocks traced one by one.
"""

import functools
import gc
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertClassifier, BertTagger
from keras_bert_zoo.models.layers import block_trace
from keras_bert_zoo.models.layers.encoder_block import BertEncoderBlock

INPUTS = {
    "token_ids": np.array([[2, 17, 9, 33, 3, 0], [2, 5, 3, 0, 0, 0]], "int32"),
    "segment_ids": np.zeros((2, 6), "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], "int32"),
}


def backbone(seed, num_layers=3):
    keras.utils.set_random_seed(seed)
    return BertBackbone(
        vocabulary_size=60,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        initializer_range=0.5,
    )


@pytest.fixture
def block_calls(monkeypatch):
    """How often a block's Python `call` runs (each run is a trace inside a tf.function), from
    an empty cache of shared traces (other tests trace blocks of these shapes too)."""
    block_trace.clear_shared_block_traces()
    calls = []
    call = BertEncoderBlock.call

    @functools.wraps(call)  # Keras reads `call`'s signature
    def counted(self, *args, **kwargs):
        calls.append(1)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(BertEncoderBlock, "call", counted)
    return calls


# The classifier also traces its [CLS]-only last block, once for both models (it traced it once per
# model before that path shared a trace: 3).
@pytest.mark.parametrize("make, traced", [("tagger", 1), ("classifier", 2)])
def test_blocks_trace_once_and_keep_their_own_weights(make, traced, block_calls):
    def model(seed):
        if make == "tagger":
            return BertTagger(backbone(seed), num_labels=3, dropout=0.1)
        return BertClassifier(backbone(seed), num_classes=2, dropout=0.1)

    first, second = model(0), model(1)  # same configuration, other weights: the trace is shared between them
    eager = [np.asarray(m(INPUTS, training=False)) for m in (first, second)]
    block_calls.clear()
    traced_out = [np.asarray(tf.function(lambda x, m=m: m(x, training=False))(INPUTS)) for m in (first, second)]
    assert len(block_calls) == traced  # not 3 (layers) x 2 (models)
    for got, want in zip(traced_out, eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(eager[0] - eager[1]).max() > 1e-3  # the two models really differ
    assert all(not function.captured_inputs for function in block_trace.shared_block_traces().values())


def test_frozen_blocks_share_a_trace_too(block_calls):
    model = BertTagger(backbone(2), num_labels=3)
    model.backbone.trainable = False
    eager = np.asarray(model(INPUTS, training=False))
    block_calls.clear()
    traced = np.asarray(tf.function(lambda x: model(x, training=False))(INPUTS))
    assert len(block_calls) == 1
    np.testing.assert_allclose(traced, eager, rtol=1e-5, atol=1e-5)


# The blocks' dropout 0.0 draws no random numbers: their seeds go back unchanged.
@pytest.mark.parametrize("policy, block_dropout", [("float32", 0.1), ("mixed_bfloat16", 0.1), ("float32", 0.0)])
def test_training_steps_share_a_trace_and_train_as_before(block_calls, monkeypatch, policy, block_dropout):
    """`training=True` calls inside a traced step share one trace too (the forward, and the
    gradient the tape takes of it), with each block's dropout seeds passed in and advanced:
    two steps with dropout give the same losses, weights and seed states as the blocks traced
    one by one through Keras' `__call__`."""
    labels = np.array([[1, 2, 0, 1, 2, 0], [2, 1, 0, 0, 0, 0]], "int32")

    def train(shared):
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(6)
            blocks = BertBackbone(
                vocabulary_size=60,
                num_layers=3,
                num_heads=2,
                hidden_dim=8,
                intermediate_dim=16,
                max_sequence_length=16,
                initializer_range=0.5,
                dropout=block_dropout,
            )
            model = BertTagger(blocks, num_labels=3, dropout=0.3)
        finally:
            keras.config.set_dtype_policy(previous)
        model.compile(optimizer=keras.optimizers.SGD(0.5), jit_compile=False)
        if not shared:
            monkeypatch.setattr(block_trace, "training_call", lambda *args: None)
        block_calls.clear()
        losses = [float(np.asarray(model.train_on_batch(INPUTS, labels)).ravel()[0]) for _ in range(2)]
        return losses, len(block_calls), model.get_weights()

    shared, one_by_one = train(True), train(False)
    assert shared[1] == 1 and one_by_one[1] == 3  # one trace for the 3 blocks, against one each
    # bfloat16 keeps 8 bits: the two graphs round their 16-bit gradients apart (float32 is exact).
    tolerance = 1e-5 if policy == "float32" else 2e-3
    np.testing.assert_allclose(shared[0], one_by_one[0], rtol=tolerance, atol=1e-6)
    assert len(shared[2]) == len(one_by_one[2])
    for got, want in zip(shared[2], one_by_one[2], strict=True):
        if got.dtype.kind == "i":  # the dropout seed states advanced alike
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    assert shared[0][0] != shared[0][1]  # the step changed the weights


def test_frozen_or_adapted_blocks_train_through_their_own_traces(block_calls):
    """A block with frozen float weights (LoRA freezes the kernels) trains as written: the
    shared backward would compute the frozen kernels' gradients too."""
    model = BertTagger(backbone(7), num_labels=3)
    model.backbone.enable_lora(2)
    model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=False)
    block_calls.clear()
    model.train_on_batch(INPUTS, np.zeros((2, 6), "int32"))
    assert len(block_calls) == 3


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_blocks_share_a_trace(block_calls, policy):
    """Under a mixed policy (float32 weights, 16-bit compute) the blocks share one trace too,
    with Keras' autocasting inside it: the outputs are 16-bit and equal the graph that calls
    each block through Keras' `__call__` (the same ops), and close to the eager forward."""
    keras.utils.set_random_seed(4)
    blocks = [BertEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=16, dtype=policy) for _ in range(3)]
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    bias = np.where(np.arange(5) < 4, 0.0, -10000.0).astype("float32")[None, None, None, :].repeat(2, 0)
    eager = x
    for block in blocks:
        eager = block(eager, bias, training=False)

    def forward(x, bias):
        for block in blocks:
            x = block(x, bias, training=False)
        return x

    block_calls.clear()
    shared = tf.function(forward)(x, bias)
    assert len(block_calls) == 1 and len(block_trace.shared_block_traces()) == 1
    assert shared.dtype == blocks[0].compute_dtype
    # The same blocks through Keras' own `Layer.__call__` (casts and autocast scope), in a graph.
    keras_call = keras.layers.Layer.__call__

    def through_keras(x, bias):
        for block in blocks:
            x = keras_call(block, x, bias, training=False)
        return x

    as_written = tf.function(through_keras)(x, bias)
    np.testing.assert_allclose(np.asarray(shared, "float32"), np.asarray(as_written, "float32"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(shared, "float32"), np.asarray(eager, "float32"), rtol=3e-2, atol=3e-2)


def test_a_shared_trace_does_not_keep_the_traced_model_alive(block_calls):
    """The trace captures no weights and keeps no block: a model traced first and then
    dropped is freed, and the trace goes on serving other models of its configuration."""
    first = BertTagger(backbone(4), num_labels=3)
    # The closure's cell is emptied by the `del` below, so the trace holds no reference to the model.
    tf.function(lambda x: first(x, training=False))(INPUTS)  # noqa: F821
    blocks = [weakref.ref(first.backbone.get_layer(f"encoder_layer_{i}")) for i in range(3)]
    del first
    gc.collect()
    assert [block() for block in blocks] == [None] * 3
    second = BertTagger(backbone(5), num_labels=3)
    eager = np.asarray(second(INPUTS, training=False))
    block_calls.clear()
    traced = np.asarray(tf.function(lambda x: second(x, training=False))(INPUTS))
    assert len(block_calls) == 0  # the first model's trace, reused
    np.testing.assert_allclose(traced, eager, rtol=1e-5, atol=1e-5)


class _DoubledBlock(BertEncoderBlock):
    """Another computation under the same configuration."""

    def call(self, x, attention_bias, query_index=None, training=None):
        return 2.0 * super().call(x, attention_bias, query_index=query_index, training=training)


def test_a_subclass_gets_its_own_trace(block_calls):
    """Blocks of the same configuration but another class do not share a trace: each
    traced output equals its own eager call."""
    x, bias = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32"), np.zeros((2, 1, 5, 5), "float32")
    blocks = [cls(num_heads=2, hidden_dim=8, intermediate_dim=16) for cls in (BertEncoderBlock, _DoubledBlock)]
    eager = [np.asarray(block(x, bias, training=False)) for block in blocks]
    blocks[1].set_weights(blocks[0].get_weights())
    eager[1] = np.asarray(blocks[1](x, bias, training=False))
    traced = [np.asarray(tf.function(lambda a, b, blk=blk: blk(a, b, training=False))(x, bias)) for blk in blocks]
    assert len(block_trace.shared_block_traces()) == 2
    for got, want in zip(traced, eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(traced[1], 2 * traced[0], rtol=1e-5, atol=1e-5)


def test_inputs_of_another_dtype_are_cast_as_keras_call_casts_them(block_calls):
    """A float16 input to a float32 block is cast to float32 first, as Keras' `__call__`
    casts it, and then runs through the shared trace."""
    block = BertEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=16)
    x, bias = np.ones((2, 5, 8), "float32"), np.zeros((2, 1, 5, 5), "float32")
    want = np.asarray(block(x, bias, training=False))
    got = tf.function(lambda a, b: block(a, b, training=False))(tf.constant(x, tf.float16), tf.constant(bias))
    assert got.dtype == tf.float32 and len(block_trace.shared_block_traces()) == 1
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)
