"""The `embed` task (sentence embeddings) in one place.

`model` (`BertSentenceEmbedder`: mean/CLS/max pooling, `encode`), `data` (STS-B
readers), `metrics` (cosine similarity scored against gold) and `spec` (its `TaskSpec`,
`TASK`, and serving). The data half (`data`, `metrics`) imports nothing of the model
half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
