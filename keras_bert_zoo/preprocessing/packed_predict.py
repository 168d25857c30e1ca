"""Prediction over packed rows, for the token-level heads (tagger, span QA).

`predict_tags`, `predict_answers` and `encode` take `batching="auto"` (the default:
windows sorted or bucketed by length, each batch cut to its width) or `"packed"`:
every `batch_size` windows are laid end to end in rows (`packing.pack_for_pooling`,
the packing of training) and each window's outputs are read back from its own
positions (`preprocessing.unpacking`). Packed rows carry almost no padding but every
token attends over the whole row (masked), so which is faster depends on the lengths;
on CoNLL-2003 and SQuAD the default was (docs/benchmarks.md).

Examples:
```python
import numpy as np
from keras_bert_zoo import BertBackbone, BertTagger
from keras_bert_zoo.preprocessing.packed_predict import predict_packed

backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
model = BertTagger(backbone, num_labels=3)
mask = np.array([[1] * 5 + [0] * 11, [1] * 9 + [0] * 7])
features = {"token_ids": mask * 7, "segment_ids": 0 * mask, "padding_mask": mask}
predict_packed(model, features, batch_size=2, width=16).shape  # (2, 16, 3), as model.predict
```
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.keras_compat import distribute_strategy, predict_function
from keras_bert_zoo.preprocessing.unpacking import unpack_sequences

__all__ = ["PREDICT_BATCHINGS", "check_predict_batching", "predict_packed", "predict_step", "step_width"]

PREDICT_BATCHINGS = ("auto", "packed")


def check_predict_batching(batching, model=None):
    """Raises unless `batching` is one of `PREDICT_BATCHINGS` (and, packed, `model` runs on one replica)."""
    if batching not in PREDICT_BATCHINGS:
        raise UsageError(
            f"batching={batching!r}; prediction takes 'auto' (sorted or bucketed by length) or "
            "'packed' (several windows per row)."
        )
    if (
        batching == "packed"
        and model is not None
        and (distribute_strategy(model) is not None or tf.distribute.has_strategy())
    ):
        raise UsageError(
            'batching="packed" prediction runs on one replica (a strategy would split a packed '
            'batch\'s rows from the index of its sequences); use batching="auto".'
        )


def predict_packed(model, features, batch_size, width, fill=0.0):
    """A Keras model's per-position outputs on in-memory windows, run packed.

    Args:
        model: a Keras model with token-level outputs (`[batch, seq, ...]` or a dict of them).
        features: dict of numpy `[n, seq]` model inputs with a `padding_mask`.
        batch_size: windows packed together per model call.
        width: positions per packed row (raised to a batch's longest window).
        fill: the value of the positions past each window's end.

    Returns:
        numpy outputs `[n, seq, ...]` (a dict of them for a dict model), window `i`'s
        from its own positions, as `model.predict(features)` gives up to float rounding.
    """
    from keras_bert_zoo.preprocessing import bucketing
    from keras_bert_zoo.preprocessing.packing import pack_for_pooling

    check_predict_batching("packed", model)
    n, seq = features["padding_mask"].shape
    lengths = (np.asarray(features["padding_mask"]) > 0).sum(axis=1).astype(np.int32)
    packed = tf.data.Dataset.from_tensor_slices(dict(features)).batch(batch_size)
    packed = bucketing.finish_in_memory(bucketing.map_as_written(packed, lambda x: pack_for_pooling(x, width)))
    spec = {k: tf.TensorSpec([None, None], s.dtype) for k, s in packed.element_spec.items() if k != "cls_index"}
    model.trace_predict(spec)
    out = None
    for start, batch in zip(range(0, n, batch_size), packed, strict=True):
        cls_index = batch.pop("cls_index")
        part = predict_step(model, batch)
        part = part if isinstance(part, dict) else {None: part}
        if out is None:
            out = {k: np.full((n, seq) + tuple(v.shape[2:]), fill, np.asarray(v).dtype) for k, v in part.items()}
        span = lengths[start : start + batch_size]
        cut = min(int(batch["padding_mask"].shape[1]), seq)
        for k, v in part.items():
            tokens, own = unpack_sequences(v, cls_index, span)
            tokens, own = np.asarray(tokens)[:, :cut], np.asarray(own)[:, :cut]
            own = own.reshape(own.shape + (1,) * (tokens.ndim - 2))
            out[k][start : start + len(span), :cut] = np.where(own, tokens, fill)
    return out[None] if None in out else out


def predict_step(model, batch):
    """Keras' predict step of `model` on one batch (a dict of tensors), for the loops that feed
    batches of their own widths.

    On TensorFlow it is the traced `predict_function` itself (one shape-generic trace,
    `Task.trace_predict`). JAX's predict function takes the model's state and an iterator,
    so the other backends go through `predict_on_batch`, on numpy arrays.
    """
    if keras.backend.backend() == "tensorflow":
        return predict_function(model)([batch])
    return model.predict_on_batch({k: np.asarray(v) for k, v in batch.items()})


def step_width(model, width, longest):
    """The width a batch whose longest window is `longest` is cut to (at most `width`).

    Its own longest, except under JAX's `jax.jit`, which compiles a program per width: there
    the next multiple of 8, as `Task`'s sorted batches under XLA, so few widths compile.
    """
    if keras.backend.backend() != "tensorflow" and getattr(model, "jit_compile", False) is True:
        return min(width, -(-longest // 8) * 8)
    return longest
