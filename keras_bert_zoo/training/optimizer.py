"""BERT's optimizer: AdamW with the original exclusions and clipping."""

import keras

from keras_bert_zoo.training.schedules import LinearWarmupLinearDecay

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

    Examples:
    >>> from keras_bert_zoo.training import create_optimizer
    >>> optimizer = create_optimizer(5e-5, total_steps=1000)
    >>> float(optimizer.learning_rate)  # step 0 of the warm-up
    0.0
    """
    if warmup_steps is None:
        warmup_steps = int(round(warmup_ratio * total_steps))
    schedule = LinearWarmupLinearDecay(learning_rate, total_steps, warmup_steps)
    optimizer = keras.optimizers.AdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
    )
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY_NAMES)
    return optimizer
