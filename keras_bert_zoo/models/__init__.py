"""The Keras models: `BertBackbone` and the task models built on it (`layers/`: their pieces)."""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
