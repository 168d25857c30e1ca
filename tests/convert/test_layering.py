"""The package's layers depend one way: preprocessing <- models <- convert/training/export/commands.

Checked on the source (every `import`, `from ... import` and `import_module("...")`,
including the ones inside functions), since at run time `import keras_bert_zoo` loads
everything anyway and would hide a circle.
"""

import ast
import importlib
import pathlib

import pytest

import keras_bert_zoo

PACKAGE = pathlib.Path(keras_bert_zoo.__file__).parent
ROOT = "keras_bert_zoo"

# Everything above the models in the data flow (and the package root, which imports it all).
ABOVE_MODELS = ("convert", "training", "export", "commands", "tasks", "cli", "demo")
FORBIDDEN = {
    "models": ABOVE_MODELS,
    "preprocessing": ("models",) + ABOVE_MODELS,
}


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path):
    """`(line, module)` for every module the file imports, relative imports resolved."""
    return imported_in(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def imported_in(source, name, is_package=False):
    package = name if is_package else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                # `from keras_bert_zoo import convert` imports the module `convert`;
                # `from keras_bert_zoo import BertBackbone` imports the package root.
                candidate = PACKAGE.parent.joinpath(*f"{base}.{alias.name}".split("."))
                if candidate.with_suffix(".py").exists() or candidate.is_dir():
                    yield node.lineno, f"{base}.{alias.name}"
                else:
                    yield node.lineno, base
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def violations(layer):
    found = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, module in imported(path):
            parts = module.split(".")
            if parts[0] != ROOT:
                continue
            # The package root re-exports every layer (convert included): importing it is importing them.
            bad = len(parts) == 1 or parts[1] in FORBIDDEN[layer]
            if bad:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    return found


def test_models_import_nothing_above_them():
    modules = [module_name(p) for p in sorted((PACKAGE / "models").rglob("*.py"))]
    for name in modules:  # each one imports on its own terms
        importlib.import_module(name)
    assert "keras_bert_zoo.models.loading" in modules and "keras_bert_zoo.models.weight_names" in modules
    assert violations("models") == []


def test_preprocessing_imports_nothing_from_models_or_above():
    assert violations("preprocessing") == []


def test_the_checker_sees_every_kind_of_import():
    source = (
        "import keras_bert_zoo.export\n"
        "def f():\n    from keras_bert_zoo.convert.checkpoint import Checkpoint\n"
        "    from ..training import optimizer\n    from .. import commands\n"
        "import importlib\nimportlib.import_module('keras_bert_zoo.tasks')\n"
    )
    seen = {m for _, m in imported_in(source, "keras_bert_zoo.models.sample")}
    assert {
        "keras_bert_zoo.export",
        "keras_bert_zoo.convert.checkpoint",
        "keras_bert_zoo.training.optimizer",
        "keras_bert_zoo.commands",
        "keras_bert_zoo.tasks",
    } <= seen
    # A sibling module is not the package root; a re-exported name is.
    assert {m for _, m in imported_in("from keras_bert_zoo import files", "keras_bert_zoo.models.x")} == {
        "keras_bert_zoo.files"
    }
    assert {m for _, m in imported_in("from keras_bert_zoo import BertBackbone", "keras_bert_zoo.models.x")} == {
        "keras_bert_zoo"
    }


def test_convert_registers_its_formats_with_the_models():
    from keras_bert_zoo.convert import hub, keras_hub_writer
    from keras_bert_zoo.convert.checkpoint import open_checkpoint, save_preset
    from keras_bert_zoo.models import loading

    assert loading.registered_hooks() == {
        "reader": open_checkpoint,
        "writer": save_preset,
        "resolver": hub.resolve,
        "keras_hub_writer": keras_hub_writer.write_keras_hub_preset,
    }


def test_without_a_registered_reader_the_error_says_what_to_import(tmp_path):
    from keras_bert_zoo import BertBackbone
    from keras_bert_zoo.models import loading

    reader = loading.registered_hooks()["reader"]
    loading.register_checkpoint_reader(None)
    try:
        with pytest.raises(RuntimeError, match="import keras_bert_zoo"):
            BertBackbone.from_preset(str(tmp_path))
    finally:
        loading.register_checkpoint_reader(reader)
    assert loading.registered_hooks()["reader"] is reader


def test_training_registers_the_default_optimizer_with_the_models():
    from keras_bert_zoo.models import task
    from keras_bert_zoo.training.optimizer import BertAdamW, default_optimizer

    assert task.default_optimizer_factory() is default_optimizer
    first, second = task.default_optimizer(), task.default_optimizer()
    assert isinstance(first, BertAdamW) and first is not second  # a new one for every compile


def test_importing_the_package_alone_registers_the_default_optimizer():
    """`import keras_bert_zoo` and nothing else (a fresh process): `compile()` works, as
    the error message below promises (it once needed `keras_bert_zoo.training` imported
    by something else first, so a test passed or failed with the order of the suite), and
    `keras.saving.load_model` finds the task classes of a `.keras` file (the package root
    resolves its names lazily for the `bert-zoo` command, never for a script)."""
    import subprocess
    import sys

    code = (
        "import keras_bert_zoo, sys; from keras_bert_zoo.models import task; import keras; "
        "found = keras.saving.get_registered_object('keras_bert_zoo>BertClassifier'); "
        "sys.exit(task.default_optimizer_factory() is None or found is None)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=300).returncode == 0


def test_without_a_registered_optimizer_compile_auto_says_what_to_import():
    from keras_bert_zoo import BertBackbone, BertClassifier
    from keras_bert_zoo.models import task

    backbone = BertBackbone(
        vocabulary_size=10, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8, max_sequence_length=8
    )
    factory = task.default_optimizer_factory()
    task.register_default_optimizer(None)
    try:
        with pytest.raises(RuntimeError, match="import keras_bert_zoo"):
            BertClassifier(backbone=backbone, num_classes=2).compile()
    finally:
        task.register_default_optimizer(factory)
    assert task.default_optimizer_factory() is factory
