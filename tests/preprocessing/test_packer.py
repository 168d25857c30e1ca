"""SegmentPacker against google-research/bert's truncation, tensorflow-text trimmers and KerasHub."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.preprocessing import SegmentPacker
from tests.helpers import run_layer_test

LENGTH = 9


def bert_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert `run_classifier._truncate_seq_pair`, verbatim logic."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def all_length_pairs(max_len=12):
    pairs = list(itertools.product(range(max_len), range(max_len)))
    a = tf.ragged.constant([list(range(1, x + 1)) for x, _ in pairs], dtype=tf.int32, row_splits_dtype=tf.int64)
    b = tf.ragged.constant([list(range(50, 50 + y)) for _, y in pairs], dtype=tf.int32, row_splits_dtype=tf.int64)
    return a, b


def test_longest_first_is_the_original_bert_rule():
    a, b = all_length_pairs()
    out = SegmentPacker(LENGTH, 101, 102)((a, b))
    for i, (ra, rb) in enumerate(zip(a.to_list(), b.to_list(), strict=True)):
        bert_truncate_seq_pair(ra, rb, LENGTH - 3)
        tokens = [101] + ra + [102] + rb + [102]
        segments = [0] * (len(ra) + 2) + [1] * (len(rb) + 1)
        pad = LENGTH - len(tokens)
        assert out["token_ids"][i].numpy().tolist() == tokens + [0] * pad
        assert out["segment_ids"][i].numpy().tolist() == segments + [0] * pad
        assert out["padding_mask"][i].numpy().tolist() == [1] * len(tokens) + [0] * pad


@pytest.mark.parametrize(
    "strategy,trimmer", [("round_robin", tf_text.RoundRobinTrimmer), ("waterfall", tf_text.WaterfallTrimmer)]
)
def test_round_robin_and_waterfall_match_tensorflow_text(strategy, trimmer):
    a, b = all_length_pairs()
    out = SegmentPacker(LENGTH, 101, 102, truncate=strategy)((a, b))
    ta, tb = trimmer(LENGTH - 3).trim([a, b])
    for i, (ra, rb) in enumerate(zip(ta.to_list(), tb.to_list(), strict=True)):
        tokens = [101] + ra + [102] + rb + [102]
        assert out["token_ids"][i].numpy().tolist() == tokens + [0] * (LENGTH - len(tokens))


@pytest.mark.parametrize("strategy", ["round_robin", "waterfall"])
def test_matches_keras_hub_multi_segment_packer(strategy):
    keras_hub = pytest.importorskip("keras_hub")
    a, b = all_length_pairs()
    ours = SegmentPacker(LENGTH, 101, 102, pad_value=0, truncate=strategy)((a, b))
    ref_ids, ref_segments = keras_hub.layers.MultiSegmentPacker(
        LENGTH, start_value=101, end_value=102, pad_value=0, truncate=strategy
    )((a, b))
    np.testing.assert_array_equal(ours["token_ids"], ref_ids)
    np.testing.assert_array_equal(ours["segment_ids"], ref_segments)
    single = SegmentPacker(LENGTH, 101, 102, truncate=strategy)(a)
    ref_single, _ = keras_hub.layers.MultiSegmentPacker(LENGTH, 101, 102, pad_value=0, truncate=strategy)(a)
    np.testing.assert_array_equal(single["token_ids"], ref_single)


def test_single_segment_dense_and_unbatched_inputs():
    packer = SegmentPacker(6, 101, 102, pad_value=7)
    out = packer(tf.ragged.constant([[1, 2, 3, 4, 5, 6], [1]]))
    assert out["token_ids"].numpy().tolist() == [[101, 1, 2, 3, 4, 102], [101, 1, 102, 7, 7, 7]]
    assert out["segment_ids"].numpy().tolist() == [[0] * 6, [0] * 6]
    assert all(v.dtype == tf.int32 and v.shape == (2, 6) for v in out.values())
    unbatched = packer(tf.constant([1, 2]))
    assert unbatched["token_ids"].numpy().tolist() == [101, 1, 2, 102, 7, 7]
    dense = packer(np.array([[1, 2], [3, 4]]))
    assert dense["token_ids"].numpy().tolist() == [[101, 1, 2, 102, 7, 7], [101, 3, 4, 102, 7, 7]]


def test_layer_contract_and_tf_data():
    a, b = all_length_pairs(6)
    packer = SegmentPacker(LENGTH, 101, 102, truncate="waterfall")
    direct = run_layer_test(packer, (a, b))
    ds = tf.data.Dataset.from_tensor_slices((a, b)).batch(5).map(lambda x, y: packer((x, y)))
    assert ds.element_spec["token_ids"].shape.as_list() == [None, LENGTH]  # static length for XLA/TPU
    batches = list(ds)
    for key in direct:
        np.testing.assert_array_equal(np.concatenate([x[key] for x in batches]), direct[key])
