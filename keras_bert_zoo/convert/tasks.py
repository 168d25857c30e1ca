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

Where a task declares its head's tensors (`TaskSpec.checkpoint_heads`, in the task's own
module) they must be there too: an HF config that says
`BertForPreTraining` over a checkpoint without `cls.*` tensors converts as a backbone. A
head nothing above matches (HF `BertForMaskedLM` without NSP, a Google run_squad.py
checkpoint's `cls/squad/*`, ...) is reported as dropped, and the backbone is kept.
"""

import dataclasses

from keras_bert_zoo.tasks.registry import all_tasks

__all__ = ["DetectedTask", "task_classes", "detect_task"]


@dataclasses.dataclass
class DetectedTask:
    task: str  # class name of our task model, or None: backbone only
    source: str  # what the checkpoint says it is ("BertForPreTraining", "Google checkpoint", ...)
    dropped: list  # tensor names of a head no task model here reads

    def dropped_line(self):
        """One line saying which head was dropped, or None when nothing was."""
        if not self.dropped:
            return None
        return (
            f"{self.source}: no task model here reads its head ({_summary(self.dropped)}); "
            "dropped it and kept the backbone"
        )


def task_classes():
    """`{class name: class}` of every registered task's model (`keras_bert_zoo.tasks`)."""
    return {spec.model_class().__name__: spec.model_class() for spec in all_tasks()}


def detect_task(checkpoint):
    """The task model that can hold all of `checkpoint`'s weights, as a `DetectedTask`."""
    # Checkpoints that name no class are matched by their head tensors, in the tasks' declared
    # order: the pretraining heads before a classifier's, a classifier before multiple choice
    # (whose tensors it shares).
    specs = sorted(all_tasks(), key=lambda spec: spec.head_priority)
    classes, heads = {}, {}
    for spec in specs:
        name = spec.model_class().__name__
        classes[name], heads[name] = spec.model_class(), spec.checkpoint_heads
    stored = set(checkpoint.tensor_names())

    def has_head(task):
        needed = heads.get(task, {}).get(checkpoint.format)
        return needed is None or all(n in stored for n in needed)

    def by_tensors():
        for task, formats in heads.items():
            if checkpoint.format in formats and has_head(task):
                return task
        return None

    ours = (checkpoint.extra or {}).get("task")
    if ours in classes:
        return DetectedTask(ours, ours, [])
    if checkpoint.format == "hf":
        architectures = list(checkpoint.config.get("architectures") or [])
        by_architecture = {
            cls.hf_architecture: name for name, cls in classes.items() if cls.hf_architecture != "BertModel"
        }
        for arch in architectures:
            if arch in by_architecture and has_head(by_architecture[arch]):
                return DetectedTask(by_architecture[arch], arch, [])
        source = architectures[0] if architectures else "HF checkpoint"
        if not architectures and by_tensors():  # no class name recorded: go by the tensors
            return DetectedTask(by_tensors(), source, [])
    elif checkpoint.format == "keras_hub":  # its task.json named the task (in `extra`) or there is none
        source = "KerasHub preset"
    else:
        source = "Google checkpoint"
        if by_tensors():
            return DetectedTask(by_tensors(), source, [])
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
    shown = [
        f"{key} ({len(v)} tensor{'s' if len(v) > 1 else ''})" if key.endswith("*") else key for key, v in groups.items()
    ]
    return ", ".join(shown[:limit]) + (", ..." if len(shown) > limit else "")
