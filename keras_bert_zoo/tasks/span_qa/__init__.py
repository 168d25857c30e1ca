"""The `qa` task (extractive question answering, SQuAD v1.1 / v2.0) in one place.

`model` (`BertSpanQA`), `preprocessor` (`SpanQAPreprocessor`: windows over long passages
with character offsets, and the training / evaluation datasets), `data` (SQuAD JSON),
`span_search` (run_squad.py's answer search, TF ops for Python and serving), `metrics`
(official EM/F1) and `spec` (its `TaskSpec`, `TASK`, and serving). The data half
(everything but `model` and `spec`) imports nothing of the model half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
