"""Bad input gives a defined result or a clear ValueError, never a crash deep in an op."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing import BertPreprocessor, BertTokenizer, SegmentPacker
from tests.helpers import minilm_path

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset(minilm_path())


@pytest.fixture(scope="module")
def hf():
    tok = tokenizers.Tokenizer.from_file(os.path.join(minilm_path(), "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def test_non_utf8_bytes_are_replaced_like_python(tokenizer, hf):
    """Invalid bytes -> U+FFFD (Python's errors='replace'), which HF's cleaning drops."""
    raws = [b"caf\xe9 au lait", b"\xff\xfe\xfd", b"ok \xc3 cut", b"\xed\xa0\x80 surrogate", b"over\xc0\xaflong"]
    ours = tokenizer(tf.constant(raws)).to_list()
    want = [e.ids for e in hf.encode_batch([r.decode("utf-8", "replace") for r in raws], add_special_tokens=False)]
    assert ours == want


def test_empty_strings(tokenizer):
    assert tokenizer(tf.constant(["", " ", "\x00"])).to_list() == [[], [], []]
    assert tokenizer(tf.constant([], tf.string)).to_list() == []
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([""]))
    assert ids.to_list() == starts.to_list() == ends.to_list() == [[]]
    pre = BertPreprocessor(tokenizer, sequence_length=6)
    out = pre(tf.constant(["", "x"]))
    assert out["token_ids"].numpy().tolist()[0] == [101, 102, 0, 0, 0, 0]
    pair = pre((tf.constant([""]), tf.constant([""])))
    assert pair["token_ids"].numpy().tolist() == [[101, 102, 102, 0, 0, 0]]
    assert pair["segment_ids"].numpy().tolist() == [[0, 0, 1, 0, 0, 0]]


def test_huge_inputs(tokenizer, hf):
    """A 2 MB text, a 100k-character word: defined results equal to HF."""
    text = " ".join(["The quick brown fox jumps over the lazy dog."] * 45_000)
    word = "x" * 100_000
    ours = tokenizer(tf.constant([text, word, word + " tail"])).to_list()
    want = [e.ids for e in hf.encode_batch([text, word, word + " tail"], add_special_tokens=False)]
    assert ours == want
    assert ours[1] == [tokenizer.unk_token_id]
    pre = BertPreprocessor(tokenizer, sequence_length=8)
    assert pre(tf.constant([text]))["token_ids"].shape == (1, 8)


def test_wrong_dtypes_and_shapes_are_refused(tokenizer):
    with pytest.raises(ValueError, match="tf.string"):
        tokenizer(tf.constant([1, 2, 3]))
    with pytest.raises(ValueError, match="must contain strings"):
        tokenizer([1, 2, 3])
    with pytest.raises(ValueError, match=r"shape \[batch\] or \[\]"):
        tokenizer(tf.constant([["a", "b"], ["c", "d"]]))
    pre = BertPreprocessor(tokenizer, sequence_length=8)
    with pytest.raises(ValueError, match="preprocessor=None"):
        pre({"token_ids": np.zeros((1, 8), "int32")})
    with pytest.raises(ValueError, match="one text or a"):
        pre((tf.constant(["a"]), tf.constant(["b"]), tf.constant(["c"])))
    with pytest.raises(ValueError, match="strings; tokenize first"):
        SegmentPacker(8, 101, 102)(tf.constant([["a"]]))


def test_bad_vocabularies(tmp_path):
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) \[CLS\], \[MASK\]"):
        BertTokenizer(["[PAD]", "[UNK]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="twice"):
        BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"])
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        BertTokenizer(str(tmp_path / "missing" / "vocab.txt"))
    with pytest.raises(FileNotFoundError, match="preset directory not found"):
        BertTokenizer.from_preset(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="sequence_length"):
        BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], sequence_length=0)


def test_bad_packer_arguments():
    with pytest.raises(ValueError, match="truncate"):
        SegmentPacker(8, 1, 2, truncate="middle")
    with pytest.raises(ValueError, match=">= 3"):
        SegmentPacker(2, 1, 2)
    with pytest.raises(ValueError, match="no room for two segments"):
        SegmentPacker(4, 1, 2)((tf.ragged.constant([[5]]), tf.ragged.constant([[6]])))
