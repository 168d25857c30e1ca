"""Words and their labels -> word pieces and piece labels, packed into BERT rows (TF ops).

A sentence arrives as words (as CoNLL files give them), each with one label id. Every
word is tokenized into WordPiece pieces; the word's first piece carries its label and
later pieces, `[CLS]`, `[SEP]` and `[PAD]` carry `IGNORE_LABEL` (-100), which the
tagger's loss skips (HF run_ner.py's rule; with `label_all_tokens` later pieces get the
`I-` form of the word's tag instead). `word_pieces` does this for a whole batch as flat
arrays, and `pack_pieces` cuts `[start, end)` piece ranges out of them into fixed-length
`[CLS] pieces [SEP] [PAD]...` rows, so the same code makes one truncated row per
sentence (`TaggingPreprocessor.call`) and the overlapping windows of long sentences
(`TaggingPreprocessor.windows`, bounds from `windows.window_bounds`).

Examples:
>>> import tensorflow as tf
>>> from keras_bert_zoo.tasks.tagger.alignment import inside_label_map, to_ragged
>>> inside_label_map(["O", "B-PER", "I-PER", "B-MISC"])  # B-MISC has no I-MISC: kept
[0, 2, 2, 3]
>>> to_ragged([["EU", "rejects"], ["Peter"]], tf.string, "words")[0].row_lengths().numpy()
array([2, 1])
"""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError

__all__ = [
    "IGNORE_LABEL",
    "MODEL_INPUTS",
    "inside_label_map",
    "model_inputs",
    "to_ragged",
    "word_pieces",
    "pack_pieces",
]

IGNORE_LABEL = -100
MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def inside_label_map(label_names):
    """Id of the label later pieces of a word get under `label_all_tokens` (HF run_ner's
    `b_to_i_label`): `B-X` -> `I-X` when `I-X` is a label (BMES: `M-X`), every other label itself."""
    names = list(label_names)
    index = {n: i for i, n in enumerate(names)}
    return [
        index.get("I-" + n[2:], index.get("M-" + n[2:], i)) if n.startswith("B-") else i for i, n in enumerate(names)
    ]


def model_inputs(features):
    """The model's inputs (`token_ids`, `segment_ids`, `padding_mask`) from the layer's outputs."""
    return {k: features[k] for k in MODEL_INPUTS}


def to_ragged(x, dtype, name):
    """Python lists / dense / ragged -> (ragged [batch, (n)] with int64 splits, was_single_sentence)."""
    if isinstance(x, tf.RaggedTensor):
        if x.ragged_rank != 1 or x.shape.rank != 2:
            raise ArgumentTypeError(f"`{name}` must be ragged [batch, (words)], got shape {x.shape}.")
        rt = x
    elif isinstance(x, (tf.Tensor, np.ndarray)) or not isinstance(x, (list, tuple)):
        t = tf.convert_to_tensor(x)
        if t.shape.rank == 1:
            return tf.RaggedTensor.from_tensor(t[None]).with_row_splits_dtype(tf.int64), True
        if t.shape.rank != 2:
            raise ArgumentTypeError(
                f"`{name}` must be [batch, (words)] (ragged) or one sentence [words], got shape {t.shape}."
            )
        rt = tf.RaggedTensor.from_tensor(t)
    else:
        single = len(x) > 0 and all(not isinstance(v, (list, tuple, np.ndarray)) for v in x)
        if single:
            x = [x]
        if dtype == tf.string:
            flat = [w for s in x for w in s]
            if not all(isinstance(w, (str, bytes)) for w in flat):
                bad = next(w for w in flat if not isinstance(w, (str, bytes)))
                raise ArgumentTypeError(f"`{name}` must hold str words, got {type(bad).__name__} {bad!r}.")
            values = tf.constant(flat, dtype=tf.string) if flat else tf.zeros([0], tf.string)
        else:
            flat = [int(v) for s in x for v in s]
            values = tf.constant(flat, dtype=dtype) if flat else tf.zeros([0], dtype)
        rt = tf.RaggedTensor.from_row_lengths(values, tf.constant([len(s) for s in x], tf.int64))
        return rt.with_row_splits_dtype(tf.int64), single
    if rt.dtype != dtype:
        if dtype == tf.string:
            raise ArgumentTypeError(f"`{name}` must be strings (words), got {rt.dtype.name}.")
        if not rt.dtype.is_integer:
            raise ArgumentTypeError(f"`{name}` must be int label ids, got {rt.dtype.name}.")
        rt = tf.cast(rt, dtype)
    return rt.with_row_splits_dtype(tf.int64), False


def word_pieces(tokenizer, words, labels=None, inside=None):
    """Flat piece arrays for a batch, with per-sentence lengths and word starts.

    Args:
        tokenizer: a `BertTokenizer` returning ragged ids.
        words: tf.string ragged `[batch, (words)]`, int64 row splits.
        labels: None or int32 ragged `[batch, (words)]`, one label id per word.
        inside: None (later pieces get `IGNORE_LABEL`) or `inside_label_map(names)`
            (later pieces get the `I-` form of their word's label).

    Returns:
        dict: `piece_ids` int32, `piece_word` (word index in its sentence),
        `piece_first` bool and `piece_label` int32 (None without labels), all
        `[total_pieces]`; `lengths` and `offsets` int64 `[batch]` (pieces per sentence,
        first piece of each sentence); `word_starts` ragged `[batch, (words)]` (each
        word's first piece within its sentence).
    """
    pieces = tokenizer(words.values)  # ragged [num_words, (pieces)]
    if not isinstance(pieces, tf.RaggedTensor):
        raise UsageError("the tokenizer must return ragged ids.")
    pieces = pieces.with_row_splits_dtype(tf.int64)
    # A word with no piece (only characters the normaliser removes) becomes [UNK].
    counts = pieces.row_lengths()
    unk = tokenizer.unk_token_id
    padded = pieces.to_tensor(default_value=unk)
    padded = tf.concat([padded, tf.fill([tf.shape(padded)[0], 1], tf.constant(unk, tf.int32))], 1)
    word_len = tf.maximum(counts, 1)
    pieces = tf.RaggedTensor.from_tensor(padded, lengths=word_len)
    piece_ids = tf.cast(pieces.values, tf.int32)
    word_row = words.value_rowids()  # sentence of each word
    nrows = words.nrows()
    word_index = tf.ragged.range(words.row_lengths()).values  # word index within its sentence
    piece_word = tf.repeat(word_index, word_len)
    piece_first = tf.equal(tf.ragged.range(word_len).values, 0)
    piece_label = None
    if labels is not None:
        label = labels.values
        first = tf.repeat(label, word_len)
        later = tf.fill(tf.shape(first), tf.constant(IGNORE_LABEL, tf.int32))
        if inside is not None:
            inside_ids = tf.gather(tf.constant(inside, tf.int32), tf.maximum(label, 0))
            inside_ids = tf.where(label >= 0, inside_ids, label)
            later = tf.repeat(inside_ids, word_len)
        piece_label = tf.where(piece_first, first, later)
    lengths = tf.math.unsorted_segment_sum(word_len, word_row, nrows)  # pieces per sentence
    offsets = tf.cumsum(lengths, exclusive=True)
    word_start = tf.cumsum(word_len, exclusive=True) - tf.gather(offsets, word_row)
    return {
        "piece_ids": piece_ids,
        "piece_word": piece_word,
        "piece_first": piece_first,
        "piece_label": piece_label,
        "lengths": lengths,
        "offsets": offsets,
        "word_starts": words.with_values(word_start),
    }


def pack_pieces(tokenizer, sequence_length, parts, sentence, starts, ends):
    """`[CLS] pieces[start:end] [SEP] [PAD]...` for each (sentence, start, end).

    Args:
        tokenizer: the `BertTokenizer` (its special token ids).
        sequence_length: int, the rows' length.
        parts: `word_pieces`' output.
        sentence, starts, ends: int64 `[rows]`: each row's sentence and its piece
            range `[start, end)` (at most `sequence_length - 2` pieces).

    Returns:
        dict of int32 `[rows, sequence_length]`: `token_ids`, `segment_ids`,
        `padding_mask`, `word_ids` (-1 off words), `first_piece_mask`, and `labels`
        (`IGNORE_LABEL` off first pieces) when `parts` has labels.
    """
    base = tf.gather(parts["offsets"], sentence)
    index = tf.ragged.range(base + starts, base + ends)  # ragged [rows, (pieces)]
    count = index.nrows()

    def frame(values, left, right, pad, dtype=tf.int32):
        body = index.with_values(tf.cast(tf.gather(values, index.values), dtype))
        edge = tf.RaggedTensor.from_tensor(tf.fill([count, 1], tf.constant(left, dtype)))
        tail = tf.RaggedTensor.from_tensor(tf.fill([count, 1], tf.constant(right, dtype)))
        edge, tail = edge.with_row_splits_dtype(tf.int64), tail.with_row_splits_dtype(tf.int64)
        return tf.concat([edge, body, tail], axis=1).to_tensor(default_value=pad, shape=[None, sequence_length])

    n = tf.cast(ends - starts, tf.int32) + 2
    out = {
        "token_ids": frame(parts["piece_ids"], tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id),
        "segment_ids": tf.zeros([count, sequence_length], tf.int32),
        "padding_mask": tf.sequence_mask(n, sequence_length, dtype=tf.int32),
        "word_ids": frame(parts["piece_word"], -1, -1, -1),
        "first_piece_mask": frame(parts["piece_first"], 0, 0, 0),
    }
    if parts["piece_label"] is not None:
        out["labels"] = frame(parts["piece_label"], IGNORE_LABEL, IGNORE_LABEL, IGNORE_LABEL)
    return out
