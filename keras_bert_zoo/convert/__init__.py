"""Checkpoint reading and writing (HF safetensors, original Google TF checkpoints, KerasHub
presets) and Hub resolution (preset names, `hf://`); importing it registers them with
`keras_bert_zoo.models.loading`."""

from keras_bert_zoo.convert import hub, keras_hub_format, keras_hub_writer  # noqa: F401  (register the resolver and writer)
from keras_bert_zoo.convert.checkpoint import Checkpoint  # noqa: F401
from keras_bert_zoo.errors import CheckpointError  # noqa: F401

__all__ = ["hub", "keras_hub_format", "keras_hub_writer", "Checkpoint", "CheckpointError"]
