"""Sequence packing: the sequences of a batch laid end to end in a few full rows.

A random batch of CoNLL-2003 sentences padded to its longest is mostly `[PAD]`: the
batch's longest window is about 2.6x the mean. Packing puts the batch's windows one
after another into rows of `width` positions (first-fit decreasing, so rows are nearly
full) and numbers them in `padding_mask` (1, 2, 3, ...; 0 is padding). `BertBackbone`
reads those numbers: each token attends only within its own sequence and positions
restart at 0 with each one (`layers.encoder_block.attention_layout`), so every
sequence's outputs are those it has alone in a padded row (up to float rounding).

The batch keeps the same sequences, hence the same labelled tokens and, with a
token-averaged loss (`BertTagger`), the same loss and gradients as the padded batch;
only the amount of padding computed changes. This suits token-level heads (tags, answer
spans: a label per position moves with its token) as it is; a pooled head (`[CLS]`)
reads each sequence's first token, which `pack_for_pooling` records (`cls_index`).

Examples:
>>> import tensorflow as tf
>>> from keras_bert_zoo.preprocessing.packing import pack_batch
>>> features = {"token_ids": tf.constant([[2, 7, 3, 0], [2, 5, 6, 3], [2, 3, 0, 0]]),
...             "segment_ids": tf.zeros((3, 4), tf.int32),
...             "padding_mask": tf.constant([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])}
>>> packed, _ = pack_batch(features, width=6)
>>> packed["token_ids"].numpy().tolist()
[[2, 5, 6, 3, 2, 3], [2, 7, 3, 0, 0, 0]]
>>> packed["padding_mask"].numpy().tolist()
[[2, 2, 2, 2, 3, 3], [1, 1, 1, 0, 0, 0]]
"""

import tensorflow as tf

__all__ = ["first_fit_decreasing", "pack_batch", "pack_for_pooling"]

# These run inside `tf.data` maps, which convert Python code with autograph first. They
# are TF ops with Python `if`s on settings only, so nothing needs converting, and the
# conversion cost 0.5-0.6 s of the first packed dataset of a process (2 cores).
_as_written = tf.autograph.experimental.do_not_convert


@_as_written
def first_fit_decreasing(lengths, width):
    """Rows for sequences of `lengths` in rows of `width` positions.

    Longest first, each into the first row with room (`width` must be at least the
    longest length). Returns int32 `(row, offset)` per sequence, in the given order.
    """
    lengths = tf.cast(lengths, tf.int32)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    capacity = tf.size(lengths)  # never more rows than sequences

    def place(state, length):
        fill, _, _ = state
        row = tf.argmax(tf.cast(fill + length <= width, tf.int32), output_type=tf.int32)
        return fill + tf.one_hot(row, capacity, dtype=tf.int32) * length, row, fill[row]

    empty = (tf.zeros([capacity], tf.int32), tf.constant(0), tf.constant(0))
    _, rows, offsets = tf.scan(place, tf.gather(lengths, order), initializer=empty)
    back = tf.argsort(order)  # sorted position of each sequence
    return tf.gather(rows, back), tf.gather(offsets, back)


@_as_written
def pack_batch(features, labels=None, width=128, label_padding=-100):
    """Packs a padded batch `[n, seq]` (padding at the end of each row) into `[rows, width]`.

    Args:
        features: dict of int `[n, seq]` Tensors with a 0/1 `padding_mask`; every
            other entry is moved with it and padded with 0.
        labels: optional int `[n, seq]` (or a dict of them), moved the same way,
            padded with `label_padding`.
        width: int, positions per packed row; raised to the batch's longest sequence.
            At most the model's `max_sequence_length`: padding keeps its index as
            its position, as in an unpacked row (the padded span loss reads padding
            logits, so that stays as the original has it), and a wider row fails in
            the position-embedding gather.
        label_padding: label of the padding positions (the loss's ignored label).

    Returns:
        `(packed_features, packed_labels)` with `padding_mask` numbering each row's
        sequences (1 + the sequence's index in the batch); `packed_labels` is None
        without `labels`.
    """
    packed, labels, _ = _pack(features, labels, width, label_padding)
    return packed, labels


@_as_written
def pack_for_pooling(features, width=128):
    """`pack_batch` for a pooled head: the packed features plus each sequence's `[CLS]`.

    `cls_index` (int32 `[n, 2]`) holds the `(row, position)` of sequence `i`'s first
    token, in the batch's order, which `BertClassifier` pools (through
    `BertBackbone.pooled_output`) instead of position 0 of every row, so its logits
    come out one per sequence, `[n, classes]`, as for the padded batch.

    >>> import tensorflow as tf
    >>> from keras_bert_zoo.preprocessing.packing import pack_for_pooling
    >>> packed = pack_for_pooling({"token_ids": tf.constant([[2, 7, 3, 0], [2, 5, 6, 3], [2, 3, 0, 0]]),
    ...                            "segment_ids": tf.zeros((3, 4), tf.int32),
    ...                            "padding_mask": tf.constant([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])}, width=6)
    >>> packed["cls_index"].numpy().tolist()
    [[1, 0], [0, 0], [0, 4]]

    Features of questions with choices, `[n, num_choices, seq]` (`MultipleChoicePreprocessor`),
    pack every `(context, choice)` pair as a sequence of its own, and `cls_index` is
    `[n, num_choices, 2]`, so `BertMultipleChoice` reads the choice count off it.
    """
    shape = tf.shape(features["padding_mask"])
    per_choice = features["padding_mask"].shape.rank == 3
    if per_choice:  # one sequence per (context, choice) pair
        features = {k: tf.reshape(v, tf.concat([[-1], tf.shape(v)[2:]], 0)) for k, v in features.items()}
    packed, _, (rows, offsets) = _pack(features, None, width, 0)
    cls_index = tf.stack([rows, offsets], axis=1)
    packed["cls_index"] = tf.reshape(cls_index, [shape[0], shape[1], 2]) if per_choice else cls_index
    return packed


def _pack(features, labels, width, label_padding):
    mask = tf.cast(features["padding_mask"], tf.int32) > 0
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    width = tf.maximum(tf.cast(width, tf.int32), tf.reduce_max(tf.concat([lengths, [0]], 0)))
    rows, offsets = first_fit_decreasing(lengths, width)
    source = tf.cast(tf.where(mask), tf.int32)  # [tokens, 2]: (sequence, position), row-major
    sequence = source[:, 0]
    target = tf.stack([tf.gather(rows, sequence), tf.gather(offsets, sequence) + source[:, 1]], axis=1)
    shape = tf.stack([tf.reduce_max(tf.concat([rows, [-1]], 0)) + 1, width])

    def move(x, fill, values=None):
        values = tf.gather_nd(x, source) if values is None else values
        return tf.tensor_scatter_nd_update(tf.fill(shape, tf.cast(fill, x.dtype)), target, values)

    packed = {k: move(v, 0) for k, v in features.items() if k != "padding_mask"}
    packed["padding_mask"] = move(features["padding_mask"], 0, tf.cast(sequence + 1, features["padding_mask"].dtype))
    if isinstance(labels, dict):
        labels = {k: move(v, label_padding) for k, v in labels.items()}
    elif labels is not None:
        labels = move(labels, label_padding)
    return packed, labels, (rows, offsets)
