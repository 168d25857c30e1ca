"""Character offsets: every SQuAD answer maps back to its tokens.

Offsets equal to HF's on every shared line: tests/preprocessing/test_tokenizer.py.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing import BertTokenizer
from tests.helpers import minilm_path, shared_data

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset(minilm_path())


def _squad(name):
    with open(shared_data("squad", f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)["data"]


@pytest.mark.parametrize("split", ["train", "dev"])
def test_every_squad_answer_is_recovered_from_offsets(tokenizer, split):
    data = _squad(split)
    contexts = [p for article in data for p in article["paragraphs"]]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([p["context"] for p in contexts]))
    ids, starts, ends = ids.to_list(), starts.to_list(), ends.to_list()
    covering, answers, aligned = [], [], []
    for p, row_ids, row_starts, row_ends in zip(contexts, ids, starts, ends, strict=True):
        row_starts, row_ends = np.array(row_starts), np.array(row_ends)
        for qa in p["qas"]:
            for answer in qa["answers"]:
                begin = answer["answer_start"]
                end = begin + len(answer["text"])
                assert p["context"][begin:end] == answer["text"]
                hit = np.nonzero((row_starts < end) & (row_ends > begin))[0]
                assert len(hit), f"no token covers {answer['text']!r}"
                covering.append([row_ids[i] for i in hit])
                answers.append(answer["text"])
                aligned.append(row_starts[hit[0]] == begin and row_ends[hit[-1]] == end)
    assert len(answers) > 3000
    got = [t.decode() for t in tokenizer.detokenize(tf.ragged.constant(covering)).numpy()]
    want = [t.decode() for t in tokenizer.detokenize(tokenizer(tf.constant(answers))).numpy()]
    for g, w, a, ok in zip(got, want, answers, aligned, strict=True):
        # An answer may start on a word piece ("27" of "us27"): drop its "##".
        g = g[2:] if g.startswith("##") else g
        if ok:
            assert g == w, f"answer {a!r}: covering tokens give {g!r}, expected {w!r}"
        else:
            # The answer starts or ends inside a word piece ("1990" of "1990s"): the
            # covering tokens hold the (normalised) answer plus part of that piece.
            assert w.replace(" ", "") in g.replace(" ", ""), (a, g, w)
    assert sum(aligned) / len(aligned) > 0.98


def test_offsets_with_invalid_utf8_count_replacement_characters(tokenizer):
    """Invalid bytes count as one U+FFFD character each, as Python's errors='replace'."""
    raw = b"caf\xe9 ok \xff\xfe done"
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(raw))
    text = raw.decode("utf-8", errors="replace")
    pieces = [text[s:e] for s, e in zip(starts.numpy(), ends.numpy(), strict=True)]
    assert pieces == ["caf", "ok", "done"]
    assert ids.numpy().tolist() == tokenizer(text).numpy().tolist()
