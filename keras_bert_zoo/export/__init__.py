"""Export: SavedModels that take raw strings (see `saved_model.py`)."""

from keras_bert_zoo.export.saved_model import TaskServing, export_saved_model, register_serving  # noqa: F401

__all__ = ["export_saved_model", "register_serving", "TaskServing"]
