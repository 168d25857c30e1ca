"""Windows over long sentences: every word read, none cut, with one prediction per word.

A sentence longer than `sequence_length - 2` pieces is cut into overlapping windows of
pieces (starts `stride` pieces apart, snapped back to the start of a word), in TF ops
(`window_bounds`, used by `TaggingPreprocessor.windows`); `merge_windows` (numpy) and
`merge_windows_tf` (in the graph, for serving) then give every word exactly one
prediction, from the window where it has the most context (`min(left, right) + 0.01 *
window length`, BERT's run_squad.py `_check_is_max_context`).

`make_windows` runs the windowing once per file in big batches and keeps the int32
windows in memory (`TaggingWindows`): windows multiply examples, so their number is
only known after tokenizing, and a known count is what learning-rate schedules (steps
per epoch), Keras progress bars and `drop_remainder` need.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.tasks.tagger.windows import merge_windows
>>> word_ids = np.array([[-1, 0, 1, 1, -1], [-1, 1, 2, -1, -1]])  # sentence 0 in two windows
>>> [m.tolist() for m in merge_windows(word_ids * 10, word_ids, [0, 0], num_words=[3])]
[[0, 10, 20]]
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.preprocessing.base import windows_runner
from keras_bert_zoo.preprocessing.max_context import max_context_score
from keras_bert_zoo.tasks.tagger.alignment import MODEL_INPUTS

__all__ = ["window_bounds", "TaggingWindows", "example_sentences", "make_windows", "merge_windows", "merge_windows_tf"]

_BIG = 2**40  # past the end of any sentence: "no word start here"


def window_bounds(parts, window, stride):
    """(sentence, start, end) int64 of every window, sentence-major, in piece coordinates.

    Args:
        parts: `alignment.word_pieces`' output (`lengths`, `word_starts`).
        window: pieces per window (`sequence_length - 2`).
        stride: pieces between window starts.

    A window is `[start, end)` of at most `window` pieces. The first starts
    at 0; the next one `stride` pieces later, moved back to the start of the word
    there (or forward to the next word start if that does not advance; a word
    longer than the window is split where it must be). A window's end is moved
    back to a word start when that does not empty it, so words are not cut. Each
    window starts at or before the previous one's end, so every piece (every
    word's first piece) is in some window; the last window ends the sentence.
    """
    n = parts["lengths"]
    batch = tf.shape(n)[0]
    starts = parts["word_starts"].to_tensor(default_value=_BIG)
    starts = tf.concat([starts, tf.fill([batch, 1], tf.constant(_BIG, tf.int64))], 1)

    def floor_start(x):  # the last word start <= x (-1 if none)
        i = tf.searchsorted(starts, x[:, None], side="right")[:, 0] - 1
        return tf.where(i >= 0, tf.gather(starts, tf.maximum(i, 0), batch_dims=1), -1)

    def next_start(x):  # the first word start > x (_BIG if none)
        i = tf.searchsorted(starts, x[:, None], side="right")[:, 0]
        return tf.gather(starts, i, batch_dims=1)

    def body(i, s, active, ta_s, ta_e, ta_a):
        e = tf.minimum(s + window, n)
        snapped = floor_start(e)
        e = tf.where((e < n) & (snapped > s), snapped, e)
        ta_s, ta_e, ta_a = ta_s.write(i, s), ta_e.write(i, e), ta_a.write(i, active)
        target = s + stride
        back, forward = floor_start(target), next_start(s)
        following = tf.where(back > s, back, tf.where(forward <= e, forward, target))
        active = active & (e < n)
        return i + 1, tf.where(active, following, s), active, ta_s, ta_e, ta_a

    def cond(i, s, active, *_):
        return (i == 0) | tf.reduce_any(active)

    arrays = [
        tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])
        for dtype in (tf.int64, tf.int64, tf.bool)
    ]
    init = (tf.constant(0), tf.zeros_like(n), tf.ones_like(n, dtype=tf.bool), *arrays)
    _, _, _, ta_s, ta_e, ta_a = tf.while_loop(cond, body, init)
    mask = tf.transpose(ta_a.stack())  # [batch, rounds]
    window_starts = tf.boolean_mask(tf.transpose(ta_s.stack()), mask)
    window_ends = tf.boolean_mask(tf.transpose(ta_e.stack()), mask)
    sentence = tf.where(mask)[:, 0]
    return sentence, window_starts, window_ends


# --- host side: whole files ------------------------------------------------------------------
@dataclasses.dataclass
class TaggingWindows:
    """All windows of a set of sentences, as int32 numpy arrays `[num_windows, sequence_length]`.

    Attributes:
        features: dict `token_ids`, `segment_ids`, `padding_mask` (the model's inputs).
        labels: piece labels (`IGNORE_LABEL` where none), or None without tags.
        word_ids: word index of each position, -1 on specials/padding.
        first_piece_mask: 1 on the first piece of each word.
        sentence_ids: `[num_windows]`, the sentence each window comes from.
        num_words: words per sentence.
    """

    features: dict
    labels: np.ndarray
    word_ids: np.ndarray
    first_piece_mask: np.ndarray
    sentence_ids: np.ndarray
    num_words: list

    def __len__(self):
        return len(self.sentence_ids)

    def info(self):
        return {"word_ids": self.word_ids, "first_piece_mask": self.first_piece_mask, "sentence_ids": self.sentence_ids}


def example_sentences(examples):
    """(words, tags or None, label names or None) from `TaggedExamples` or a list of word lists."""
    if hasattr(examples, "words"):
        return examples.words, examples.tags, examples.label_names
    words = [list(s) for s in examples]
    if words and not all(all(isinstance(w, str) for w in s) for s in words):
        raise ArgumentTypeError("give `TaggedExamples` or a list of sentences, each a list of str words.")
    return words, None, None


def make_windows(examples, preprocessor, label_names=None, with_labels=None, chunk_size=1024):
    """Windows of every sentence (TF ops, in chunks), kept as int32 numpy arrays.

    Args:
        examples: `TaggedExamples`, or a list of sentences (lists of str words).
        preprocessor: `TaggingPreprocessor`.
        label_names: the model's labels, in id order (default: the examples'). Must
            equal the preprocessor's `label_names` when it has them.
        with_labels: compute piece labels (default: when the examples have tags).
        chunk_size: sentences per TF call.

    Returns:
        `TaggingWindows`.
    """
    words, tags, names = example_sentences(examples)
    with_labels = tags is not None if with_labels is None else bool(with_labels)
    if with_labels and tags is None:
        raise UsageError("with_labels=True needs tagged examples (TaggedExamples).")
    names = list(label_names) if label_names is not None else names
    if with_labels:
        if preprocessor.label_names is not None and list(preprocessor.label_names) != list(names):
            raise InvalidInputError(
                f"the examples' label names {names} differ from the preprocessor's "
                f"{preprocessor.label_names}; read the data with label_names=the model's labels."
            )
        index = {n: i for i, n in enumerate(names)}
        ids = []
        for k, sentence in enumerate(tags):
            missing = [t for t in sentence if t not in index]
            if missing:
                raise InvalidInputError(f"sentence {k}: tag {missing[0]!r} is not among the model's labels {names}.")
            ids.append([index[t] for t in sentence])
    fn = windows_runner(preprocessor, with_labels, num_chunks=-(-len(words) // chunk_size))
    outputs, sentence_ids = [], []
    for start in range(0, max(len(words), 1), chunk_size):
        chunk = words[start : start + chunk_size]
        if not chunk:
            break
        lengths = tf.constant([len(s) for s in chunk], tf.int64)
        flat = [w for s in chunk for w in s]
        w = tf.RaggedTensor.from_row_lengths(
            tf.constant(flat, tf.string) if flat else tf.zeros([0], tf.string), lengths
        )
        if with_labels:
            flat_ids = [i for s in ids[start : start + chunk_size] for i in s]
            y = tf.RaggedTensor.from_row_lengths(
                tf.constant(flat_ids, tf.int32) if flat_ids else tf.zeros([0], tf.int32), lengths
            )
            out = fn(w, y)
        else:
            out = fn(w)
        out = {k: v.numpy() for k, v in out.items()}
        sentence_ids.append(out.pop("sentence_ids") + start)
        outputs.append(out)
    length = preprocessor.sequence_length
    if outputs:
        merged = {k: np.concatenate([o[k] for o in outputs]) for k in outputs[0]}
        sentence_ids = np.concatenate(sentence_ids).astype(np.int32)
    else:
        keys = list(MODEL_INPUTS) + ["word_ids", "first_piece_mask"] + (["labels"] if with_labels else [])
        merged = {k: np.zeros([0, length], np.int32) for k in keys}
        sentence_ids = np.zeros([0], np.int32)
    return TaggingWindows(
        features={k: merged[k] for k in MODEL_INPUTS},
        labels=merged.get("labels"),
        word_ids=merged["word_ids"],
        first_piece_mask=merged["first_piece_mask"],
        sentence_ids=sentence_ids,
        num_words=[len(s) for s in words],
    )


def merge_windows(predictions, word_ids, sentence_ids, first_piece_mask=None, num_words=None):
    """One prediction per word from window-level predictions (max-context rule).

    Each word is read at its first piece in the window where that piece has the most
    context: score `min(pieces to its left, pieces to its right) + 0.01 * pieces in the
    window`, the earliest window on ties (run_squad.py `_check_is_max_context`).

    Args:
        predictions: `[num_windows, seq]` (e.g. argmax ids) or `[num_windows, seq, ...]`
            (e.g. logits); any array-like.
        word_ids: int `[num_windows, seq]`, -1 off words (from the preprocessor).
        sentence_ids: int `[num_windows]`.
        first_piece_mask: int `[num_windows, seq]`; None derives it from `word_ids`
            (a position whose word differs from the previous position's).
        num_words: words per sentence; checks every word gets exactly one
            prediction and fixes the number of sentences (else max sentence id + 1).

    Returns:
        list over sentences of numpy arrays `[num_words, ...]`, word order.
    """
    predictions = np.asarray(predictions)
    word_ids = np.asarray(word_ids).astype(np.int64)
    sentence_ids = np.asarray(sentence_ids).astype(np.int64)
    if word_ids.ndim != 2 or predictions.shape[:2] != word_ids.shape or sentence_ids.shape != word_ids.shape[:1]:
        raise UsageError(
            f"predictions {predictions.shape[:2]}, word_ids {word_ids.shape} and sentence_ids "
            f"{sentence_ids.shape} must be [windows, seq], [windows, seq] and [windows]."
        )
    valid = word_ids >= 0
    if first_piece_mask is None:
        previous = np.concatenate([np.full((word_ids.shape[0], 1), -1), word_ids[:, :-1]], axis=1)
        first = valid & (word_ids != previous)
    else:
        first = valid & (np.asarray(first_piece_mask) != 0)
    pieces = valid.sum(axis=1)  # pieces per window; they sit at positions 1..pieces
    rows, cols = np.nonzero(first)
    left = cols - 1
    right = pieces[rows] - 1 - left
    score = max_context_score(left, right, pieces[rows])
    sentence, word = sentence_ids[rows], word_ids[rows, cols]
    order = np.lexsort((rows, -score, word, sentence))  # best window first in each (sentence, word)
    sentence, word, rows, cols = sentence[order], word[order], rows[order], cols[order]
    keep = np.ones(len(order), bool)
    keep[1:] = (sentence[1:] != sentence[:-1]) | (word[1:] != word[:-1])
    sentence, word, rows, cols = sentence[keep], word[keep], rows[keep], cols[keep]
    if num_words is not None:
        num_sentences = len(num_words)
    else:
        num_sentences = int(sentence_ids.max()) + 1 if len(sentence_ids) else 0
    bounds = np.searchsorted(sentence, np.arange(num_sentences + 1))
    out = []
    for s in range(num_sentences):
        lo, hi = bounds[s], bounds[s + 1]
        got = word[lo:hi]
        if num_words is not None and (hi - lo != num_words[s] or not np.array_equal(got, np.arange(num_words[s]))):
            missing = sorted(set(range(num_words[s])) - set(got.tolist()))
            raise UsageError(
                f"sentence {s}: {num_words[s]} words but predictions for {hi - lo} "
                f"(missing words {missing[:5]}); were the windows made from these sentences?"
            )
        out.append(predictions[rows[lo:hi], cols[lo:hi]])
    return out


def merge_windows_tf(predictions, word_ids, sentence_ids, num_words, first_piece_mask=None):
    """`merge_windows` in TensorFlow ops (for `tf.function` and SavedModel serving).

    Args:
        predictions: `[num_windows, seq]` or `[num_windows, seq, ...]` tensor.
        word_ids, sentence_ids, first_piece_mask: as `merge_windows`.
        num_words: int `[num_sentences]`, words per sentence (e.g. `words.row_lengths()`).

    Returns:
        `tf.RaggedTensor` `[num_sentences, (words), ...]`: one prediction per word, from
        the same window and position as `merge_windows` picks.
    """
    word_ids = tf.cast(word_ids, tf.int64)
    sentence_ids = tf.cast(sentence_ids, tf.int64)
    num_words = tf.cast(num_words, tf.int64)
    valid = word_ids >= 0
    if first_piece_mask is None:
        previous = tf.concat([-tf.ones_like(word_ids[:, :1]), word_ids[:, :-1]], axis=1)
        first = valid & tf.not_equal(word_ids, previous)
    else:
        first = valid & tf.not_equal(tf.cast(first_piece_mask, tf.int64), 0)
    pieces = tf.reduce_sum(tf.cast(valid, tf.int64), axis=1)
    where = tf.where(first)  # row-major: earlier windows first
    rows, cols = where[:, 0], where[:, 1]
    n = tf.gather(pieces, rows)
    left = cols - 1
    score = max_context_score(left, n - 1 - left, n)
    offsets = tf.cumsum(num_words, exclusive=True)
    segment = tf.gather(offsets, tf.gather(sentence_ids, rows)) + tf.gather_nd(word_ids, where)
    total = tf.reduce_sum(num_words)
    best = tf.math.unsorted_segment_max(score, segment, total)
    count = tf.shape(rows, out_type=tf.int64)[0]
    order = tf.range(count)
    pick = tf.math.unsorted_segment_min(tf.where(score >= tf.gather(best, segment), order, count), segment, total)
    tf.debugging.assert_less(pick, count, message="a word has no prediction in any window")
    values = tf.gather_nd(predictions, tf.gather(where, pick))
    return tf.RaggedTensor.from_row_lengths(values, num_words)
