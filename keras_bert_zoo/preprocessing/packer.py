"""`SegmentPacker`: `[CLS] A [SEP] (B [SEP])` with truncation, segment ids and padding mask."""

import keras
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError
from keras_bert_zoo.preprocessing.base import PreprocessingLayer

__all__ = ["truncation_lengths", "SegmentPacker"]

_TRUNCATE_STRATEGIES = ("longest_first", "round_robin", "waterfall")


def _as_ragged(x, name):
    if isinstance(x, tf.RaggedTensor):
        return x
    x = tf.convert_to_tensor(x)
    if x.dtype == tf.string:
        raise ArgumentTypeError(f"`{name}` must hold token ids, got strings; tokenize first (or use BertPreprocessor).")
    if x.shape.rank == 1:
        x = x[None]
    if x.shape.rank != 2:
        raise UsageError(f"`{name}` must be [batch, None] ids (ragged or dense), got shape {x.shape}.")
    return tf.RaggedTensor.from_tensor(x)


def truncation_lengths(lengths, budget, strategy):
    """How many tokens each segment keeps. `lengths`: list of int64 [batch] tensors.

    - `longest_first` (google-research/bert `_truncate_seq_pair`): remove one token at
      a time from the longer segment (from B on ties) until the pair fits. Closed form:
      the shorter segment is kept whole if it fits in half the budget, else A gets
      ceil(budget / 2) and B floor(budget / 2).
    - `round_robin`: add one token from each segment in turn (tensorflow-text's
      `RoundRobinTrimmer`): the same split with the A/B roles as in KerasHub.
    - `waterfall`: segments in order take what they can (tensorflow-text's `WaterfallTrimmer`).
    """
    budget = tf.cast(budget, tf.int64)
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    a, b = lengths
    if strategy == "waterfall":
        keep_a = tf.minimum(a, budget)
        return [keep_a, tf.minimum(b, budget - keep_a)]
    half_up, half_down = (budget + 1) // 2, budget // 2
    short = tf.minimum(a, b)
    fits = a + b <= budget
    if strategy == "round_robin":
        # Round robin takes A first, so A gets the odd token; a shorter segment that
        # fits in its half is kept whole and the other takes the rest.
        keep_a = tf.where(a <= half_up, a, tf.where(b <= half_down, budget - b, half_up))
        keep_b = tf.where(b <= half_down, b, tf.where(a <= half_up, budget - a, half_down))
    else:
        short_fits = short <= budget - short
        keep_a = tf.where(short_fits, tf.where(a <= b, a, budget - b), half_up)
        keep_b = tf.where(short_fits, tf.where(a <= b, budget - a, b), half_down)
    keep_a = tf.where(fits, a, keep_a)
    keep_b = tf.where(fits, b, keep_b)
    return [keep_a, keep_b]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SegmentPacker(PreprocessingLayer):
    """Packs one or two segments of ids into fixed-length BERT inputs.

    `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated to fit, padded to
    `sequence_length` (static shapes, for XLA and TPU).

    Args:
        sequence_length: int, total length including `[CLS]` and `[SEP]`s.
        start_value: int, the `[CLS]` id.
        end_value: int, the `[SEP]` id.
        pad_value: int, the `[PAD]` id.
        truncate: `"longest_first"` (original BERT: shorten the longer segment
            first), `"round_robin"` or `"waterfall"` (A keeps what it can, B gets the rest).

    Call args:
        inputs: int ids `[batch, None]` (ragged or dense, or 1-D unbatched), or a
            tuple/list of two of them (A, B).

    Returns:
        dict of int32 `[batch, sequence_length]`: `token_ids`, `segment_ids` (0
        through the first `[SEP]`, 1 after), `padding_mask` (1 on real tokens).

    Examples:
    ```python
    import tensorflow as tf
    from keras_bert_zoo import SegmentPacker

    packer = SegmentPacker(sequence_length=8, start_value=101, end_value=102)
    a = tf.ragged.constant([[7, 8, 9], [5]])
    b = tf.ragged.constant([[1, 2, 3, 4, 5], [6]])
    packer((a, b))["token_ids"]
    # [[101, 7, 8, 9, 102, 1, 2, 102], [101, 5, 102, 6, 102, 0, 0, 0]]
    ```
    """

    def __init__(self, sequence_length, start_value, end_value, pad_value=0, truncate="longest_first", **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise UsageError(
                f"`sequence_length` must be an int >= 3 (room for [CLS] A [SEP]), got {sequence_length!r}."
            )
        if truncate not in _TRUNCATE_STRATEGIES:
            raise UsageError(f"`truncate` must be one of {', '.join(_TRUNCATE_STRATEGIES)}, got {truncate!r}.")
        self.sequence_length = sequence_length
        self.start_value = int(start_value)
        self.end_value = int(end_value)
        self.pad_value = int(pad_value)
        self.truncate = truncate

    def call(self, inputs):
        unbatched = False
        if isinstance(inputs, (tuple, list)):
            segments = list(inputs)
        else:
            segments = [inputs]
        if not 1 <= len(segments) <= 2:
            raise UsageError(f"SegmentPacker packs one or two segments, got {len(segments)}.")
        if not isinstance(segments[0], tf.RaggedTensor):
            unbatched = tf.convert_to_tensor(segments[0]).shape.rank == 1
        segments = [tf.cast(_as_ragged(s, f"segment {i}"), tf.int32) for i, s in enumerate(segments)]
        budget = self.sequence_length - 1 - len(segments)
        if len(segments) == 2 and budget < 2:
            raise UsageError(f"`sequence_length` {self.sequence_length} leaves no room for two segments; use >= 5.")
        keep = truncation_lengths([s.row_lengths() for s in segments], budget, self.truncate)
        batch = segments[0].nrows()
        cls = tf.fill(tf.stack([batch, 1]), self.start_value)
        sep = tf.fill(tf.stack([batch, 1]), self.end_value)
        pieces, seg_ids = [tf.RaggedTensor.from_tensor(cls)], [tf.RaggedTensor.from_tensor(tf.zeros_like(cls))]
        for i, (s, n) in enumerate(zip(segments, keep, strict=True)):
            kept = tf.ragged.boolean_mask(s, tf.ragged.range(s.row_lengths()) < n[:, None])
            part = tf.concat([kept, tf.RaggedTensor.from_tensor(sep)], axis=1)
            pieces.append(part)
            seg_ids.append(tf.ones_like(part) * i)
        token_ids = tf.concat(pieces, axis=1)
        segment_ids = tf.concat(seg_ids, axis=1)
        shape = [None, self.sequence_length]
        outputs = {
            "token_ids": token_ids.to_tensor(self.pad_value, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
            "padding_mask": tf.ones_like(token_ids).to_tensor(0, shape=shape),
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "start_value": self.start_value,
                "end_value": self.end_value,
                "pad_value": self.pad_value,
                "truncate": self.truncate,
            }
        )
        return config
