"""Tasks: one package each, found through one registry.

Every subpackage (`classifier/`, `tagger/`, `span_qa/`, `multiple_choice/`, `embedder/`,
`pretrainer/`) holds one task whole: its model, preprocessor, data readers, metrics,
serving and, in `spec.py`, its `TASK` (a `keras_bert_zoo.tasks.base.TaskSpec`);
`get_task` finds it by CLI name (`"classify"`) or by model class name
(`"BertClassifier"`). The modules beside them are shared: `base`, `options`,
`registry` and the fine-tuning job. The training jobs are plain Python functions,
`finetuning.finetune` and `pretrainer.job.pretrain`, exported as
`keras_bert_zoo.finetune` and `keras_bert_zoo.pretrain`.

Examples:
>>> from keras_bert_zoo.tasks import get_task, task_names
>>> get_task("classify").model_class().__name__
'BertClassifier'
>>> "classify" in task_names(finetunable=True)
True
"""

from keras_bert_zoo.tasks.registry import get_task, task_names, task_of_model_dir  # noqa: F401

__all__ = ["get_task", "task_names", "task_of_model_dir"]
