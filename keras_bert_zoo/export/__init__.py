"""SavedModels that take raw strings: the exporter (`saved_model`) and the task servings' base (`serving`).

`export_saved_model` is `keras_bert_zoo.export_saved_model`; it lives in
`keras_bert_zoo.export.saved_model`, which imports the task registry, so this package
imports only the base class the task modules extend.
"""

from keras_bert_zoo.export.serving import TaskServing  # noqa: F401

__all__ = ["TaskServing"]
