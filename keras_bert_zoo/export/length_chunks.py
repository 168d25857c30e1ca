"""Running a model without paying for padding: rows cut to their longest, in length-sorted chunks.

The raw-text serving signatures (`saved_model.py`) pad every text to the preprocessor's
sequence length; the positions past a batch's (or a chunk's) longest row are padding in
every row, which the model masks out, so cutting them changes no output on the real
positions and a batch of short texts costs what its texts do.
"""

import tensorflow as tf

__all__ = ["trim_to_longest", "run_in_length_chunks"]


def _row_lengths(padding_mask):
    """Real positions per row of `padding_mask` `[rows, ..., seq]` (the longest over inner axes)."""
    lengths = tf.reduce_sum(tf.cast(padding_mask, tf.int32), axis=-1)
    while lengths.shape.rank > 1:
        lengths = tf.reduce_max(lengths, axis=-1)
    return lengths


def _width(lengths):
    # At least one column: an empty batch (or only empty texts) still has a valid shape.
    return tf.maximum(tf.reduce_max(tf.concat([lengths, [0]], 0)), 1)


def trim_to_longest(features, keys):
    """`features` with each of `keys` (last axis = positions) cut to the longest row's length.

    The positions cut are padding in every row, so the model's outputs on the real
    positions do not change, and a batch of short texts costs what its longest does.

    >>> import tensorflow as tf
    >>> from keras_bert_zoo.export.length_chunks import trim_to_longest
    >>> mask = tf.constant([[1, 1, 0, 0], [1, 1, 1, 0]])
    >>> features = {"padding_mask": mask, "token_ids": mask * 5, "other": mask}
    >>> cut = trim_to_longest(features, ("padding_mask", "token_ids"))
    >>> [cut[k].shape[-1] for k in ("padding_mask", "token_ids", "other")]
    [3, 3, 4]
    """
    width = _width(_row_lengths(features["padding_mask"]))
    return {k: (v[..., :width] if k in keys else v) for k, v in features.items()}


def run_in_length_chunks(model, inputs, position_keys, chunk_size, position_outputs=()):
    """`model(inputs)` run on length-sorted chunks of `chunk_size` rows, each cut to its longest.

    Args:
        model: callable on a dict like `inputs` (rows on axis 0), returning a tensor or a
            flat dict of tensors with rows on axis 0.
        inputs: dict of tensors; `padding_mask` gives each row's length (the longest over
            inner axes for `[rows, choices, seq]`).
        position_keys: keys of `inputs` whose last axis is the positions (cut per chunk).
        chunk_size: int, rows per model call.
        position_outputs: names of outputs whose axis 1 is the positions ("output" for a
            single tensor): padded back with zeros to the longest row of all `inputs`.

    Returns:
        the outputs of `model(inputs)`, rows in the order of `inputs`; on the real
        positions equal to one full-width call (padding is masked in attention).

    A batch of mixed lengths then costs about the sum of its lengths, not rows × longest.
    """
    lengths = _row_lengths(inputs["padding_mask"])
    width = _width(lengths)
    rows = tf.shape(lengths)[0]
    order = tf.argsort(lengths, stable=True)
    # At least one chunk, so an empty batch still yields outputs of the right structure.
    chunks = tf.maximum((rows + chunk_size - 1) // chunk_size, 1)

    single = []  # whether the model returns one tensor (learnt on the first call)

    def one(i):
        idx = order[i * chunk_size : (i + 1) * chunk_size]
        w = _width(tf.gather(lengths, idx))
        chunk = {k: tf.gather(v, idx) for k, v in inputs.items()}
        out = model({k: (v[..., :w] if k in position_keys else v) for k, v in chunk.items()})
        if not single:
            single.append(not isinstance(out, dict))
        named = {"output": out} if single[0] else out
        padded = {}
        for k, v in named.items():
            if k in position_outputs:
                v = tf.pad(v, [[0, 0], [0, width - w]] + [[0, 0]] * (v.shape.rank - 2))
            padded[k] = v
        return padded

    first = one(0)  # traced once outside the loop to learn the output structure
    arrays = {k: tf.TensorArray(v.dtype, size=chunks, infer_shape=False).write(0, v) for k, v in first.items()}

    def body(i, arrays):
        out = one(i)
        return i + 1, {k: arrays[k].write(i, out[k]) for k in arrays}

    _, arrays = tf.while_loop(lambda i, _: i < chunks, body, (tf.constant(1), arrays))
    back = tf.math.invert_permutation(order)
    result = {}
    for k, a in arrays.items():
        result[k] = tf.gather(a.concat(), back)
        result[k].set_shape([None] + first[k].shape[1:])  # concat forgets even the rank
    return result["output"] if single[0] else result
