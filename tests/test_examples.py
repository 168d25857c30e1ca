"""Every file in examples/ runs end to end with `--smoke` and prints one `RESULT name=value ...` line
whose values lie within the bounds `EXPECT` declares for that file; the learning-rate schedule of each
example's recipe reaches its final value exactly at its last step (`SCHEDULED`).

The examples run in this process (`runpy`, `sys.argv` patched, stdout captured): importing
TensorFlow again for each would cost ~10 s per file. `distributed_training.py` runs in a
subprocess, as it must split the CPU into logical devices before TensorFlow starts.
A file in examples/ that is not declared below (in DEFAULT or SLOW, and in EXPECT) fails
`test_every_example_is_declared`.
"""

import contextlib
import io
import math
import os
import re
import runpy
import subprocess
import sys
from unittest import mock

import keras
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
    "chinese_ner.py": ["msra_ner"],
    "chinese_sentiment.py": ["zh_sentiment", "msra_ner"],
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
# The examples whose recipe is BERT's warm-up/decay schedule (`create_optimizer`): their run must
# end it exactly at the last step (`_check_schedules_end_at_the_last_step`; distributed_training.py
# runs in a subprocess, where it is not watched).
SCHEDULED = {
    "text_classification.py",
    "sentence_pair_classification.py",
    "named_entity_recognition.py",
    "question_answering.py",
    "pretraining_from_scratch.py",
    "domain_adaptive_pretraining.py",
    "multiple_choice.py",
    "serving.py",
    "chinese_ner.py",
    "chinese_sentiment.py",
}

# file -> {RESULT key: (low, high)}, both inclusive. Every key is required (OPTIONAL lists the
# ones a --smoke run leaves out) and a key not declared here fails: a renamed or missing figure
# cannot pass unnoticed. Trained figures after a smoke budget are only range-checked; the
# deterministic ones (loading_checkpoints, serving's SavedModel vs Keras) are checked as measured.
UNIT = (0.0, 1.0)  # accuracy, F1, exact match
CORRELATION = (-1.0, 1.0)  # Spearman
EXPECT = {
    "loading_checkpoints.py": {
        "google_max_diff": (0.0, 1e-6),  # the same weights, read back from a Google checkpoint
        "converted_max_diff": (0.0, 1e-6),  # ... and from the converted preset
        "tanh_gelu_max_diff": (math.nextafter(1e-4, math.inf), math.inf),  # > 1e-4: the GELU trap shows
        "hf_max_diff": (0.0, 1e-4),  # vs HF transformers' BertModel (full run only)
    },
    "serving.py": {"accuracy": UNIT, "max_difference": (0.0, 1e-5)},  # SavedModel vs Keras probabilities
    "semantic_search.py": {"spearman_mean": CORRELATION, "spearman_cls": CORRELATION},
    "text_classification.py": {"accuracy": UNIT},
    "sentence_pair_classification.py": {"f1": UNIT, "accuracy": UNIT},
    "named_entity_recognition.py": {"f1": UNIT},
    "question_answering.py": {"exact_match": UNIT, "f1": UNIT},
    "pretraining_from_scratch.py": {"mlm_accuracy": UNIT, "nsp_accuracy": UNIT, "baseline": UNIT},
    "domain_adaptive_pretraining.py": {"accuracy_with": UNIT, "accuracy_without": UNIT},
    "multiple_choice.py": {"accuracy": UNIT},
    "feature_based_ner.py": {"f1": UNIT},
    "distributed_training.py": {"accuracy": UNIT, "replicas": (2, 2)},
    "chinese_ner.py": {"f1": UNIT},
    "chinese_sentiment.py": {"accuracy": UNIT},
}
OPTIONAL = {"loading_checkpoints.py": {"hf_max_diff"}}  # --smoke skips the comparison with HF


def _tiny_chinese_checkpoint(tmp_path):
    """`--model DIR`: a tiny Chinese checkpoint HF's classes write, its characters from MSRA sentences (the Chinese
    examples' default, `bert_base_chinese`, is Google's and cannot download here)."""
    from tests.chinese_fixtures import CHINESE_SENTENCES, msra_sentences, write_chinese_checkpoint

    texts = CHINESE_SENTENCES + msra_sentences(os.path.join(SHARED_DATA, "msra_ner", "train.txt"), limit=64)
    return ["--model", write_chinese_checkpoint(str(tmp_path / "zh_tiny"), texts=texts, do_lower_case=True)]


# file -> the extra arguments of its smoke run, from the test's temporary directory.
SMOKE_ARGS = {"chinese_ner.py": _tiny_chinese_checkpoint, "chinese_sentiment.py": _tiny_chinese_checkpoint}


def _listed():
    return sorted(f for f in os.listdir(EXAMPLES_DIR) if f.endswith(".py"))


def test_every_example_is_declared():
    assert set(_listed()) == set(DEFAULT) | set(SLOW), (
        "examples/ and the DEFAULT / SLOW tables of tests/test_examples.py differ: declare each example once"
    )
    assert not set(DEFAULT) & set(SLOW)
    assert set(_listed()) == set(EXPECT), "examples/ and EXPECT differ: declare the RESULT bounds of each example"
    assert len(DEFAULT) >= len(_listed()) / 2, "at least half of the examples run in the default suite"


def _requirements(name):
    folders = DEFAULT.get(name, SLOW.get(name, []))
    for folder in folders:
        if not os.path.isdir(os.path.join(SHARED_DATA, folder)):
            pytest.skip(f"shared data {folder}/ not found under {SHARED_DATA} (the repo expects ../shared/data)")
    minilm_path()  # skips without the real checkpoint


def _recording_fit(schedules):
    """`keras.Model.fit` that records, after each call, the steps run by its optimizer and the
    optimizer's warm-up/decay schedule (`schedules[id(optimizer)] = (steps, schedule)`)."""
    original = keras.Model.fit

    def fit(self, *args, **kwargs):
        history = original(self, *args, **kwargs)
        schedule = getattr(self.optimizer, "learning_rate_schedule", None)
        if getattr(schedule, "total_steps", None) is not None:
            schedules[id(self.optimizer)] = (int(self.optimizer.iterations.numpy()), schedule)
        return history

    return fit


def _check_schedules_end_at_the_last_step(name, schedules):
    """Each recipe's learning rate reaches its final value (0) exactly after its last step:
    a schedule sized for fewer steps than ran trains its last steps at rate 0."""
    assert bool(schedules) == (name in SCHEDULED), f"{name}: schedules seen {len(schedules)}; update SCHEDULED"
    for steps, schedule in schedules.values():
        assert steps == schedule.total_steps, f"{name}: {steps} steps ran on a schedule of {schedule.total_steps}"
        assert float(schedule(steps - 1)) > 0.0 and float(schedule(steps)) == 0.0, name


def _run_in_process(path, extra=()):
    out, schedules = io.StringIO(), {}
    with (
        mock.patch.object(sys, "argv", [path, "--smoke", *extra]),
        contextlib.redirect_stdout(out),
        mock.patch.object(keras.Model, "fit", _recording_fit(schedules)),
    ):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:  # a clear-message exit is a failure of the smoke run
            if e.code not in (None, 0):
                pytest.fail(f"{os.path.basename(path)} exited with {e.code!r}:\n{out.getvalue()[-3000:]}")
    _check_schedules_end_at_the_last_step(os.path.basename(path), schedules)
    return out.getvalue()


def _run_in_subprocess(path):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, path, "--smoke"], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, f"{os.path.basename(path)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def _check(name, tmp_path):
    _requirements(name)
    path = os.path.join(EXAMPLES_DIR, name)
    extra = SMOKE_ARGS[name](tmp_path) if name in SMOKE_ARGS else ()
    stdout = _run_in_subprocess(path) if name in SUBPROCESS else _run_in_process(path, extra)
    results = [line for line in stdout.splitlines() if line.startswith("RESULT")]
    assert len(results) == 1, f"{name} printed {len(results)} RESULT lines:\n{stdout[-3000:]}"
    assert RESULT_LINE.fullmatch(results[0]), f"{name}: malformed result line {results[0]!r}"
    _check_values(name, results[0])


def _check_values(name, line):
    assert name in EXPECT, f"{name} has no EXPECT entry in tests/test_examples.py: declare its RESULT bounds"
    values = {k: float(v) for k, v in (item.split("=") for item in line.split()[1:])}
    bounds = EXPECT[name]
    assert set(values) <= set(bounds), f"{name}: RESULT keys {sorted(set(values) - set(bounds))} not in EXPECT"
    missing = set(bounds) - OPTIONAL.get(name, set()) - set(values)
    assert not missing, f"{name}: RESULT lacks {sorted(missing)}: {line!r}"
    outside = {k: (v, bounds[k]) for k, v in values.items() if not bounds[k][0] <= v <= bounds[k][1]}
    assert not outside, f"{name}: values outside their bounds (value, (low, high)): {outside}"


def test_result_check_can_fail():
    """The bounds check rejects a wrong figure, a missing key and an undeclared key."""
    _check_values("serving.py", "RESULT accuracy=0.5000 max_difference=0.00e+00")
    _check_values(
        "loading_checkpoints.py",
        "RESULT google_max_diff=0.00e+00 converted_max_diff=0.00e+00 tanh_gelu_max_diff=2.58e-03",
    )
    for bad in (
        "RESULT accuracy=1.5000 max_difference=0.00e+00",  # accuracy > 1
        "RESULT accuracy=0.5000 max_difference=2.00e-03",  # SavedModel differs from Keras
        "RESULT accuracy=0.5000",  # a key missing
        "RESULT accuracy=0.5 max_difference=0 extra=1",
    ):  # a key not declared
        with pytest.raises(AssertionError):
            _check_values("serving.py", bad)
    with pytest.raises(AssertionError):  # the GELU trap no longer visible
        _check_values(
            "loading_checkpoints.py",
            "RESULT google_max_diff=0.00e+00 converted_max_diff=0.00e+00 tanh_gelu_max_diff=1.00e-04",
        )
    with pytest.raises(AssertionError):
        _check_values("not_declared.py", "RESULT accuracy=0.5")


@pytest.mark.parametrize("name", sorted(DEFAULT))
def test_example_smoke(name, tmp_path):
    _check(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_slow_example_smoke(name, tmp_path):
    _check(name, tmp_path)


# The examples that read a data set (distributed_training.py is left out: it needs a fresh process).
TAKES_DATA_DIR = sorted(n for n in set(DEFAULT) | set(SLOW) if n != "loading_checkpoints.py" and n not in SUBPROCESS)


@pytest.mark.parametrize("name", TAKES_DATA_DIR)
def test_missing_data_dir_names_the_flag(name, tmp_path):
    """A wrong --data-dir stops the example with one message naming the flag, before any model is built."""
    minilm_path()  # the examples look up the checkpoint before reading data; skips without it
    path = os.path.join(EXAMPLES_DIR, name)
    missing = str(tmp_path / "nonexistent")
    with (
        mock.patch.object(sys, "argv", [path, "--data-dir", missing, "--smoke"]),
        contextlib.redirect_stdout(io.StringIO()),
        pytest.raises(SystemExit) as exit_info,
    ):
        runpy.run_path(path, run_name="__main__")
    message = str(exit_info.value.code)
    assert "--data-dir" in message and missing in message, message
