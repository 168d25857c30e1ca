"""Losses that give the same gradients on N replicas as on one device.

Keras' TF trainer sums the replicas' gradients and logs `N * loss`, so under a
`tf.distribute` strategy each replica must return its *share* of the global-batch
loss. `keras.losses.Loss` objects do that by dividing their per-replica mean by N
(`scale_loss_for_distribution`, not public API); that is exact only when every replica
averages over the same count. Token-level losses (MLM predictions, NER tags) average
over a count that differs per replica, so they divide by the count of the *global*
batch instead: one all-reduce of a scalar per step.
"""

import keras
from keras import ops

__all__ = ["distributed_replica_context", "global_sum", "replicas_in_sync", "token_cross_entropy"]


def distributed_replica_context():
    """The `tf.distribute` replica context when this runs on one of several replicas
    (Keras' `fit`/`evaluate` on TensorFlow under `MirroredStrategy`, TPU, multi-worker),
    else None (one device, another backend, or cross-replica code such as a direct call).
    """
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    if tf.distribute.in_cross_replica_context():
        return None
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync <= 1:
        return None
    return context


def global_sum(value):
    """`value` summed over the replicas (itself on one device); no gradient flows through it."""
    value = ops.stop_gradient(value)
    context = distributed_replica_context()
    if context is None:
        return value
    import tensorflow as tf

    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def replicas_in_sync():
    context = distributed_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def token_cross_entropy(labels, logits, ignore_index=-100, sample_weight=None):
    """Mean cross-entropy over the tokens whose label is not `ignore_index`, as HF's
    `CrossEntropyLoss(ignore_index=-100)`, returned as this replica's share of the
    global-batch mean (see the module docstring).

    Args:
        labels: int `[batch, seq]`, `ignore_index` where no label applies.
        logits: float `[batch, seq, num_labels]`.
        sample_weight: optional float `[batch]` (a weight per row) or `[batch, seq]`
            (per token, Keras' temporal form): each token's loss counts this many
            times in the sum; the mean still divides by the (unweighted) number of
            labelled tokens. Length-grouped batches use row weights to weigh every
            token equally whatever batch it lands in (`make_tagging_dataset`).
    """
    labels = ops.cast(labels, "int32")
    valid = ops.not_equal(labels, ignore_index)
    weights = ops.cast(valid, "float32")
    safe = ops.where(valid, labels, ops.zeros_like(labels))
    per_token = keras.losses.sparse_categorical_crossentropy(safe, ops.cast(logits, "float32"), from_logits=True)
    count = global_sum(ops.sum(weights))
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, "float32")
        if len(sample_weight.shape) == 1:
            sample_weight = ops.expand_dims(sample_weight, -1)
        weights = weights * sample_weight
    return ops.sum(per_token * weights) / ops.maximum(count, 1.0)
