"""`BertTokenizer.from_preset` on directories without `tokenizer_config.json` (Google's
checkpoints: `bert_config.json` + `vocab.txt`): casing is inferred, with a warning."""

import json
import os
import re
import shutil
import warnings

import pytest

from keras_bert_zoo.preprocessing import BertTokenizer
from tests.helpers import minilm_path

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
WORDS = [
    "the",
    "a",
    "of",
    "and",
    "in",
    "to",
    "is",
    "was",
    "for",
    "on",
    "as",
    "with",
    "by",
    "at",
    "he",
    "it",
    "from",
    "his",
    "that",
    "an",
    "hello",
    "world",
    "##s",
    "##ed",
    "##ing",
    "##a",
    ".",
    ",",
]
CASED = SPECIALS + WORDS + ["The", "A", "In", "He", "It", "Hello", "World", "##A", "##S", "New", "York"]
UNCASED = SPECIALS + WORDS
AMBIGUOUS = SPECIALS + ["hello", "world", ".", "1", "2"]  # too few pieces to tell
FIX = "pass lowercase=... or write tokenizer_config.json"


def google_dir(root, name, vocabulary):
    """A Google-style checkpoint directory: bert_config.json + vocab.txt, no tokenizer_config.json."""
    path = os.path.join(str(root), name)
    os.makedirs(path)
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocabulary))
    with open(os.path.join(path, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab_size": len(vocabulary), "hidden_size": 128}, f)
    return path


def load_with_warning(path, lowercase, reason, **kwargs):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tokenizer = BertTokenizer.from_preset(path, **kwargs)
    assert tokenizer.lowercase is lowercase
    messages = [str(w.message) for w in record if FIX in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in record]  # the guess is announced, once
    message = messages[0]
    assert "\n" not in message and f"lowercase={lowercase}" in message and re.search(reason, message), message
    return tokenizer


def pieces(tokenizer, text):
    return [tokenizer.vocabulary[i] for i in tokenizer(text).numpy().tolist()]


def test_cased_vocabulary_keeps_case(tmp_path):
    path = google_dir(tmp_path, "checkpoint", CASED)
    tokenizer = load_with_warning(path, False, "vocab.txt looks cased")
    assert pieces(tokenizer, "Hello world") == ["Hello", "world"]
    assert pieces(tokenizer, "hello World") == ["hello", "World"]


def test_uncased_vocabulary_lowercases(tmp_path):
    path = google_dir(tmp_path, "checkpoint", UNCASED)
    tokenizer = load_with_warning(path, True, "vocab.txt looks uncased")
    assert pieces(tokenizer, "Hello World") == ["hello", "world"]


def test_vocabulary_beats_a_misleading_name(tmp_path):
    path = google_dir(tmp_path, "uncased_L-2_H-128_A-2", CASED)
    assert pieces(load_with_warning(path, False, "vocab.txt looks cased"), "Hello") == ["Hello"]


def test_real_minilm_vocabulary_is_inferred_uncased(tmp_path):
    """The real all-MiniLM-L6-v2 (bert-base-uncased) vocab.txt, copied without its tokenizer_config.json."""
    path = os.path.join(str(tmp_path), "minilm")
    os.makedirs(path)
    shutil.copy(os.path.join(minilm_path(), "vocab.txt"), path)
    tokenizer = load_with_warning(path, True, "vocab.txt looks uncased")
    reference = BertTokenizer.from_preset(minilm_path())  # with its tokenizer_config.json
    text = ["Hello World, The Quick Brown Fox from Zürich."]
    assert tokenizer(text).to_list() == reference(text).to_list()


@pytest.mark.parametrize(
    "name,lowercase,reason",
    [
        ("cased_L-2_H-128_A-2", False, "directory name says cased"),
        ("multi_cased_L-12_H-768_A-12", False, "directory name says cased"),
        ("uncased_L-2_H-128_A-2", True, "directory name says uncased"),
        ("multilingual_L-12_H-768_A-12", True, "directory name says uncased"),  # Google's list
        ("bert_small", True, "default"),
    ],
)
def test_ambiguous_vocabulary_uses_the_directory_name(tmp_path, name, lowercase, reason):
    path = google_dir(tmp_path, name, AMBIGUOUS)
    tokenizer = load_with_warning(path, lowercase, reason)
    assert pieces(tokenizer, "Hello") == (["hello"] if lowercase else ["[UNK]"])


def test_explicit_argument_and_tokenizer_config_win_without_warning(tmp_path):
    path = google_dir(tmp_path, "cased_L-2_H-128_A-2", CASED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert BertTokenizer.from_preset(path, lowercase=True).lowercase is True
        with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": True}, f)
        assert BertTokenizer.from_preset(path).lowercase is True
        assert BertTokenizer.from_preset(path, lowercase=False).lowercase is False
