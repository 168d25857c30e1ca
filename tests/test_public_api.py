"""The public/private split of the package, and tests that use only its public side.

- Every module of `keras_bert_zoo` whose name does not start with `_` has an `__all__`:
  the names it offers (to users, and to the package's other modules). Every name there
  exists, and every top-level class, function or constant without a leading underscore
  is there: a helper is `_named`, so nothing is public by accident.
- Whatever the package, the tests, the examples and the benchmarks import from a module
  of the package (`from keras_bert_zoo.X import name`) is in that module's `__all__`.
- Everything in the root `__all__` imports (`from keras_bert_zoo import name`).
- No test reads, patches or imports a private name of the package (one that starts with
  `_` and that the package defines): a test goes through what a user can call, so a
  refactoring behind the public names cannot break it. Other libraries' internals (Keras'
  `_flatten_layers`, argparse's `_actions`) are theirs, not checked here.
- No test imports a benchmark script or puts `benchmarks/` on `sys.path`: tests run a
  benchmark as a user would (`python benchmarks/run.py NAME ...`), and what both need lives
  on each side (the HF reference step of tests/helpers.py is the tests' own copy).

The module checks read the sources (ast) and then import each module once.
"""

import ast
import importlib
import pathlib

import pytest

from tests import test_architecture
from tests.test_architecture import PACKAGE, ROOT, module_name

# {module name: parsed tree} of every module under keras_bert_zoo/ (private ones too).
SOURCES = {name: tree for name, (_, tree, _) in test_architecture.SOURCES.items()}
PUBLIC_MODULES = sorted(m for m in SOURCES if not any(part.startswith("_") for part in m.split(".")))


def declared_all(tree):
    """The names of a module's top-level `__all__ = [...]` (None when it has none)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(element) for element in node.value.elts]
    return None


def defined_names(tree):
    """Top-level classes, functions and assigned names (inside a top-level `if`/`try` too)."""
    found = []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.extend(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return found


def unlisted_public_names(tree):
    """Names a module defines without a leading underscore that its `__all__` leaves out (a name
    it also imports, such as `fast = None` when `import fast` fails, is that module's, not its own)."""
    listed = set(declared_all(tree) or ())
    top_level = [n for node in tree.body for n in (ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node])]
    imported = {
        (a.asname or a.name).split(".")[0]
        for node in top_level
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names
    }
    return sorted({n for n in defined_names(tree) if not n.startswith("_") and n not in listed | imported})


def test_every_public_module_has_an_all_listing_what_exists():
    assert len(PUBLIC_MODULES) > 100, PUBLIC_MODULES
    missing = [m for m in PUBLIC_MODULES if declared_all(SOURCES[m]) is None]
    assert not missing, f"modules without __all__: {missing}"
    problems = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        listed = declared_all(SOURCES[name])
        problems += [f"{name}.__all__ names {n!r} twice" for n in set(listed) if listed.count(n) > 1]
        problems += [f"{name}.__all__ names {n!r}, which it does not have" for n in listed if not hasattr(module, n)]
        problems += [f"{name}.__all__ names the private {n!r}" for n in listed if n.startswith("_")]
        problems += [
            f"{name} defines {n!r} without `_` and leaves it out of __all__ (list it, or make it `_{n}`)"
            for n in unlisted_public_names(SOURCES[name])
        ]
    assert not problems, "\n".join(problems)


def test_the_all_checks_see_a_missing_all_and_an_unlisted_name():
    tree = ast.parse(
        "import os\nLIMIT = 3\n_CACHE = {}\ndef helper():\n    pass\nclass Thing:\n    pass\n"
        "try:\n    import fast\nexcept ImportError:\n    fast = None\n"
    )
    assert declared_all(tree) is None
    assert unlisted_public_names(tree) == ["LIMIT", "Thing", "helper"]  # `os`, `fast` imported, `_CACHE` private
    listed = ast.parse('__all__ = ["Thing", "helper"]\n' + ast.unparse(tree))
    assert declared_all(listed) == ["Thing", "helper"] and unlisted_public_names(listed) == ["LIMIT"]


def test_the_root_names_import():
    import keras_bert_zoo

    assert len(keras_bert_zoo.__all__) > 20
    for name in keras_bert_zoo.__all__:
        exec(f"from keras_bert_zoo import {name}", {})  # as a user writes it


def _python_files(*folders):
    for folder in folders:
        yield from sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _test_files():
    """The tests' sources, but this file: its examples of what the checks catch are strings."""
    return [p for p in _python_files("tests") if p != pathlib.Path(__file__).resolve()]


def _imports_from_the_package(tree, importer):
    """(line, module, name) of every `from keras_bert_zoo.X import name` (relative ones resolved)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module
        if node.level:
            base = importer.split(".")[: len(importer.split(".")) - node.level]
            source = ".".join(base + ([node.module] if node.module else []))
        if source and source.split(".")[0] == PACKAGE:
            for alias in node.names:
                yield node.lineno, source, alias.name


def test_what_is_imported_from_a_module_is_in_its_all():
    problems = []
    for path in _python_files(PACKAGE, "tests", "examples", "benchmarks"):
        importer = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, source, name in _imports_from_the_package(tree, importer):
            if f"{source}.{name}" in SOURCES or source not in SOURCES:
                continue  # a submodule (or not a module of ours: reported by the import itself)
            if name.startswith("_") and path.is_relative_to(ROOT / PACKAGE):
                continue  # the package's own private imports (e.g. __init__'s `convert as _convert`)
            if name not in (declared_all(SOURCES[source]) or ()):
                problems.append(
                    f"{path.relative_to(ROOT)}:{line} imports {name!r} from {source}, which does not list it in __all__"
                )
    assert not problems, "\n".join(problems)


# --- tests use the public side --------------------------------------------------------------
def _private_names_of_the_package():
    """Names starting with one `_` that the package defines: functions, classes and methods,
    module and class attributes, and `self._x` attributes its classes set."""
    names = set()
    for tree in SOURCES.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


PRIVATE = _private_names_of_the_package()

# Private names the package defines that are also another library's internal, which a test
# may use on that library's objects -> the library and why.
OTHER_LIBRARIES = {}

PATCHERS = {"setattr", "getattr", "delattr", "hasattr", "setitem", "delitem"}


def private_uses(tree):
    """(line, what) of every use of a private package name in a test module's source."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            found += [
                (node.lineno, f"imports {a.name} from {node.module}") for a in node.names if a.name.startswith("_")
            ]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE and node.attr not in OTHER_LIBRARIES:
            base = node.value  # a test's own fake may use its own private attributes
            if not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                found.append((node.lineno, f"reads {ast.unparse(node)}"))
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for arg in node.args[:2] if called in PATCHERS else ():
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    last = arg.value.rpartition(".")[2]
                    if last in PRIVATE and last not in OTHER_LIBRARIES:
                        found.append((node.lineno, f"{called}(..., {arg.value!r})"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PACKAGE in node.value:
            # code run in a subprocess (`python -c "..."`) is read too
            for word in _dotted_words(node.value):
                if word.rpartition(".")[2] in PRIVATE and word.rpartition(".")[2] not in OTHER_LIBRARIES:
                    found.append((node.lineno, f"code in a string reads {word}"))
    return found


def _dotted_words(text):
    import re

    return re.findall(r"\b[A-Za-z]\w*(?:\.\w+)*\._[A-Za-z]\w*", text)


def test_no_test_uses_a_private_name_of_the_package():
    problems = []
    for path in _test_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        problems += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in private_uses(tree)]
    assert not problems, "tests must go through public names:\n" + "\n".join(problems)


def test_the_private_name_check_sees_each_kind_of_use():
    assert {"_tokenize", "_exchange", "_discover"} <= PRIVATE  # a method, a function, a module function
    source = (
        "from keras_bert_zoo.files import _exchange\n"
        "tokenizer._tokenize(x)\n"
        "monkeypatch.setattr(files, '_exchange', None)\n"
        "monkeypatch.setattr('keras_bert_zoo.files._exchange', None)\n"
        "code = 'import keras_bert_zoo; keras_bert_zoo.tasks.registry._discover()'\n"
        "model._flatten_layers()\n"  # Keras' own internal: not ours
        "class Fake:\n    def _exchange(self):\n        return self._exchange\n"
    )  # a fake's own
    assert sorted({line for line, _ in private_uses(ast.parse(source))}) == [1, 2, 3, 4, 5]


# --- tests do not import the benchmarks -------------------------------------------------------
BENCHMARKS = {p.stem for p in (ROOT / "benchmarks").rglob("*.py")} | {"suite"}


def benchmark_uses(tree):
    """(line, what) of every import of a benchmark script and every `sys.path` change naming benchmarks/."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, f"imports {a.name}")
                for a in node.names
                if a.name.split(".")[0] in BENCHMARKS | {"benchmarks"}
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in BENCHMARKS | {"benchmarks"}:
                found.append((node.lineno, f"imports from {node.module}"))
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            if called.startswith("sys.path.") and any("benchmarks" in s for s in strings):
                found.append((node.lineno, f"{called}(... benchmarks ...)"))
            elif called.endswith(("import_module", "importorskip", "__import__")) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and str(first.value).split(".")[0] in BENCHMARKS | {"benchmarks"}:
                    found.append((node.lineno, f"{called}({first.value!r})"))
    return found


def test_no_test_imports_a_benchmark():
    assert {"common", "run", "suite", "serving"} <= BENCHMARKS
    problems = []
    for path in _test_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        problems += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in benchmark_uses(tree)]
    assert not problems, "run benchmarks as a user would (python benchmarks/run.py NAME):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "import sys, os\nsys.path.insert(0, os.path.join(ROOT, 'benchmarks'))",
        "from common import hf_step",
        "run = pytest.importorskip('run')",
        "from suite import fit_speed",
        "import benchmarks.serving",
    ],
)
def test_the_benchmark_check_sees_each_kind_of_import(source):
    assert benchmark_uses(ast.parse(source))
