"""`SentencePooling`: one vector per sentence from the token vectors, padding ignored."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError

__all__ = ["POOLING_MODES", "SentencePooling"]

POOLING_MODES = ("mean", "cls", "max")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SentencePooling(keras.layers.Layer):
    """Pools `[batch, seq, hidden]` token vectors into `[batch, hidden]`.

    Modes follow sentence-transformers' `Pooling` module:

    - `"mean"`: the average of the real tokens' vectors (`[CLS]` and `[SEP]` included,
      padding excluded): `sum(x * mask) / max(sum(mask), 1e-9)`.
    - `"cls"`: the vector at position 0 (`[CLS]`).
    - `"max"`: the element-wise maximum over real tokens (padding set to -1e9 first).

    The tanh pooler of BERT (`pooled_output`) is not here: it is a trained layer of the
    backbone (see `BertSentenceEmbedder(pooling="pooled")`).

    Args:
        mode: `"mean"`, `"cls"` or `"max"`.

    Call args:
        sequence_output: float Tensor `[batch, seq, hidden]`.
        padding_mask: int/bool Tensor `[batch, seq]`, 1 for real tokens.

    Returns:
        float Tensor `[batch, hidden]`.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo.models.layers.pooling import SentencePooling
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], "float32")
    >>> SentencePooling("mean")(x, np.array([[1, 1, 0]])).numpy().tolist()
    [[2.0, 3.0]]
    """

    def __init__(self, mode="mean", **kwargs):
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise UsageError(
                f"pooling mode {mode!r}; use one of {POOLING_MODES} ('pooled' is the "
                "backbone's tanh pooler, chosen on BertSentenceEmbedder)."
            )
        self.mode = mode

    def call(self, sequence_output, padding_mask):
        if self.mode == "cls":
            return sequence_output[:, 0, :]
        mask = ops.cast(padding_mask, sequence_output.dtype)[:, :, None]
        if self.mode == "max":
            # Padding can never be the maximum (sentence-transformers uses the same -1e9).
            return ops.max(sequence_output * mask + (1.0 - mask) * -1e9, axis=1)
        total = ops.sum(sequence_output * mask, axis=1)
        return total / ops.maximum(ops.sum(mask, axis=1), 1e-9)

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[2])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}
