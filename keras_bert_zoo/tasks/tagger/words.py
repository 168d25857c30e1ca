"""Raw text -> whitespace-separated words: one rule, in Python and in the graph.

A tagger tags words, and a user's text becomes words by splitting it on whitespace,
exactly Python's `str.split()`: whitespace is `str.isspace` (the same code points as
`re`'s `\\s`), so offsets are in characters, not UTF-8 bytes. `BertTagger.predict_tags`
and `predict_entities` split in Python (`as_words`, `word_spans`); the exported
SavedModel splits in TF ops (`split_words_tf`, with the `python_whitespace()` table),
and the two agree word for word.

Examples:
>>> from keras_bert_zoo.tasks.tagger.words import as_words, word_spans
>>> word_spans("EU  rejects\\u00a0German")
[(0, 2), (4, 11), (12, 18)]
>>> as_words("EU  rejects\\u00a0German"), as_words(["EU", 7])
(['EU', 'rejects', 'German'], ['EU', '7'])
"""

import re

__all__ = ["word_spans", "as_words", "python_whitespace", "split_words_tf"]

_WORD = re.compile(r"\S+")


def word_spans(text):
    """(start, end) character offsets of the whitespace-separated words of `text`."""
    return [(m.start(), m.end()) for m in _WORD.finditer(text)]


def as_words(sentence):
    """A sentence as a list of str words: a str is split on whitespace, a list kept
    (each item as `str`)."""
    if isinstance(sentence, str):
        return [sentence[a:b] for a, b in word_spans(sentence)]
    return [str(w) for w in sentence]


def python_whitespace():
    """Code points Python's `str.split()` and `re`'s `\\s` split on (`str.isspace`)."""
    return [c for c in range(0x110000) if chr(c).isspace()]


def split_words_tf(text, whitespace):
    """`text` `tf.string [batch]` -> ragged `[batch, (words)]` words and their character
    starts and ends (int64, end exclusive), in TF ops.

    Args:
        text: tf.string `[batch]`.
        whitespace: int32 tensor of the code points that separate words
            (`python_whitespace()`; a constant the caller builds once).
    """
    import tensorflow as tf

    chars, char_bytes = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
    chars = chars.with_row_splits_dtype(tf.int64)
    codes, byte_at = chars.values, char_bytes.values
    rows = chars.value_rowids()
    pos = tf.range(tf.size(codes, out_type=tf.int64)) - tf.gather(chars.row_splits, rows)
    last = pos == tf.gather(chars.row_lengths(), rows) - 1
    space = tf.reduce_any(tf.equal(codes[:, None], whitespace[None, :]), axis=1)
    # (The shifts are written concat-then-slice so that they also hold for zero characters.)
    after_space = tf.concat([[True], space], 0)[:-1] | (pos == 0)
    before_space = tf.concat([space, [True]], 0)[1:] | last
    begins, ends = ~space & after_space, ~space & before_space
    text_bytes = tf.cast(tf.strings.length(text, unit="BYTE"), tf.int64)
    byte_end = tf.where(last, tf.gather(text_bytes, rows), tf.concat([byte_at, [0]], 0)[1:])
    byte_start = tf.boolean_mask(byte_at, begins)
    word_rows = tf.boolean_mask(rows, begins)
    values = tf.strings.substr(
        tf.gather(text, word_rows), byte_start, tf.boolean_mask(byte_end, ends) - byte_start, unit="BYTE"
    )
    nrows = tf.shape(text, out_type=tf.int64)[0]

    def ragged(v):
        return tf.RaggedTensor.from_value_rowids(v, word_rows, nrows=nrows)

    return ragged(values), ragged(tf.boolean_mask(pos, begins)), ragged(tf.boolean_mask(pos, ends) + 1)
