"""Length bucketing: batches of similar-length examples, padded only to their bucket.

Most GLUE sentences are far shorter than 128 tokens (SST-2's median is ~13), so
padding every batch to 128 spends most of the compute on `[PAD]`. Bucketing pads a
batch to the smallest bucket length that holds its longest example. A handful of
fixed bucket lengths (not "the batch's max") keeps the set of shapes small, so
`tf.function` / XLA compile a few programs instead of one per batch.

Examples:
>>> import tensorflow as tf
>>> from keras_bert_zoo.preprocessing import bucketing
>>> bucketing.default_boundaries(128)
[16, 32, 64, 96, 128]
>>> batch = {"token_ids": tf.ones((2, 128), tf.int32),
...          "padding_mask": tf.constant([[1] * 10 + [0] * 118, [1] * 20 + [0] * 108])}
>>> bucketing.trim_batch(batch, [16, 32, 128])["token_ids"].shape
TensorShape([2, 32])
"""

import numpy as np
import tensorflow as tf

__all__ = [
    "map_as_written",
    "finish_in_memory",
    "in_memory_buckets",
    "default_boundaries",
    "fine_boundaries",
    "trim_example",
    "bucket_width",
    "trim_batch",
    "bucket_by_length",
    "with_known_cardinality",
]


def default_boundaries(sequence_length):
    """Bucket lengths up to `sequence_length`: 16, 32, 64, then steps of 32."""
    lengths = [b for b in (16, 32, 64) if b < sequence_length]
    b = 96
    while b < sequence_length:
        lengths.append(b)
        b += 32
    return lengths + [int(sequence_length)]


def fine_boundaries(sequence_length, step=8):
    """Bucket lengths every `step` tokens up to `sequence_length`: for training batches
    grouped by length (`bucket_by_length`), whose width then exceeds their longest
    example by less than `step`. Many widths cost nothing extra without XLA: after a
    few shapes `tf.function` traces one shape-generic program (`reduce_retracing`).

    >>> from keras_bert_zoo.preprocessing.bucketing import fine_boundaries
    >>> fine_boundaries(40)
    [8, 16, 24, 32, 40]
    """
    return list(range(step, int(sequence_length), step)) + [int(sequence_length)]


def _length(features):
    return tf.reduce_sum(tf.cast(features["padding_mask"], tf.int32), axis=-1)


def trim_example(features, *rest):
    """Cuts one example's padded features `[seq]` to its real length."""
    n = _length(features)
    trimmed = {k: v[:n] for k, v in features.items()}
    return (trimmed, *rest) if rest else trimmed


def bucket_width(longest, boundaries):
    """The smallest of `boundaries` >= `longest` (the largest when none is), an int32 scalar."""
    bounds = tf.constant(sorted(boundaries), tf.int32)
    return tf.gather(bounds, tf.minimum(tf.searchsorted(bounds, [tf.cast(longest, tf.int32)])[0], len(boundaries) - 1))


def trim_batch(features, boundaries):
    """Cuts a padded batch `[batch, ..., seq]` to the smallest bucket length >= its longest example."""
    width = bucket_width(tf.reduce_max(_length(features)), boundaries)
    return {k: v[..., :width] for k, v in features.items()}


def bucket_by_length(ds, batch_size, boundaries, padding_values=None, length=None):
    """Groups unbatched, trimmed `(features, ...)` elements into padded batches by length.

    Args:
        ds: `tf.data.Dataset` of `(features, label)` with 1-D features of varying length.
        batch_size: int, examples per batch (every bucket).
        boundaries: sorted bucket lengths; the last must be >= the longest example.
        padding_values: structure of `ds`'s elements with the value each is padded
            with (default 0 everywhere), e.g. an ignored label for per-token labels.
        length: `features -> int32 scalar`, an example's length (default: the sum of
            its `padding_mask`; `[num_choices, seq]` examples need their longest row).
    """
    boundaries = sorted(int(b) for b in boundaries)
    measure = length or _length

    def element_length(features, *rest):
        return measure(features)

    # bucket_by_sequence_length puts length L in bucket i when b[i-1] <= L < b[i] and
    # pads to b[i] - 1, hence the +1.
    return ds.bucket_by_sequence_length(
        element_length_func=element_length,
        bucket_boundaries=[b + 1 for b in boundaries[:-1]] + [boundaries[-1] + 1],
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        padding_values=padding_values,
        pad_to_bucket_boundary=True,
        drop_remainder=False,
    )


def with_known_cardinality(ds):
    """Counts the batches once and records the count on the dataset.

    With bucketing, the number of batches per epoch is fixed (each bucket holds the
    same examples every epoch, only their order changes) but tf.data cannot know it;
    Keras then guesses it from the first epoch and its progress bar and the learning
    rate schedule have no total. One pass over the (cached) data gives the count.

    Returns:
        `(dataset, num_batches)`.
    """
    known = int(ds.cardinality())
    if known >= 0:  # already counted (`batch_raw` does)
        return ds, known
    n = int(ds.reduce(0, lambda count, _: count + 1))
    return ds.apply(tf.data.experimental.assert_cardinality(n)), n


_PREFETCH_BATCHES = 2  # a batch in flight while the step runs; the pipelines only slice arrays


def map_as_written(ds, fn, parallel=False):
    """`ds.map(fn)` with `fn` run as written, not converted by autograph.

    The functions these pipelines map are TF ops whose Python `if`s test settings, never
    tensors, so autograph has nothing to convert; converting one still parses and rewrites
    its source the first time: the first `batch_raw_sorted` of a process on the 872 SST-2 dev
    sentences took 0.44 s, 0.34 s of it autograph on `cut_batch` (0.11 s without; cProfile).
    """
    fn = tf.autograph.experimental.do_not_convert(fn)
    return ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE) if parallel else ds.map(fn)


def finish_in_memory(ds):
    """The last step of every pipeline over in-memory examples: a fixed prefetch, with
    tf.data's autotuning off.

    These pipelines only slice, cut and pad arrays already tokenized, so autotuning has
    nothing to tune, and its background thread can hold the iterator's teardown for
    seconds after the last batch: on 2 cores (TF 2.21) `predict` of MiniLM on SST-2 dev
    took 2.7 s or 5.2 s at random, the extra 2.0-2.5 s all spent between the last batch
    and the call's return, and never so with autotuning off (docs/decisions.md, "teardown_wait").
    Keras builds a new iterator for each `evaluate`, `predict` and `fit`, so each could
    pay it.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(_PREFETCH_BATCHES).with_options(options)


def in_memory_buckets(features, batch_size, boundaries=None):
    """In-memory features grouped by the bucket width that holds each row, for `predict`.

    Yields `(rows, width, dataset)` per bucket in use: the row indices, the bucket width,
    and those rows cut to it and batched (`finish_in_memory`), so a model runs a few
    shapes with little padding and the caller scatters its outputs back to `rows`.

    Args:
        features: dict of numpy `[n, seq]` arrays with a `padding_mask`.
        batch_size: rows per batch.
        boundaries: bucket widths; default `default_boundaries(seq)` (few widths, as
            XLA and a distribution strategy want).

    >>> import numpy as np
    >>> from keras_bert_zoo.preprocessing.bucketing import in_memory_buckets
    >>> mask = np.array([[1] * 5 + [0] * 59, [1] * 40 + [0] * 24, [1] * 3 + [0] * 61])
    >>> [(rows.tolist(), width) for rows, width, _ in in_memory_buckets({"padding_mask": mask}, batch_size=8)]
    [([0, 2], 16), ([1], 64)]
    """
    width = features["padding_mask"].shape[1]
    bounds = np.asarray(boundaries or default_boundaries(width))
    lengths = (np.asarray(features["padding_mask"]) > 0).sum(axis=1)
    bucket = np.minimum(np.searchsorted(bounds, lengths), len(bounds) - 1)
    for b in np.unique(bucket):
        rows = np.flatnonzero(bucket == b)
        cut = int(bounds[b])
        ds = tf.data.Dataset.from_tensor_slices({k: np.asarray(v)[rows, :cut] for k, v in features.items()})
        yield rows, cut, finish_in_memory(ds.batch(batch_size))
