"""Which task model a checkpoint holds, so converting it keeps the head.

- Ours (written by a task's `save_to_preset`): `config.json["keras_bert_zoo"]["task"]`.
- HF: `config.json["architectures"]`, matched against each task model's
  `hf_architecture` (`BertForPreTraining` -> `BertPretrainer`,
  `BertForSequenceClassification` -> `BertClassifier`, `BertForTokenClassification` ->
  `BertTagger`, `BertForQuestionAnswering` -> `BertSpanQA`, `BertForMultipleChoice` ->
  `BertMultipleChoice`).
- KerasHub / keras-nlp presets: `task.json`'s class (`BertTextClassifier` ->
  `BertClassifier`, `BertMaskedLM` -> `BertPretrainer`), which the reader puts in `extra`.
- Google TF1 checkpoints carry no class name, only tensor names: `cls/predictions/*` and
  `cls/seq_relationship/*` are the pretraining heads, run_classifier.py's top-level
  `output_weights`/`output_bias` a classifier.

Where `HEAD_TENSORS` lists a head's tensors they must be there too: an HF config that says
`BertForPreTraining` over a checkpoint without `cls.*` tensors converts as a backbone. A
head nothing above matches (HF `BertForMaskedLM` without NSP, a Google run_squad.py
checkpoint's `cls/squad/*`, ...) is reported as dropped, and the backbone is kept.
"""

import dataclasses
import importlib
import pkgutil

# Tensors that show a head is present, per task model and checkpoint format.
HEAD_TENSORS = {
    "BertPretrainer": {
        "hf": ("cls.predictions.transform.dense.weight", "cls.seq_relationship.weight"),
        "google": ("cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_weights"),
    },
    "BertClassifier": {
        "hf": ("classifier.weight", "classifier.bias"),
        "google": ("output_weights", "output_bias"),
    },
    # HF only (google-research/bert has no multiple-choice script); its config names the class.
    "BertMultipleChoice": {
        "hf": ("classifier.weight", "classifier.bias"),
    },
}


@dataclasses.dataclass
class DetectedTask:
    task: str  # class name of our task model, or None: backbone only
    source: str  # what the checkpoint says it is ("BertForPreTraining", "Google checkpoint", ...)
    dropped: list  # tensor names of a head no task model here reads

    def dropped_line(self):
        """One line saying which head was dropped, or None when nothing was."""
        if not self.dropped:
            return None
        return (f"{self.source}: no task model here reads its head ({_summary(self.dropped)}); "
                "dropped it and kept the backbone")


def task_classes():
    """`{class name: class}` of every task model (`Task` subclass) in `keras_bert_zoo.models`."""
    from keras_bert_zoo import models
    from keras_bert_zoo.models.task import Task

    for module in pkgutil.iter_modules(models.__path__):
        if not module.ispkg:
            importlib.import_module(f"keras_bert_zoo.models.{module.name}")
    found, stack = {}, list(Task.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if cls.__module__.startswith("keras_bert_zoo."):
            found[cls.__name__] = cls
    return found


def detect_task(checkpoint):
    """The task model that can hold all of `checkpoint`'s weights, as a `DetectedTask`."""
    classes = task_classes()
    stored = set(checkpoint.tensor_names())

    def has_head(task):
        needed = HEAD_TENSORS.get(task, {}).get(checkpoint.format)
        return needed is None or all(n in stored for n in needed)

    ours = (checkpoint.extra or {}).get("task")
    if ours in classes:
        return DetectedTask(ours, ours, [])
    if checkpoint.format == "hf":
        architectures = list(checkpoint.config.get("architectures") or [])
        by_architecture = {cls.hf_architecture: name for name, cls in classes.items()
                           if cls.hf_architecture != "BertModel"}
        for arch in architectures:
            if arch in by_architecture and has_head(by_architecture[arch]):
                return DetectedTask(by_architecture[arch], arch, [])
        source = architectures[0] if architectures else "HF checkpoint"
        if not architectures:  # no class name recorded: go by the tensors
            for task in HEAD_TENSORS:
                if task in classes and checkpoint.format in HEAD_TENSORS[task] and has_head(task):
                    return DetectedTask(task, source, [])
    elif checkpoint.format == "keras_hub":  # its task.json named the task (in `extra`) or there is none
        source = "KerasHub preset"
    else:
        source = "Google checkpoint"
        for task in HEAD_TENSORS:
            if task in classes and checkpoint.format in HEAD_TENSORS[task] and has_head(task):
                return DetectedTask(task, source, [])
    return DetectedTask(None, source, checkpoint.head_tensor_names())


def _summary(names, limit=4):
    """`cls.predictions.* (5 tensors), qa_outputs.* (2 tensors)`: names grouped by head."""
    groups = {}
    for name in names:
        sep = "/" if "/" in name else "."
        parts = name.split(sep)
        depth = 2 if parts[0] == "cls" and len(parts) > 2 else 1
        key = sep.join(parts[:depth]) + (f"{sep}*" if len(parts) > depth else "")
        groups.setdefault(key, []).append(name)
    shown = [f"{key} ({len(v)} tensor{'s' if len(v) > 1 else ''})" if key.endswith("*") else key
             for key, v in groups.items()]
    return ", ".join(shown[:limit]) + (", ..." if len(shown) > limit else "")
