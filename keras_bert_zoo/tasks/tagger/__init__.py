"""The `tag` task (token classification, named entities) in one place.

`model` (`BertTagger`), `preprocessor` (`TaggingPreprocessor`), `data` (CoNLL / IOB2 /
BIOES / JSONL readers), `alignment` (words -> first-piece labels), `windows`
(overlapping windows), `dataset` (training batches, packed), `predict` (window logits
-> word tags), `words`, `metrics` (conlleval entity scores), `entity_graph` (the same
rule in TensorFlow, for serving) and `spec` (its `TaskSpec`, `TASK`, and serving).
The data half (everything but `model` and `spec`) imports nothing of the model half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
