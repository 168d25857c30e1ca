"""Which task a checkpoint holds, from the heads the task specs declare (`TaskSpec.checkpoint_heads`)."""

import pytest

from keras_bert_zoo.convert.tasks import detect_task, task_classes
from keras_bert_zoo.tasks.registry import all_tasks

PRETRAINING = {
    "hf": ("cls.predictions.transform.dense.weight", "cls.seq_relationship.weight"),
    "google": ("cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_weights"),
}


class FakeCheckpoint:
    """What `detect_task` reads of a checkpoint: its format, config, extra and tensor names."""

    def __init__(self, format, tensors, architectures=None):
        self.format, self.extra = format, {}
        self.config = {"architectures": architectures} if architectures else {}
        self._tensors = list(tensors)

    def tensor_names(self):
        return self._tensors

    def head_tensor_names(self):
        return [n for n in self._tensors if not n.startswith(("bert.", "bert/"))]


def test_task_models_are_the_registered_tasks_models():
    assert task_classes() == {spec.model_class().__name__: spec.model_class() for spec in all_tasks()}


@pytest.mark.parametrize(
    "format, tensors, expected",
    [
        # A classifier's tensors are also multiple choice's: with no class name, classify wins.
        ("hf", ["bert.embeddings.word_embeddings.weight", "classifier.weight", "classifier.bias"], "BertClassifier"),
        # A Google checkpoint with the pretraining heads and a top-level classifier: the pretrainer.
        (
            "google",
            ["bert/embeddings/word_embeddings", *PRETRAINING["google"], "output_weights", "output_bias"],
            "BertPretrainer",
        ),
        ("google", ["bert/embeddings/word_embeddings", "output_weights", "output_bias"], "BertClassifier"),
        ("hf", ["bert.embeddings.word_embeddings.weight", *PRETRAINING["hf"]], "BertPretrainer"),
    ],
)
def test_a_checkpoint_without_a_class_name_goes_by_head_tensors_in_declared_order(format, tensors, expected):
    assert detect_task(FakeCheckpoint(format, tensors)).task == expected


def test_a_named_class_needs_its_head_tensors_or_converts_as_a_backbone():
    named = FakeCheckpoint(
        "hf", ["bert.embeddings.word_embeddings.weight", "cls.predictions.bias"], architectures=["BertForPreTraining"]
    )
    found = detect_task(named)
    assert found.task is None and found.dropped == ["cls.predictions.bias"]
    choice = FakeCheckpoint(
        "hf",
        ["bert.embeddings.word_embeddings.weight", "classifier.weight", "classifier.bias"],
        architectures=["BertForMultipleChoice"],
    )
    assert detect_task(choice).task == "BertMultipleChoice"
