"""BERT's optimizer: AdamW with the original exclusions and clipping."""

import keras

from keras_bert_zoo.training.schedules import LinearWarmupLinearDecay

@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertAdamW(keras.optimizers.AdamW):
    """AdamW whose `global_clipnorm` clips the gradient of the *global* batch.

    Keras' optimizers clip inside each replica, before gradients are summed across
    replicas, so under `MirroredStrategy`/TPU the clipping norm is that of each
    replica's share and training differs from one device on the same global batch.
    With `clip_after_all_reduce=True` (our default) the gradients are summed first, so
    N replicas train exactly like one device (tested). `False` keeps Keras' per-replica
    clipping, which is also what the original TPU code did (it clipped before
    `CrossShardOptimizer` summed).
    """

    def __init__(self, *args, clip_after_all_reduce=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.clip_after_all_reduce = clip_after_all_reduce

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.clip_after_all_reduce and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            context = tf.distribute.get_replica_context()
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            if context is not None and replicas > 1:
                total = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
                clipped, _ = tf.clip_by_global_norm(total, self.global_clipnorm)
                # The optimizer sums replicas' gradients again after this: hand each
                # replica 1/N of the clipped total so that sum is the clipped total.
                return [_scale(g, 1.0 / replicas) for g in clipped]
        return super()._clip_gradients(grads)

    def get_config(self):
        return {**super().get_config(), "clip_after_all_reduce": self.clip_after_all_reduce}


def _scale(gradient, factor):
    import tensorflow as tf

    # Sparse (embedding) gradients are made dense: after an all-reduce an id seen on
    # two replicas has two rows, and a dense sum is the simple way to merge them.
    return tf.convert_to_tensor(gradient) * factor


# Weight decay regularises weight matrices only: the original code excludes LayerNorm
# scales/offsets and every bias (optimization.py, `exclude_from_weight_decay`).
NO_DECAY_NAMES = ["LayerNorm", "layer_norm", "bias", "gamma", "beta"]


def create_optimizer(
    learning_rate,
    total_steps,
    warmup_steps=None,
    warmup_ratio=0.1,
    weight_decay=0.01,
    epsilon=1e-6,
    clipnorm=1.0,
    clip_after_all_reduce=True,
):
    """AdamW (epsilon 1e-6, weight decay 0.01 not on LayerNorm or biases), a linear
    warm-up then linear decay to zero, and global gradient clipping at norm 1.0.

    Args:
        learning_rate: float, peak learning rate.
        total_steps: int, optimizer steps of the whole run (the decay reaches 0 there).
        warmup_steps: int, warm-up steps; defaults to `warmup_ratio * total_steps`.
        warmup_ratio: float, used when `warmup_steps` is None.
        weight_decay: float.
        epsilon: float, Adam's epsilon (1e-6 as in the original; Keras' default is 1e-7).
        clipnorm: float or None, global norm over all gradients.
        clip_after_all_reduce: bool, under a multi-replica strategy, clip the summed
            gradient (True: same result as one device) or each replica's (False: Keras'
            default and the original TPU code). See `BertAdamW`.

    Examples:
    >>> from keras_bert_zoo.training import create_optimizer
    >>> optimizer = create_optimizer(5e-5, total_steps=1000)
    >>> float(optimizer.learning_rate)  # step 0 of the warm-up
    0.0
    """
    if warmup_steps is None:
        warmup_steps = int(round(warmup_ratio * total_steps))
    schedule = LinearWarmupLinearDecay(learning_rate, total_steps, warmup_steps)
    optimizer = BertAdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
        clip_after_all_reduce=clip_after_all_reduce,
    )
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY_NAMES)
    return optimizer
