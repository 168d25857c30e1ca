"""Every file in examples/ runs end to end with `--smoke` and prints one `RESULT name=value ...` line.

The examples run in this process (`runpy`, `sys.argv` patched, stdout captured): importing
TensorFlow again for each would cost ~10 s per file. `distributed_training.py` runs in a
subprocess, as it must split the CPU into logical devices before TensorFlow starts.
A file in examples/ that is not declared below fails `test_every_example_is_declared`.
"""

import contextlib
import io
import os
import re
import runpy
import subprocess
import sys
from unittest import mock

import pytest

from tests.helpers import REPO_ROOT, SHARED_DATA, minilm_path

EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples")
RESULT_LINE = re.compile(r"RESULT( [a-z][a-z0-9_]*=-?[0-9][0-9.]*(e[-+][0-9]+)?)+")

# file -> shared-data folders it reads. DEFAULT run in the default suite (cheap smokes),
# SLOW (training-heavy smokes, or a fresh process) only with `-m slow`.
DEFAULT = {
    "semantic_search.py": ["stsb"],
    "loading_checkpoints.py": [],
    "text_classification.py": ["sst2"],
    "sentence_pair_classification.py": ["mrpc"],
    "named_entity_recognition.py": ["conll2003"],
    "question_answering.py": ["squad"],
}
SLOW = {
    "pretraining_from_scratch.py": ["pretrain_text"],
    "domain_adaptive_pretraining.py": ["sst2"],
    "multiple_choice.py": ["pretrain_text", "swag"],
    "feature_based_ner.py": ["conll2003"],
    "serving.py": ["sst2"],
    "distributed_training.py": ["sst2"],
}
SUBPROCESS = {"distributed_training.py"}


def _listed():
    return sorted(f for f in os.listdir(EXAMPLES_DIR) if f.endswith(".py"))


def test_every_example_is_declared():
    assert set(_listed()) == set(DEFAULT) | set(SLOW), (
        "examples/ and the DEFAULT / SLOW tables of tests/test_examples.py differ: declare each example once")
    assert not set(DEFAULT) & set(SLOW)
    assert len(DEFAULT) >= len(_listed()) / 2, "at least half of the examples run in the default suite"


def _requirements(name):
    folders = DEFAULT.get(name, SLOW.get(name, []))
    for folder in folders:
        if not os.path.isdir(os.path.join(SHARED_DATA, folder)):
            pytest.skip(f"shared data {folder}/ not found under {SHARED_DATA} (the repo expects ../shared/data)")
    minilm_path()  # skips without the real checkpoint


def _run_in_process(path):
    out = io.StringIO()
    with mock.patch.object(sys, "argv", [path, "--smoke"]), contextlib.redirect_stdout(out):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:  # a clear-message exit is a failure of the smoke run
            if e.code not in (None, 0):
                pytest.fail(f"{os.path.basename(path)} exited with {e.code!r}:\n{out.getvalue()[-3000:]}")
    return out.getvalue()


def _run_in_subprocess(path):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, path, "--smoke"], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, f"{os.path.basename(path)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def _check(name):
    _requirements(name)
    path = os.path.join(EXAMPLES_DIR, name)
    stdout = _run_in_subprocess(path) if name in SUBPROCESS else _run_in_process(path)
    results = [line for line in stdout.splitlines() if line.startswith("RESULT")]
    assert len(results) == 1, f"{name} printed {len(results)} RESULT lines:\n{stdout[-3000:]}"
    assert RESULT_LINE.fullmatch(results[0]), f"{name}: malformed result line {results[0]!r}"


@pytest.mark.parametrize("name", sorted(DEFAULT))
def test_example_smoke(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_slow_example_smoke(name):
    _check(name)
