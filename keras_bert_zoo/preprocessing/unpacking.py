"""Packed rows back to one row per sequence: the inverse of `preprocessing.packing`.

A packed batch lays its sequences end to end in rows (`pack_for_pooling`), and
`cls_index[i]` is the `(row, position)` where sequence `i` starts. A head that needs
each sequence whole (mean or max pooling, one logit per token read back per window)
gathers the positions `start .. start + width - 1` of each one; the mask says which of
them are its own (the rest belong to the next sequence in the row, or are padding).

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.preprocessing.unpacking import packed_lengths, unpack_sequences
>>> values = np.array([[[1.0], [2.0], [3.0], [4.0]]])          # one row holding two sequences
>>> mask = np.array([[1, 1, 2, 2]]); cls_index = np.array([[0, 0], [0, 2]])
>>> lengths = packed_lengths(mask, 2)
>>> tokens, own = unpack_sequences(values, cls_index, lengths)
>>> np.asarray(tokens)[..., 0].tolist(), np.asarray(own).tolist()
([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 4.0, 4.0]], [[True, True, False, False], [True, True, False, False]])
"""

from keras import ops

__all__ = ["packed_lengths", "unpack_sequences"]


def packed_lengths(padding_mask, num_sequences):
    """int32 `[num_sequences]`: the tokens of each sequence of a packed batch (`padding_mask`
    numbers sequence `i` as `i + 1`; 0 is padding)."""
    numbers = ops.one_hot(ops.cast(padding_mask, "int32") - 1, num_sequences)  # padding (-1): all zeros
    return ops.cast(ops.sum(numbers, axis=(0, 1)), "int32")


def unpack_sequences(values, cls_index, lengths):
    """`[rows, width, ...]` values of packed rows -> `([n, width, ...], mask [n, width])`.

    Args:
        values: per-position values of the packed rows (token vectors, logits).
        cls_index: int `[n, 2]`, the `(row, position)` of each sequence's first token.
        lengths: int `[n]`, each sequence's number of tokens (`packed_lengths`).

    Returns:
        each sequence's values from its first token on, in a row of `width` positions, and
        a bool mask of the positions that are its own (`index < length`). Positions past the
        row's end repeat its last value (masked).
    """
    width = ops.shape(values)[1]
    steps = ops.arange(width, dtype="int32")
    cls_index = ops.cast(cls_index, "int32")
    positions = ops.minimum(cls_index[:, 1:2] + steps[None, :], width - 1)
    flat = ops.reshape(values, (-1,) + tuple(ops.shape(values)[2:]))
    tokens = ops.take(flat, cls_index[:, 0:1] * width + positions, axis=0)
    return tokens, ops.less(steps[None, :], ops.cast(lengths, "int32")[:, None])
