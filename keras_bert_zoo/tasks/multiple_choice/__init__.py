"""The `choice` task (multiple choice, SWAG / JSONL) in one place.

`model` (`BertMultipleChoice`), `preprocessor` (`MultipleChoicePreprocessor`: each
(context, choice) pair packed), `data` (SWAG CSV / JSONL readers and the datasets) and
`spec` (its `TaskSpec`, `TASK`, accuracy, and serving). The data half (everything but
`model` and `spec`) imports nothing of the model half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
