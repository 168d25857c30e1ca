"""Optimizer, schedules and distribution strategies."""

from keras_bert_zoo.training.jit import JitChoice, choose_jit_compile, resolve_jit_compile  # noqa: F401
from keras_bert_zoo.training.optimizer import NO_DECAY_NAMES, RECIPES, BertAdamW, create_optimizer, default_optimizer  # noqa: F401
from keras_bert_zoo.training.schedules import (  # noqa: F401
    SCHEDULES,
    BertOriginalWarmupDecay,
    LinearWarmupLinearDecay,
    make_schedule,
)
from keras_bert_zoo.training.strategies import (  # noqa: F401
    configure_replicas,
    global_batch_size,
    is_chief,
    make_strategy,
    set_determinism,
    set_precision,
    worker_info,
)

__all__ = [
    "BertAdamW",
    "BertOriginalWarmupDecay",
    "LinearWarmupLinearDecay",
    "configure_replicas",
    "create_optimizer",
    "global_batch_size",
    "is_chief",
    "make_strategy",
    "resolve_jit_compile",
    "set_determinism",
    "set_precision",
    "worker_info",
    "JitChoice",
    "choose_jit_compile",
    "NO_DECAY_NAMES",
    "RECIPES",
    "default_optimizer",
    "SCHEDULES",
    "make_schedule",
]
