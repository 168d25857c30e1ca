"""The task registry: the `TASK` of every task package `keras_bert_zoo.tasks.<name>/spec.py`.

Task packages are discovered, not listed, so adding a task is adding a package (its
model, data, metrics and `spec.py`). Discovery imports every package's `spec` module, and
they are light: a spec imports TensorFlow, Keras and its model class only inside the
methods that use them (its `TaskSpec` names the model class by its dotted path), so `bert-zoo finetune --help`, which lists the tasks
and their flags, starts without TensorFlow. `tests/test_cli_startup.py` checks it.
"""

import importlib
import os
import pkgutil

from keras_bert_zoo.errors import CheckpointError, UsageError

__all__ = ["all_tasks", "task_names", "get_task", "task_of_model", "task_of_model_dir"]

_TASKS = None


def _task_modules(package):
    """`package.<task>.spec` for every task package (a subpackage of `package`); the modules
    of `package` itself are machinery (`base`, `options`, `registry`, the fine-tuning job)."""
    for info in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
        if info.ispkg and not info.name.startswith("_"):
            yield f"{package}.{info.name}.spec"


def _discover():
    global _TASKS
    if _TASKS is None:
        package = __name__.rpartition(".")[0]  # this module's package, found without importing it

        tasks = {}
        for module in _task_modules(package):
            spec = getattr(importlib.import_module(module), "TASK", None)
            if spec is None:
                continue
            for key in (spec.name, spec.model_name):
                if key in tasks:
                    raise RuntimeError(f"two task modules declare {key!r}.")
                tasks[key] = spec
        _TASKS = tasks
    return _TASKS


def all_tasks():
    """Every registered `TaskSpec` once, sorted by CLI name."""
    return sorted({id(s): s for s in _discover().values()}.values(), key=lambda s: s.name)


def task_names(finetunable=None):
    """CLI names of the registered tasks, sorted; `finetunable=True` keeps `finetune`'s."""
    specs = {s.name: s for s in _discover().values()}
    return sorted(n for n, s in specs.items() if finetunable is None or s.finetunable == finetunable)


def get_task(name):
    """The `TaskSpec` registered under a CLI name or a model class name."""
    tasks = _discover()
    if name not in tasks:
        raise UsageError(f"unknown task {name!r}; known tasks: {', '.join(task_names())}.")
    return tasks[name]


def task_of_model(model):
    """The `TaskSpec` whose model class `model` is an instance of (the closest class first).

    Classes, not their names, are compared: a user's subclass of `BertTagger` is served
    as a tagger, and an unrelated class that happens to share a name is not.
    """
    specs = all_tasks()
    for klass in type(model).__mro__:
        for spec in specs:
            if spec.model_class() is klass:
                return spec
    known = sorted(s.model_name for s in specs)
    raise UsageError(
        f"a {type(model).__name__} is not the model of any task; the task models are "
        f"{', '.join(known)} (a new task is a package in keras_bert_zoo/tasks/ with its TaskSpec in spec.py)."
    )


def task_of_model_dir(model_dir, verb="this command"):
    """The `TaskSpec` of a directory written by `finetune`/`pretrain` (its `config.json`).

    Raises a ValueError naming the fix when the directory is not one.
    """
    path = os.path.join(str(model_dir), "config.json")
    if not os.path.isfile(path):
        raise CheckpointError(
            f"--model {model_dir!r} has no config.json; give a directory written by "
            "`bert-zoo finetune` or `bert-zoo pretrain`."
        )
    from keras_bert_zoo.files import read_json

    fix = "restore it from the checkpoint's source (or write the model again)"
    config = read_json(path, "config.json", fix)
    saved = config.get("keras_bert_zoo", {})
    if not isinstance(saved, dict):
        raise CheckpointError(f'{path}: "keras_bert_zoo" is not a JSON object; {fix}.')
    task = saved.get("task")
    tasks = _discover()
    if task is None:
        raise CheckpointError(_no_task_message(model_dir, verb, config))
    if task not in tasks:
        known = sorted({s.model_name for s in tasks.values()})
        raise CheckpointError(
            f"--model {model_dir!r} holds task {task!r}; {verb} handles {known} directories "
            "(fine-tune or pretrain one first)."
        )
    return tasks[task]


def _no_task_message(model_dir, verb, config):
    """What a directory without a task model holds (an encoder alone, or an HF head not converted
    yet) and what to run instead of `verb`."""
    architectures = [a for a in config.get("architectures") or () if isinstance(a, str)]
    head = next((a for a in architectures if a != "BertModel"), None)
    if head is not None:
        return (
            f"--model {model_dir!r} is an HF {head} checkpoint, not converted yet; convert it once "
            f"(`bert-zoo convert --from {model_dir} --out DIR`, which keeps the heads this package reads) "
            f"and give DIR to {verb}."
        )
    return (
        f"--model {model_dir!r} holds a BERT encoder without a task head (a backbone preset, an HF BertModel "
        f"or sentence-transformers checkpoint, or continue_pretraining's backbone.save_to_preset), so {verb} "
        f"has nothing to run: fine-tune it first (`bert-zoo finetune TASK --model {model_dir} ...`), embed text "
        "with it (`bert-zoo embed`), or for fill-mask save the whole BertPretrainer (pretrainer.save_to_preset)."
    )
