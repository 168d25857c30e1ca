"""Optimizer, schedules and distribution strategies."""

from keras_bert_zoo.training.optimizer import NO_DECAY_NAMES, create_optimizer  # noqa: F401
from keras_bert_zoo.training.schedules import LinearWarmupLinearDecay  # noqa: F401
