"""The word split on text without punctuation or CJK: Python (`as_words`, `word_spans`) and in-graph
(`split_words_tf`) forms agree with `str.split()` on every whitespace code point."""

import doctest

import tensorflow as tf

from keras_bert_zoo.tasks.tagger import words
from keras_bert_zoo.tasks.tagger.words import as_words, python_whitespace, split_words_tf, word_class_table, word_spans

SPACES = "".join(map(chr, python_whitespace()))
TEXTS = ["", "   ", "EU rejects German call", f"a{SPACES}b c\u200bd", "  café\u3000naïve \u00e9t\u00e9 ", "x" * 5]


def test_every_form_splits_like_str_split():
    assert set(SPACES) == {chr(c) for c in range(0x110000) if chr(c).split() == []}
    tokens, starts, ends = split_words_tf(
        tf.constant(TEXTS), tuple(tf.constant(x, tf.int32) for x in word_class_table())
    )
    for i, text in enumerate(TEXTS):
        assert as_words(text) == text.split()
        assert [text[a:b] for a, b in word_spans(text)] == text.split()
        assert [w.decode() for w in tokens[i].numpy()] == text.split()
        assert list(zip(starts[i].numpy().tolist(), ends[i].numpy().tolist(), strict=True)) == word_spans(text)


def test_docstring_examples_run():
    result = doctest.testmod(words)
    assert result.attempted >= 2 and result.failed == 0
