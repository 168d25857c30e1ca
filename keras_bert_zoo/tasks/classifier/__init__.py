"""The `classify` task (sequence and sentence-pair classification, regression) in one place.

`model` (`BertClassifier`), `data` (GLUE / STS-B / CSV readers, `DataLayout`, the
datasets) and `spec` (its `TaskSpec`, `TASK`, and serving). Its preprocessor is the
shared `preprocessing.preprocessor.BertPreprocessor` and its metrics the shared
`metrics.classification` (the embedder's STS-B score uses them too). The data half
(`data`) imports nothing of the model half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
