"""A tagger over whole files: windows in, one tag (and its logits) per input word out.

`predict_words` makes the windows of every sentence (`windows.make_windows`), runs
the model over them (`window_logits`; a Keras model runs bucketed by length, so short
sentences do not pay for the padding of long ones) and maps the window-level
predictions back to one tag per word (`windows.merge_windows`).

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.tasks.tagger.windows import TaggingWindows
>>> from keras_bert_zoo.tasks.tagger.predict import window_logits
>>> windows = TaggingWindows(features={"padding_mask": np.ones([3, 4], np.int32)}, labels=None,
...                          word_ids=np.zeros([3, 4], np.int32), first_piece_mask=None,
...                          sentence_ids=np.arange(3), num_words=[1, 1, 1])
>>> window_logits(lambda batch: batch["padding_mask"] * 2, windows, batch_size=2).shape
(3, 4)
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.keras_compat import distribute_strategy
from keras_bert_zoo.preprocessing import bucketing
from keras_bert_zoo.preprocessing.packed_predict import check_predict_batching, predict_packed, predict_step, step_width
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.windows import example_sentences, make_windows, merge_windows

__all__ = ["predict_words", "window_logits"]


def predict_words(
    model_or_logits_fn,
    examples,
    preprocessor=None,
    label_names=None,
    batch_size=64,
    return_logits=False,
    batching="auto",
):
    """One tag per input word, for every word of every sentence (long ones in windows).

    Args:
        model_or_logits_fn: a Keras model taking `token_ids`/`segment_ids`/
            `padding_mask` and returning token logits `[batch, seq, num_labels]` (or a
            dict with `"logits"`), or any callable `fn(features) -> logits` (or argmax
            ids `[batch, seq]`).
        examples: `TaggedExamples` or a list of sentences (lists of str words).
        preprocessor: `TaggingPreprocessor`; default the model's `preprocessor`.
        label_names: tag names in id order; default the model's `label_names`, else
            the examples', else the preprocessor's.
        batch_size: windows per model call.
        return_logits: also return each word's logits (`[num_words, num_labels]` per
            sentence), from the same window as its tag.
        batching: `"auto"` (windows sorted by length) or `"packed"` (see `window_logits`).

    Returns:
        list of lists of tag strings, `len(result[i]) == len(words[i])` (and the
        per-word logits when `return_logits`).
    """
    words, _, example_names = example_sentences(examples)
    preprocessor = preprocessor or getattr(model_or_logits_fn, "preprocessor", None)
    if not isinstance(preprocessor, TaggingPreprocessor):
        raise UsageError("give a TaggingPreprocessor (the model has none attached).")
    names = label_names or getattr(model_or_logits_fn, "label_names", None) or example_names or preprocessor.label_names
    if not names:
        raise UsageError("give `label_names` (the tag of each class id).")
    windows = make_windows(words, preprocessor, with_labels=False)
    predictions = window_logits(model_or_logits_fn, windows, batch_size, batching=batching)
    if return_logits and predictions.ndim != 3:
        raise UsageError("return_logits=True needs a model returning logits [batch, seq, num_labels].")
    ids = predictions.argmax(-1) if predictions.ndim == 3 else predictions
    per_word = merge_windows(ids, windows.word_ids, windows.sentence_ids, windows.first_piece_mask, windows.num_words)
    tags = [[names[int(i)] for i in row] for row in per_word]
    if return_logits:
        logits = merge_windows(
            predictions, windows.word_ids, windows.sentence_ids, windows.first_piece_mask, windows.num_words
        )
        return tags, logits
    return tags


def window_logits(model_or_logits_fn, windows, batch_size=64, batching="auto"):
    """Runs a model (or `fn(features)`) over `TaggingWindows`; returns numpy predictions.

    `batching` (a Keras model): `"auto"` runs the windows sorted by length, each batch cut
    to its longest (`_bucketed_predict`); `"packed"` packs every `batch_size` windows into
    rows of `TaggingPreprocessor.PACK_WIDTH` pieces (`packed_predict.predict_packed`).
    The default was the faster on CoNLL-2003 (docs/benchmarks.md).
    """
    check_predict_batching(batching)
    if len(windows) == 0:
        return np.zeros([0, windows.word_ids.shape[1]], np.int64)
    if batching == "packed":
        if not isinstance(model_or_logits_fn, keras.Model):
            raise UsageError('batching="packed" needs a Keras model (a callable gets the windows as they are).')
        width = min(TaggingPreprocessor.PACK_WIDTH, windows.word_ids.shape[1])
        return _logits_of(predict_packed(model_or_logits_fn, dict(windows.features), batch_size, width))
    if isinstance(model_or_logits_fn, keras.Model):
        return _bucketed_predict(model_or_logits_fn, windows, batch_size)
    parts = []
    for start in range(0, len(windows), batch_size):
        batch = {k: tf.constant(v[start : start + batch_size]) for k, v in windows.features.items()}
        out = model_or_logits_fn(batch)
        if isinstance(out, dict):
            out = out["logits"]
        parts.append(np.asarray(keras.ops.convert_to_numpy(out)))
    return np.concatenate(parts)


def _bucketed_predict(model, windows, batch_size):
    """The model over windows sorted by length, each batch cut to its own longest window.

    Real sentences are mostly far shorter than `sequence_length` (CoNLL-2003: ~25 pieces
    of 128), and every token's cost is paid for its padding too: sorted batches of
    `batch_size` differ in length by a position or so, so cut to their longest they
    carry almost no padding (CoNLL testa: 1.07x its real tokens, against 1.46x in the
    16/32/64 buckets this used before). One shape-generic trace of Keras' predict step
    serves every width (`Task.trace_predict`); positions beyond a window's batch
    width come back as zeros, which no word reads.
    """
    features = dict(windows.features)
    width = features["padding_mask"].shape[1]
    lengths = np.maximum((features["padding_mask"] > 0).sum(axis=1), 1)
    if distribute_strategy(model) is not None or tf.distribute.has_strategy():
        return _bucketed_predict_under_strategy(model, windows, batch_size)
    spec = {k: tf.TensorSpec([None, None], tf.as_dtype(v.dtype)) for k, v in features.items()}
    trace = getattr(model, "trace_predict", None)
    if trace is not None:
        trace(spec)
    order = np.argsort(lengths, kind="stable")
    out = None
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        cut = step_width(model, width, int(lengths[rows].max()))
        part = _logits_of(predict_step(model, {k: tf.constant(v[rows, :cut]) for k, v in features.items()}))
        if out is None:
            out = np.zeros((len(order), width) + part.shape[2:], part.dtype)
        out[rows, :cut] = part
    return out


def _logits_of(part):
    if isinstance(part, dict):
        if "logits" not in part:
            raise UsageError(f"the model returns {sorted(part)}; expected token logits or a dict with 'logits'.")
        part = part["logits"]
    return np.asarray(part)


def _bucketed_predict_under_strategy(model, windows, batch_size):
    """`model.predict` per bucket of coarse widths (a strategy distributes Keras' own batches)."""
    features = dict(windows.features)
    n, width = features["padding_mask"].shape
    out = None
    for rows, cut, ds in bucketing.in_memory_buckets(features, batch_size):
        part = _logits_of(model.predict(ds, verbose=0))
        if out is None:
            out = np.zeros((n, width) + part.shape[2:], part.dtype)
        out[rows, :cut] = part
    return out
