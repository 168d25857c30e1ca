"""Raw text -> words, as BERT's basic tokenizer splits it: one rule, in Python and in the graph.

A tagger tags words, and a user's raw string becomes words as BERT's `BasicTokenizer`
(and HF's `BertPreTokenizer`) splits text before WordPiece, so that a Chinese sentence,
which has no spaces, is tagged character by character, as the Chinese NER sets are:

- whitespace separates words (Python's `str.isspace`, the code points of `re`'s `\\s`);
- each CJK ideograph is a word (BERT's CJK blocks,
  `keras_bert_zoo.preprocessing.normalization.CJK`);
- each punctuation character is a word (BERT's rule: ASCII punctuation, `$+<=>^`|~`
  included, and every Unicode `P*` character), so "Berlin." is "Berlin" and ".";
- every other run of characters is a word: Latin letters, digits ("2024"), accented
  words ("café"), kana, emoji.

Offsets are in characters (code points), not UTF-8 bytes: `text[start:end]` is the word.
`BertTagger.predict_tags` and `predict_entities` split in Python (`as_words`,
`word_spans`); the exported SavedModel splits in TF ops (`split_words_tf`, with the
`word_class_table()` constants), and the two agree word for word. A list of words is
kept as given: pass one to keep "U.S." or "Jean-Pierre" a single word, as CoNLL-2003
tokenizes them.

Examples:
>>> from keras_bert_zoo.tasks.tagger.words import as_words, word_spans
>>> as_words("我在北京见到了Angela Merkel。"), word_spans("EU  rejects\\u00a0German call.")
(['我', '在', '北', '京', '见', '到', '了', 'Angela', 'Merkel', '。'], [(0, 2), (4, 11), (12, 18), (19, 23), (23, 24)])
>>> as_words("GDP增长5.2%"), as_words(["EU", 7])
(['GDP', '增', '长', '5', '.', '2', '%'], ['EU', '7'])
"""

import functools
import re
import unicodedata

__all__ = [
    "WORD",
    "SPACE",
    "PUNCTUATION",
    "IDEOGRAPH",
    "word_spans",
    "as_words",
    "python_whitespace",
    "character_class",
    "word_class_table",
    "split_words_tf",
]

# A character's class: part of a longer word, a separator, or a word by itself.
WORD, SPACE, PUNCTUATION, IDEOGRAPH = 0, 1, 2, 3


def _cjk_ranges():
    """BERT's CJK blocks as (first, last) code points, read from the tokenizer's own RE2 class."""
    from keras_bert_zoo.preprocessing.normalization import CJK

    return [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\\x\{([0-9A-Fa-f]+)\}-\\x\{([0-9A-Fa-f]+)\}", CJK)]


def _is_bert_punctuation(code):
    """BERT's `_is_punctuation`: every non-letter, non-digit printable ASCII character, and Unicode P*."""
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(chr(code)).startswith("P")


def character_class(code, cjk=None):
    """`SPACE`, `IDEOGRAPH`, `PUNCTUATION` or `WORD` for one code point.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.words import character_class
    >>> [character_class(ord(c)) for c in "a 北。-"]
    [0, 1, 3, 2, 2]
    """
    if chr(code).isspace():
        return SPACE
    if any(a <= code <= b for a, b in (cjk if cjk is not None else _cjk_ranges())):
        return IDEOGRAPH
    return PUNCTUATION if _is_bert_punctuation(code) else WORD


@functools.cache
def word_class_table():
    """Every code point's class (`character_class`) as runs: `(starts, classes)`, two lists of
    int; code point `c` has `classes[i]` for the last `starts[i] <= c`. The one table both
    forms of the split read (built once, in about half a second)."""
    import numpy as np

    category = unicodedata.category
    kinds = np.full(0x110000, WORD, np.int8)
    kinds[[c for c in range(0x110000) if category(chr(c))[0] == "P"]] = PUNCTUATION
    for a, b in ((33, 47), (58, 64), (91, 96), (123, 126)):  # ASCII symbols BERT counts as punctuation
        kinds[a : b + 1] = PUNCTUATION
    for a, b in _cjk_ranges():
        kinds[a : b + 1] = IDEOGRAPH
    kinds[python_whitespace()] = SPACE
    starts = [0] + (np.flatnonzero(kinds[1:] != kinds[:-1]) + 1).tolist()
    return starts, kinds[starts].tolist()


def _class_set(kinds):
    """A regex character class body of the code points whose class is in `kinds`."""
    starts, classes = word_class_table()
    ends = starts[1:] + [0x110000]
    return "".join(f"\\U{a:08x}-\\U{b - 1:08x}" for a, b, k in zip(starts, ends, classes, strict=True) if k in kinds)


@functools.cache
def _word_pattern():
    single = _class_set((PUNCTUATION, IDEOGRAPH))
    return re.compile(f"[{single}]|[^{_class_set((SPACE,))}{single}]+")


def word_spans(text):
    """(start, end) character offsets of the words of `text` (BERT's split, module docstring)."""
    return [m.span() for m in _word_pattern().finditer(text)]


def as_words(sentence):
    """A sentence as a list of str words: a str is split as BERT splits it (module docstring),
    a list kept (each item as `str`)."""
    if isinstance(sentence, str):
        return [sentence[a:b] for a, b in word_spans(sentence)]
    return [str(w) for w in sentence]


@functools.cache
def python_whitespace():
    """Code points Python's `str.split()` and `re`'s `\\s` split on (`str.isspace`)."""
    return [c for c in range(0x110000) if chr(c).isspace()]


def split_words_tf(text, table):
    """`text` `tf.string [batch]` -> ragged `[batch, (words)]` words and their character
    starts and ends (int64, end exclusive), in TF ops: the split of `word_spans`.

    Args:
        text: tf.string `[batch]`.
        table: `(starts, classes)`, int32 tensors of `word_class_table()` (constants the
            caller builds once).
    """
    import tensorflow as tf

    starts_table, classes_table = table
    chars, char_bytes = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
    chars = chars.with_row_splits_dtype(tf.int64)
    codes, byte_at = chars.values, char_bytes.values
    rows = chars.value_rowids()
    pos = tf.range(tf.size(codes, out_type=tf.int64)) - tf.gather(chars.row_splits, rows)
    first, last = pos == 0, pos == tf.gather(chars.row_lengths(), rows) - 1
    kind = tf.gather(classes_table, tf.searchsorted(starts_table, codes, side="right") - 1)
    space, single = tf.equal(kind, SPACE), kind >= PUNCTUATION
    # A word starts after a space, at a punctuation mark or ideograph, or after one; it
    # ends likewise. (The shifts are written concat-then-slice so that they also hold for
    # zero characters.)
    breaks = space | single
    begins = ~space & (first | single | tf.concat([[True], breaks], 0)[:-1])
    ends = ~space & (last | single | tf.concat([breaks, [True]], 0)[1:])
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
