"""Optimizer, schedules and distribution strategies."""

from keras_bert_zoo.training.optimizer import NO_DECAY_NAMES, BertAdamW, create_optimizer  # noqa: F401
from keras_bert_zoo.training.schedules import LinearWarmupLinearDecay  # noqa: F401
from keras_bert_zoo.training.strategies import (  # noqa: F401
    global_batch_size,
    is_chief,
    make_strategy,
    set_precision,
)
