"""`bert-zoo demo`: pretrain, fine-tune, export and serve a BERT on Python's own docs."""

from keras_bert_zoo.demo.pipeline import BUDGETS, run_demo  # noqa: F401

__all__ = ["run_demo", "BUDGETS"]
