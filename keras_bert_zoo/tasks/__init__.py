"""Tasks: one module each, found through one registry.

Every module in this package (other than `base`, `registry` and the jobs) defines a
`TASK` (a `keras_bert_zoo.tasks.base.TaskSpec`); `get_task` finds it by CLI name
(`"classify"`) or by model class name (`"BertClassifier"`). `finetune` and
`pretrain` are the training jobs as plain Python functions.

Examples:
>>> from keras_bert_zoo.tasks import get_task, task_names
>>> get_task("classify").model_class_name
'BertClassifier'
>>> "classify" in task_names(finetunable=True)
True
"""

from keras_bert_zoo.tasks.registry import get_task, task_names, task_of_model_dir  # noqa: F401


def finetune(task, model, train, dev, out, **kwargs):
    """Fine-tunes `model` for `task`; see `keras_bert_zoo.tasks.finetuning.finetune`."""
    from keras_bert_zoo.tasks.finetuning import finetune as run

    return run(task, model, train, dev, out, **kwargs)


def pretrain(corpus, out, **kwargs):
    """MLM + NSP pretraining; see `keras_bert_zoo.tasks.pretraining.pretrain`."""
    from keras_bert_zoo.tasks.pretraining import pretrain as run

    return run(corpus, out, **kwargs)
