"""A normal `bert-zoo` run prints its own lines only: no TensorFlow start-up log, no Keras warnings."""

import os
import re
import subprocess
import sys

import pytest

from keras_bert_zoo.quiet import TF_NOISE
from tests.helpers import minilm_path, shared_data

# What leaks when nothing filters (seen with TF 2.21 / Keras 3 on this CPU), plus warnings in general.
LEAKS = re.compile(TF_NOISE.pattern + r"|Warning|WARNING|warn\(|^[IWE]\d{4} ", re.MULTILINE)


def _run(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}
    bin_dir = os.path.dirname(sys.executable)
    command = os.path.join(bin_dir, "bert-zoo")
    if not os.path.exists(command):  # not installed as a script: the module entry filters from main()
        command = None
    argv = [command] if command else [sys.executable, "-m", "keras_bert_zoo.cli"]
    done = subprocess.run(argv + args, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow  # over a minute together with the others: kept out of the 20-minute default run
def test_finetune_and_pretrain_print_no_tensorflow_or_keras_noise(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\n" + "".join(f"a good film {i}\t1\nbad plot {i}\t0\n" for i in range(24)))
    out = _run(
        [
            "finetune",
            "classify",
            "--model",
            minilm_path(),
            "--glue",
            "sst2",
            "--train",
            str(train),
            "--dev",
            str(train),
            "--out",
            str(tmp_path / "ft"),
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--sequence-length",
            "16",
            "--eval-every",
            "2",
        ],
        tmp_path,
    )
    assert "accuracy=" in out
    leaks = [line for line in out.splitlines() if LEAKS.search(line)]
    assert not leaks, leaks

    corpus = shared_data("pretrain_text", "sample_text.txt")
    out = _run(
        [
            "pretrain",
            "--corpus",
            corpus,
            "--preset",
            "bert_tiny_uncased",
            "--vocab-size",
            "300",
            "--steps",
            "3",
            "--eval-every",
            "2",
            "--holdout-every",
            "3",
            "--eval-batches",
            "1",
            "--batch-size",
            "4",
            "--sequence-length",
            "32",
            "--jit-compile",
            "true",
            "--out",
            str(tmp_path / "pt"),
        ],
        tmp_path,
    )
    assert "'steps': 3" in out
    leaks = [line for line in out.splitlines() if LEAKS.search(line)]
    assert not leaks, leaks
