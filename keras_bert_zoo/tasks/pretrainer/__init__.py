"""The `pretrain` task (masked LM + next sentence prediction) in one place.

`model` (`BertPretrainer`), `corpus` (raw text -> documents and sentences), `pairs`
(NSP sentence pairs), `records` (pretraining TFRecords), `data` (the masked-LM
datasets), `job` (`pretrain`, the pretraining job), `adaptation`
(`continue_pretraining`, domain / task-adaptive MLM) and `spec` (its `TaskSpec`,
`TASK`, held-out scores and fill-mask serving). The masker stays shared
(`preprocessing.masker`). The data half (`corpus`, `pairs`, `records`, `data`) imports
nothing of the model half.
"""

__all__ = []  # nothing re-exported: import from the modules (or from `keras_bert_zoo`)
