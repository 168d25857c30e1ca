"""Kill -9 and resume: `finetune classify` and `pretrain` end with the weights of an uninterrupted run.

Each run is a real `bert-zoo` process. A killed run is the same command started through a wrapper that sends
itself SIGKILL: after a given training step (between checkpoints, in the middle of an epoch) or while a given
checkpoint is being moved into place (the write is complete but not yet published). Rerunning the command
resumes from the newest complete checkpoint, and the final `model.safetensors` must equal the uninterrupted
run's, bit for bit (`--deterministic`). The fine-tuning runs train on batches of several widths, as real text
gives: a train step that traced a resumed run's first batch shape on its own fails them
(`training.loop.train_function`). Slow-marked (real processes); `test_checkpointing.py` checks the same loop
in-process in the default run.
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO_ROOT, minilm_path, shared_data

# Sends SIGKILL to itself after step KILL_AT_STEP, or when the checkpoint directory
# KILL_AT_SAVE is about to be renamed into place; then runs `bert-zoo ARGS`.
KILLER = r"""
import os, signal, sys
from keras_bert_zoo.training import callbacks

step, save = os.environ.get("KILL_AT_STEP"), os.environ.get("KILL_AT_SAVE")
original_end = callbacks.StepLog.on_train_batch_end

def on_train_batch_end(self, batch, logs=None):
    original_end(self, batch, logs)
    if step and self.steps == int(step):
        os.kill(os.getpid(), signal.SIGKILL)

callbacks.StepLog.on_train_batch_end = on_train_batch_end
real_replace = os.replace

def replace(src, dst):
    if save and os.path.basename(dst) == save:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst)

os.replace = replace
from keras_bert_zoo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def bert_zoo(args, **kill):
    env = {
        **os.environ,
        "PYTHONPATH": REPO_ROOT,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        **{f"KILL_AT_{k.upper()}": str(v) for k, v in kill.items()},
    }
    return subprocess.run([sys.executable, "-c", KILLER, *args], capture_output=True, text=True, env=env, timeout=600)


def weights(out):
    from keras_bert_zoo.convert.safetensors_io import read_safetensors

    return read_safetensors(os.path.join(out, "model.safetensors"))


def assert_identical(a, b):
    wa, wb = weights(a), weights(b)
    assert sorted(wa) == sorted(wb)
    different = [k for k in wa if not np.array_equal(wa[k], wb[k])]
    if different:
        most = max(float(np.max(np.abs(wa[k].astype(np.float64) - wb[k]))) for k in different)
        raise AssertionError(f"{len(different)} of {len(wa)} tensors differ (at most {most:.2g}), e.g. {different[:3]}")


def latest_step(out):
    with open(os.path.join(out, "checkpoints", "latest")) as f:
        name = f.read().strip()
    with open(os.path.join(out, "checkpoints", name, "meta.json")) as f:
        return json.load(f)["step"]


def kill_then_resume(args, out, kills):
    """Runs `args` once per kill (each must die by SIGKILL), then to the end; returns the outputs."""
    resumed_at = []
    for kill in kills:
        result = bert_zoo(args, **kill)
        assert result.returncode == -signal.SIGKILL, (kill, result.returncode, result.stderr[-2000:])
        assert not os.path.exists(os.path.join(out, "model.safetensors")), "a killed run wrote the preset"
        resumed_at.append(latest_step(out))
    final = bert_zoo(args)
    assert final.returncode == 0, final.stderr[-3000:]
    return resumed_at, final.stdout


@pytest.fixture(scope="module")
def classify_setup(tmp_path_factory):
    import keras

    from keras_bert_zoo import BertBackbone

    root = tmp_path_factory.mktemp("resume_classify")
    fillers = ["very", "really", "quite", "truly", "so"]
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "the", "film", "was", "not", *fillers]
    keras.utils.set_random_seed(0)
    # Dropout on: the dropout seed-generator states must be restored too.
    BertBackbone(
        vocabulary_size=len(words),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=64,
        dropout=0.1,
    ).save_to_preset(str(root / "model"))
    (root / "model" / "vocab.txt").write_text("\n".join(words) + "\n")
    rng = np.random.default_rng(0)
    rows = ["sentence\tlabel"]
    # Sentences of 4 to 34 words (one token each, 6 to 36 with [CLS] and [SEP]): training batches of the
    # widths 16, 32 and 64 (`--sequence-length 64`), as real text gives. A graph traced for one batch shape
    # rounds otherwise than the shape-generic one, so a loop that traced a resumed run's first shape on its
    # own ended away from the uninterrupted run, even with this model (`training.loop.train_function`).
    # Sentences all within 16 tokens (one width) could not show it.
    lengths = []
    for _ in range(96):
        label = int(rng.integers(2))
        filler = list(rng.choice(fillers, int(rng.integers(0, 30))))
        sentence = ["the", "film", "was", *["not"] * int(rng.integers(2)), *filler, "good" if label else "bad"]
        rows.append(f"{' '.join(sentence)}\t{label}")
        lengths.append(len(sentence) + 2)
    assert min(lengths) <= 16 and any(16 < n <= 32 for n in lengths) and max(lengths) > 32
    (root / "data.tsv").write_text("\n".join(rows) + "\n")
    return root


def classify_args(root, out, *extra):
    data = str(root / "data.tsv")
    return [
        "finetune",
        "classify",
        "--model",
        str(root / "model"),
        "--train",
        data,
        "--dev",
        data,
        "--glue",
        "sst2",
        "--epochs",
        "2",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-3",
        "--sequence-length",
        "64",
        "--checkpoint-every",
        "5",
        "--deterministic",
        "--out",
        out,
        *extra,
    ]


@pytest.mark.slow  # seven `bert-zoo` processes: about 3 minutes on 2 busy cores
def test_finetune_killed_mid_epoch_and_during_a_checkpoint_write_resumes_to_identical_weights(classify_setup):
    root = classify_setup
    reference = str(root / "uninterrupted")
    result = bert_zoo(classify_args(root, reference))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed" not in result.stdout

    out = str(root / "killed")
    # 96 examples in batches of 8 grouped by length (a partial batch per width): 14 steps per epoch,
    # checkpoints at 5, 10, 14 (epoch end), 15, 20, 25, 28.
    # Killed at step 8 (mid-epoch 1: resumes from 5), then while moving checkpoint 15 into
    # place (mid-epoch 2: the half-published 15 is ignored, resumes from 14).
    resumed_at, stdout = kill_then_resume(classify_args(root, out), out, [{"step": 8}, {"save": "ckpt-000015"}])
    assert resumed_at == [5, 14]
    assert "resumed from" in stdout and "step 14 of 28 (epoch 2, batch 0 of 14)" in stdout, stdout
    assert_identical(reference, out)
    assert not os.path.exists(os.path.join(out, "checkpoints"))  # a finished output drops them, tmp- ones too
    with open(os.path.join(out, "metrics.json")) as f, open(os.path.join(reference, "metrics.json")) as g:
        resumed, uninterrupted = json.load(f), json.load(g)
    assert resumed["steps"] == uninterrupted["steps"] == 28
    assert resumed["accuracy"] == uninterrupted["accuracy"]

    # The same command again: a finished output is not a run to resume, it asks for --overwrite,
    # which starts over and ends the same.
    again = bert_zoo(classify_args(root, out))
    assert again.returncode != 0 and "--overwrite" in again.stderr, again.stderr[-2000:]
    fresh = bert_zoo(classify_args(root, out, "--overwrite"))
    assert fresh.returncode == 0 and "resumed" not in fresh.stdout, fresh.stderr[-2000:]
    assert_identical(reference, out)


@pytest.mark.slow  # three `bert-zoo` processes on a real checkpoint: about 70 s on 2 busy cores
def test_real_checkpoint_on_sst2_killed_after_its_first_checkpoint_resumes_to_identical_weights(tmp_path):
    """A user's run, shortened: all-MiniLM-L6-v2 (hidden 384, 6 layers) fine-tuned on real SST-2
    sentences of many lengths (batches of several widths) with `--deterministic --checkpoint-every`,
    SIGKILLed after its first checkpoint and rerun, ends with the uninterrupted run's weights and dev
    scores. A train step that traced the resumed run's first batch shape on its own ended up to 6e-8
    away here (`training.loop.train_function`)."""
    model = minilm_path()
    with open(shared_data("sst2", "train.tsv")) as f:
        lines = f.read().splitlines()[:257]  # header + 256 sentences: 9 steps (batches of 32 grouped by length)
    words = [len(line.split("\t")[0].split()) for line in lines[1:]]
    assert min(words) + 2 <= 16 and max(words) + 2 > 32  # widths 16 to 64 at least (a word is 1+ tokens)
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(lines) + "\n")

    def args(out):
        return [
            "finetune",
            "classify",
            "--model",
            model,
            "--train",
            str(train),
            "--dev",
            shared_data("sst2", "dev.tsv"),
            "--max-dev-examples",
            "64",
            "--glue",
            "sst2",
            "--epochs",
            "1",
            "--sequence-length",
            "128",
            "--checkpoint-every",
            "3",
            "--deterministic",
            "--out",
            out,
        ]

    reference, out = str(tmp_path / "uninterrupted"), str(tmp_path / "killed")
    result = bert_zoo(args(reference))
    assert result.returncode == 0, result.stderr[-3000:]
    # Checkpoints at 3, 6 and 9; killed after step 4: resumes from 3 and runs steps 4 to 9.
    resumed_at, stdout = kill_then_resume(args(out), out, [{"step": 4}])
    assert resumed_at == [3]
    assert "step 3 of 9" in stdout, stdout
    assert_identical(reference, out)
    with open(os.path.join(out, "metrics.json")) as f, open(os.path.join(reference, "metrics.json")) as g:
        resumed, uninterrupted = json.load(f), json.load(g)
    scores = ("steps", "accuracy", "f1", "matthews_corrcoef")  # the epoch's mean loss restarts at a resume
    assert {k: resumed[k] for k in scores} == {k: uninterrupted[k] for k in scores}


def pretrain_args(corpus, vocab, out):
    return [
        "pretrain",
        "--corpus",
        corpus,
        "--preset",
        "bert_tiny_uncased",
        "--vocab",
        vocab,
        "--steps",
        "10",
        "--batch-size",
        "4",
        "--sequence-length",
        "32",
        "--eval-every",
        "4",
        "--eval-batches",
        "1",
        "--holdout-every",
        "3",
        "--checkpoint-every",
        "3",
        "--jit-compile",
        "false",
        "--deterministic",
        "--out",
        out,
    ]


@pytest.mark.slow  # three `bert-zoo` processes
def test_pretrain_killed_mid_interval_resumes_to_identical_weights(tmp_path):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    vocab = os.path.join(minilm_path(), "vocab.txt")
    reference, out = str(tmp_path / "uninterrupted"), str(tmp_path / "killed")
    result = bert_zoo(pretrain_args(corpus, vocab, reference))
    assert result.returncode == 0, result.stderr[-3000:]
    # Checkpoints at 3, 4 (interval end), 6, 8, 9, 10; killed after step 7: resumes from 6,
    # replaying the seeded text stream (a Python generator) up to batch 6.
    resumed_at, stdout = kill_then_resume(pretrain_args(corpus, vocab, out), out, [{"step": 7}])
    assert resumed_at == [6]
    assert "step 6 of 10 (epoch 2, batch 2 of 4)" in stdout, stdout
    assert_identical(reference, out)


@pytest.mark.slow  # four `bert-zoo` processes
def test_overwrite_killed_mid_epoch_keeps_the_old_output_and_resumes_from_the_hidden_run(classify_setup):
    """`--overwrite` of an earlier output: the run lives in the hidden `.NAME.run` sibling, so a kill
    leaves the old output as it was, and the same command again resumes from the sibling."""
    import shutil

    root = classify_setup
    reference = str(root / "uninterrupted_for_overwrite")
    assert bert_zoo(classify_args(root, reference)).returncode == 0
    out = str(root / "replaced")
    shutil.copytree(reference, out, ignore=shutil.ignore_patterns("checkpoints"))  # an earlier output
    with open(os.path.join(out, "model.safetensors"), "r+b") as f:  # make it recognisably different
        f.seek(-4, os.SEEK_END)
        f.write(b"\0\0\0\0")
    old = weights(out)
    sibling = str(root / ".replaced.run")

    result = bert_zoo(classify_args(root, out, "--overwrite"), step=8)
    assert result.returncode == -signal.SIGKILL
    assert sorted(os.listdir(out)) == sorted(e for e in os.listdir(reference) if e != "checkpoints")
    still = weights(out)
    assert all(np.array_equal(still[k], old[k]) for k in old)  # the old output, untouched
    assert latest_step(sibling) == 5

    final = bert_zoo(classify_args(root, out, "--overwrite"))
    assert final.returncode == 0, final.stderr[-3000:]
    assert "resumed from" in final.stdout and "step 5 of 28" in final.stdout, final.stdout
    assert_identical(reference, out)
    assert not os.path.exists(sibling)
