"""Checkpoint reading and writing (HF safetensors, original Google TF checkpoints)."""

from keras_bert_zoo.convert.checkpoint import Checkpoint, CheckpointError  # noqa: F401
