"""One place per task: the registry finds task modules; verbs and export hold no task names."""

import ast
import os

import pytest

from keras_bert_zoo.tasks import get_task, task_names, task_of_model_dir
from keras_bert_zoo.tasks.base import TaskSpec
from tests.helpers import REPO_ROOT

PACKAGE = os.path.join(REPO_ROOT, "keras_bert_zoo")


def test_classify_and_pretrain_are_registered_by_both_names():
    assert task_names() == sorted(task_names())
    assert {"classify", "pretrain"} <= set(task_names())
    assert "pretrain" not in task_names(finetunable=True)
    assert get_task("classify") is get_task("BertClassifier")
    assert get_task("pretrain").model_class().__name__ == "BertPretrainer"
    assert get_task("tag") is get_task("BertTagger")
    assert get_task("embed") is get_task("BertSentenceEmbedder") and "embed" not in task_names(finetunable=True)
    with pytest.raises(ValueError, match="unknown task 'parse'; known tasks: " + ", ".join(sorted(task_names()))):
        get_task("parse")


def test_every_task_implements_what_the_verbs_call():
    for name in task_names():
        spec = get_task(name)
        assert isinstance(spec, TaskSpec)
        assert get_task(spec.model_class().__name__) is spec  # found by its class's name too
        assert spec.serving is not None, f"{name} has no SavedModel serving"
        assert type(spec).evaluate is not TaskSpec.evaluate, f"{name} cannot be evaluated"
        if spec.finetunable:
            for method in ("read_data", "build_model", "dataset", "score", "predict"):
                assert getattr(type(spec), method) is not getattr(TaskSpec, method), f"{name}.{method}"


def _string_constants(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_verbs_and_export_name_no_task():
    """Adding a task must not touch the CLI verbs, the fine-tuning job or the exporter."""
    names = {"classify", "BertClassifier", "BertPretrainer", "tag", "qa", "BertTagger", "BertSpanQA"}
    for relative in (
        "commands/evaluate.py",
        "commands/export.py",
        "commands/predict.py",
        "commands/finetune.py",
        "tasks/finetuning.py",
        "export/saved_model.py",
        "cli.py",
    ):
        found = names & _string_constants(os.path.join(PACKAGE, relative))
        assert not found, f"{relative} names tasks {found}"


def test_commands_stay_thin_and_nothing_imports_them():
    for name in os.listdir(os.path.join(PACKAGE, "commands")):
        with open(os.path.join(PACKAGE, "commands", name), encoding="utf-8") as f:
            assert len(f.read().splitlines()) <= 120, f"commands/{name} is over 120 lines"
    for folder in ("keras_bert_zoo", "benchmarks", "examples"):
        root = os.path.join(REPO_ROOT, folder)
        for dirpath, _, files in os.walk(root):
            if os.path.basename(dirpath) == "commands":
                continue
            for name in files:
                if name.endswith(".py") and name != "cli.py":
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        assert "keras_bert_zoo.commands" not in f.read(), os.path.join(dirpath, name)


def test_model_dir_without_a_known_task_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="has no config.json"):
        task_of_model_dir(str(tmp_path), "evaluate")
    # No task at all: what the directory holds and what to run instead, never "holds task None".
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(
        ValueError,
        match=r"holds a BERT encoder without a task head .*so evaluate has nothing to "
        r"run: fine-tune it first \(`bert-zoo finetune TASK",
    ):
        task_of_model_dir(str(tmp_path), "evaluate")
    (tmp_path / "config.json").write_text('{"architectures": ["BertForTokenClassification"]}')
    with pytest.raises(
        ValueError,
        match=r"is an HF BertForTokenClassification checkpoint, not converted yet; "
        r"convert it once \(`bert-zoo convert --from",
    ):
        task_of_model_dir(str(tmp_path), "predict")
    (tmp_path / "config.json").write_text('{"keras_bert_zoo": {"task": "BertRanker"}}')
    with pytest.raises(ValueError, match="holds task 'BertRanker'; evaluate handles"):
        task_of_model_dir(str(tmp_path), "evaluate")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        task_of_model_dir(str(tmp_path), "evaluate")


def test_a_model_finds_its_task_by_class_not_by_name():
    """The exporter's lookup (`task_of_model`): a user's subclass of a task model is served as
    that task; a class that merely shares the name is refused with the list of task models."""
    from keras_bert_zoo.errors import UsageError
    from keras_bert_zoo.tasks.registry import task_of_model
    from keras_bert_zoo.tasks.tagger.model import BertTagger

    class MyTagger(BertTagger):
        pass

    assert task_of_model(MyTagger.__new__(MyTagger)).name == "tag"
    assert task_of_model(MyTagger.__new__(MyTagger)).serving.__name__ == "TaggerServing"
    impostor = type("BertTagger", (), {})()
    with pytest.raises(
        UsageError,
        match=r"a BertTagger is not the model of any task; the task models are "
        r"BertClassifier, .*BertTagger",
    ):
        task_of_model(impostor)
