"""Corpus reading and NSP/SOP pair generation (google-research/bert recipe)."""

import itertools
import os

import numpy as np
import pytest

from keras_bert_zoo.tasks.pretrainer.corpus import read_documents, split_sentences
from keras_bert_zoo.tasks.pretrainer.data import WordPieceIds, tokenize_documents
from keras_bert_zoo.tasks.pretrainer.pairs import (
    generate_instances,
    pack_instance,
    truncate_seq_pair,
)
from tests.helpers import minilm_path, shared_data

SEQ = 128


@pytest.fixture(scope="module")
def wikitext_docs():
    corpus = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    tokenize = WordPieceIds(os.path.join(minilm_path(), "vocab.txt"))
    return list(tokenize_documents(read_documents(corpus, "wikitext"), tokenize))


def find(haystack, needle, start=0):
    """First index >= start where `needle` occurs in `haystack`, or -1."""
    n = len(needle)
    for i in range(start, len(haystack) - n + 1):
        if haystack[i : i + n] == needle:
            return i
    return -1


def test_bert_format_and_sample_text():
    path = shared_data("pretrain_text", "sample_text.txt")
    docs = list(read_documents(path, "bert"))
    # The original sample_text.txt: 3 documents separated by blank lines.
    with open(path, encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    assert len(docs) == len(blocks) == 3
    assert docs[1][0].startswith("The rain had only ceased")


def test_wikitext_format_splits_articles():
    path = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    docs = read_documents(path, "wikitext")
    assert not isinstance(docs, list)  # a stream, not a list
    docs = list(docs)
    with open(path, encoding="utf-8") as f:
        titles = [line for line in f if line.startswith(" = ") and not line.startswith(" = = ")]
    assert len(docs) == len(titles) == 60
    assert not any(s.startswith("= =") for d in docs for s in d)


def test_lines_format_and_sentence_rule(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("First one. Second one! Third? yes\n\nDoc two: Mr. Smith ate 3.5 pies. Done\n")
    docs = list(read_documents(str(path), "lines"))
    assert docs == [["First one.", "Second one!", "Third? yes"], ["Doc two: Mr.", "Smith ate 3.5 pies.", "Done"]]
    assert split_sentences('He said "Go." Then left.') == ['He said "Go."', "Then left."]
    with pytest.raises(ValueError, match="corpus_format"):
        list(read_documents(str(path), "csv"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(read_documents(str(tmp_path / "nope.txt")))


def test_nsp_pairs_on_wikitext(wikitext_docs):
    flat = [[t for s in d for t in s] for d in wikitext_docs]
    instances = list(generate_instances(iter(wikitext_docs), SEQ, nsp="nsp", seed=7))
    labels = np.array([i.label for i in instances])
    assert len(instances) > 2000
    assert abs(labels.mean() - 0.5) <= 0.02, labels.mean()
    for inst in instances:
        assert 1 <= len(inst.tokens_a) and 1 <= len(inst.tokens_b)
        assert len(inst.tokens_a) + len(inst.tokens_b) <= SEQ - 3
        if inst.label == 1:
            assert inst.document_b != inst.document  # random next: always another document
            assert find(flat[inst.document_b], inst.tokens_b) >= 0
        else:
            # Actual next: A then B, in this order, in the same document.
            doc = flat[inst.document]
            a = find(doc, inst.tokens_a)
            assert a >= 0 and find(doc, inst.tokens_b, a + len(inst.tokens_a) - 1) >= 0
    # short_seq_prob: ~10% of documents use a shorter target, so short pairs exist
    lengths = np.array([len(i.tokens_a) + len(i.tokens_b) for i in instances])
    assert 0.02 < np.mean(lengths < 60) < 0.4
    # Reproducible with a seed, different with another.
    again = list(generate_instances(iter(wikitext_docs), SEQ, nsp="nsp", seed=7))
    assert [i.tokens_a for i in again] == [i.tokens_a for i in instances]
    other = list(generate_instances(iter(wikitext_docs), SEQ, nsp="nsp", seed=8))
    assert [i.tokens_a for i in other] != [i.tokens_a for i in instances]


def test_small_buffer_streaming_still_draws_other_documents(wikitext_docs):
    instances = list(generate_instances(iter(wikitext_docs), SEQ, nsp="nsp", buffer_size=4, seed=1))
    labels = np.array([i.label for i in instances])
    assert abs(labels.mean() - 0.5) <= 0.03
    assert all(i.document_b != i.document for i in instances if i.label == 1)


def test_sop_and_none(wikitext_docs):
    flat = [[t for s in d for t in s] for d in wikitext_docs]
    sop = list(generate_instances(iter(wikitext_docs), SEQ, nsp="sop", seed=2))
    labels = np.array([i.label for i in sop])
    assert abs(labels.mean() - 0.5) <= 0.03
    for inst in sop[:400]:
        assert inst.document_b == inst.document
        doc = flat[inst.document]
        a, b = find(doc, inst.tokens_a), find(doc, inst.tokens_b)
        assert a >= 0 and b >= 0
        assert (b < a) == (inst.label == 1)  # label 1: the segments are swapped
    none = list(generate_instances(iter(wikitext_docs), SEQ, nsp="none", seed=2))
    assert all(not i.tokens_b and i.label == -1 and 1 <= len(i.tokens_a) <= SEQ - 2 for i in none)
    with pytest.raises(ValueError, match="nsp must be one of"):
        list(generate_instances([], SEQ, nsp="mlm"))


def test_truncation_follows_the_original():
    import random

    rng = random.Random(0)
    a, b = list(range(100)), list(range(100, 130))
    truncate_seq_pair(a, b, 50, rng)
    assert len(a) + len(b) == 50
    assert len(a) == len(b) == 25  # the longer one is cut, ties cut B (the original rule)
    assert a[0] > 0 and a[-1] < 99  # cut from both ends at random


def test_packing_matches_hf_tokenizers_pair_encoding():
    tokenizers = pytest.importorskip("tokenizers")
    path = minilm_path()
    hf = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    hf.enable_padding(length=32)
    ours = WordPieceIds(os.path.join(path, "vocab.txt"))
    a, b = "The lobster is blue.", "It turns red on cooking!"
    ida, idb = ours([a, b])
    from keras_bert_zoo.tasks.pretrainer.pairs import Instance

    ids, segs, mask = pack_instance(Instance(ida, idb, 0, 0, 0), 32, 101, 102, 0)
    ref = hf.encode(a, b)
    assert ids == ref.ids and segs == ref.type_ids and mask == ref.attention_mask


def test_tokenizer_adapter_matches_hf_on_real_lines():
    tokenizers = pytest.importorskip("tokenizers")
    path = minilm_path()
    hf = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    corpus = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    with open(corpus, encoding="utf-8") as f:
        lines = [line.strip() for line in itertools.islice(f, 400) if line.strip()]
    ours = WordPieceIds(os.path.join(path, "vocab.txt"))(lines)
    ref = [e.ids[1:-1] for e in hf.encode_batch(lines)]
    assert sum(a == b for a, b in zip(ours, ref, strict=True)) >= 0.99 * len(lines)
