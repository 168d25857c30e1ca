"""Two real worker processes (`--strategy multi_worker`, TF_CONFIG, localhost ports) train like one process.

Each case starts the same `bert-zoo` command twice with the same `--out`, worker 0 and worker 1
of a two-worker cluster, `--batch-size 4` per replica (global batch 8), and compares the chief's
result with one process on one device with `--batch-size 8`. Dropout is switched off in these
processes: each replica draws its own dropout masks, so with dropout no data-parallel run can
equal one device. Slow: three processes per case.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO_ROOT, minilm_path, shared_data

# Dropout off for the comparison: each replica draws its own masks, so with dropout no
# data-parallel run equals one device (test-only: the jobs have no dropout flag).
RUN = """
import sys, keras
keras.layers.Dropout.call = lambda self, inputs, training=False: inputs
from keras_bert_zoo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _env(tf_config=None):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def run_two_workers(args):
    """`args` with `--batch-size 4` per replica on each of 2 workers: global batch 8."""
    args = [*args, "--batch-size", "4"]
    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", RUN, *args, "--strategy", "multi_worker"],
            env=_env({"cluster": cluster, "task": {"type": "worker", "index": i}}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [w.communicate(timeout=900) for w in workers]
    for i, (w, (_, err)) in enumerate(zip(workers, results, strict=True)):
        assert w.returncode == 0, f"worker {i}: {err[-3000:]}"
    return [out for out, _ in results]


def run_one_process(args):
    """`args` on one device with the same global batch, 8."""
    result = subprocess.run(
        [sys.executable, "-c", RUN, *args, "--batch-size", "8"], env=_env(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def assert_same_weights(a, b, atol=1e-5):
    from keras_bert_zoo.convert.safetensors_io import read_safetensors

    wa = read_safetensors(os.path.join(a, "model.safetensors"))
    wb = read_safetensors(os.path.join(b, "model.safetensors"))
    assert sorted(wa) == sorted(wb)
    worst = max(float(np.abs(wa[k] - wb[k]).max()) for k in wa)
    assert worst <= atol, worst


def moved(before, after):
    """Largest change of a backbone weight between two preset directories."""
    from keras_bert_zoo.convert.safetensors_io import read_safetensors

    wa = read_safetensors(os.path.join(before, "model.safetensors"))
    wb = {k.removeprefix("bert."): v for k, v in read_safetensors(os.path.join(after, "model.safetensors")).items()}
    shared = [k.removeprefix("bert.") for k in wa if k.removeprefix("bert.") in wb]
    assert shared
    return max(float(np.abs(wa["bert." + k if "bert." + k in wa else k] - wb[k]).max()) for k in shared)


def only_the_chief_wrote(root, out):
    # Worker 1 writes to a private temporary directory only: nothing else appears under root.
    assert sorted(os.listdir(root)) == sorted(["multi", "single", *extra_inputs(root)])
    assert os.path.isfile(os.path.join(out, "metrics.json"))


def extra_inputs(root):
    return [e for e in os.listdir(root) if e not in ("multi", "single")]


@pytest.fixture()
def classify_inputs(tmp_path):
    import keras

    from keras_bert_zoo import BertBackbone

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "the", "film", "was", "not"]
    keras.utils.set_random_seed(0)
    BertBackbone(
        vocabulary_size=len(words),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        dropout=0.1,
    ).save_to_preset(str(tmp_path / "model"))
    (tmp_path / "model" / "vocab.txt").write_text("\n".join(words) + "\n")
    rng = np.random.default_rng(0)
    rows = ["sentence\tlabel"] + [
        f"the film was {'good' if i % 2 else 'bad'}{' not' * int(rng.integers(2))}\t{i % 2}" for i in range(48)
    ]
    (tmp_path / "data.tsv").write_text("\n".join(rows) + "\n")
    return tmp_path


@pytest.mark.slow
def test_finetune_classify_on_two_workers_equals_one_process(classify_inputs):
    root = classify_inputs
    data = str(root / "data.tsv")

    def args(out):
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
            "--learning-rate",
            "1e-3",
            "--sequence-length",
            "16",
            "--batching",
            "fixed",
            "--checkpoint-every",
            "4",
            "--out",
            out,
        ]

    chief_out, _ = run_two_workers(args(str(root / "multi")))
    run_one_process(args(str(root / "single")))
    assert "batch 8" in chief_out, chief_out
    assert_same_weights(str(root / "multi"), str(root / "single"))
    assert moved(str(root / "model"), str(root / "multi")) > 1e-3  # training changed what is compared
    only_the_chief_wrote(root, str(root / "multi"))
    with open(root / "multi" / "metrics.json") as f, open(root / "single" / "metrics.json") as g:
        multi, single = json.load(f), json.load(g)
    assert multi["steps"] == single["steps"] == 12  # 48 examples / 8, 2 epochs
    assert multi["accuracy"] == single["accuracy"]


@pytest.mark.slow
def test_pretrain_on_two_workers_equals_one_process(tmp_path):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    vocab = os.path.join(minilm_path(), "vocab.txt")

    def args(out):
        return [
            "pretrain",
            "--corpus",
            corpus,
            "--preset",
            "bert_tiny_uncased",
            "--vocab",
            vocab,
            "--steps",
            "6",
            "--sequence-length",
            "32",
            "--eval-every",
            "3",
            "--eval-batches",
            "1",
            "--holdout-every",
            "3",
            "--jit-compile",
            "false",
            "--out",
            out,
        ]

    run_two_workers(args(str(tmp_path / "multi")))
    run_one_process(args(str(tmp_path / "single")))
    assert_same_weights(str(tmp_path / "multi"), str(tmp_path / "single"))
    only_the_chief_wrote(tmp_path, str(tmp_path / "multi"))


@pytest.mark.slow
def test_replicas_2_splits_the_cpu_for_finetune_and_pretrain(classify_inputs):
    """`--strategy mirrored --replicas 2` on a CPU-only machine: 2 logical devices, the jobs run and agree
    with one device on the same global batch (dropout off; model-level equality per task model is the
    REPLICA_CASES test)."""
    root = classify_inputs
    data = str(root / "data.tsv")
    finetune = [
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
        "1",
        "--learning-rate",
        "1e-3",
        "--sequence-length",
        "16",
    ]
    mirrored = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            *finetune,
            "--batch-size",
            "4",
            "--strategy",
            "mirrored",
            "--replicas",
            "2",
            "--out",
            str(root / "mirrored"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert mirrored.returncode == 0, mirrored.stderr[-3000:]
    assert "batch 8" in mirrored.stdout
    run_one_process([*finetune, "--out", str(root / "single")])
    assert_same_weights(str(root / "mirrored"), str(root / "single"))

    corpus = shared_data("pretrain_text", "sample_text.txt")
    pretrain = [
        "pretrain",
        "--corpus",
        corpus,
        "--preset",
        "bert_tiny_uncased",
        "--vocab",
        os.path.join(minilm_path(), "vocab.txt"),
        "--steps",
        "3",
        "--sequence-length",
        "32",
        "--eval-every",
        "3",
        "--jit-compile",
        "false",
        "--batch-size",
        "2",
        "--strategy",
        "mirrored",
        "--replicas",
        "2",
        "--out",
        str(root / "pretrained"),
    ]
    result = subprocess.run(
        [sys.executable, "-c", RUN, *pretrain], env=_env(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.load(open(root / "pretrained" / "metrics.json"))["batch_size"] == 4


@pytest.mark.slow
def test_pretrain_on_two_workers_reading_their_own_record_files_equals_one_process(tmp_path):
    """`--input-shards 2`: each worker reads one of the two record files (it says which), and the
    run equals one process reading both files as the same two shards."""
    from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset
    from keras_bert_zoo.tasks.pretrainer.records import write_pretraining_records

    vocab = os.path.join(minilm_path(), "vocab.txt")
    batches = list(
        pretraining_dataset(
            [shared_data("pretrain_text", "sample_text.txt")],
            vocab,
            sequence_length=32,
            max_predictions=5,
            batch_size=8,
        )
    )
    records = tmp_path / "records"
    records.mkdir()
    files = [str(records / f"part-{i}.tfrecord") for i in range(2)]
    for i, path in enumerate(files):
        write_pretraining_records(batches[i::2], path)

    def args(out):
        return [
            "pretrain",
            "--corpus",
            *files,
            "--input-shards",
            "2",
            "--preset",
            "bert_tiny_uncased",
            "--vocab",
            vocab,
            "--steps",
            "4",
            "--sequence-length",
            "32",
            "--max-predictions",
            "5",
            "--eval-every",
            "4",
            "--jit-compile",
            "false",
            "--out",
            out,
        ]

    outputs = run_two_workers(args(str(tmp_path / "multi")))
    run_one_process(args(str(tmp_path / "single")))
    assert_same_weights(str(tmp_path / "multi"), str(tmp_path / "single"))
    for index, output in enumerate(outputs):
        assert f"worker {index} of 2 reads 1 of 2 input shard files: part-{index}.tfrecord" in output
    only_the_chief_wrote(tmp_path, str(tmp_path / "multi"))


@pytest.mark.slow
def test_two_workers_finish_pretrain_and_finetune_with_default_flags(classify_inputs):
    """No `--jit-compile`: the default ("auto") must not pick XLA under multi-worker on CPUs, where
    XLA_CPU has no kernel for the collectives (issue 28: `--steps 20` died in CollectiveGatherV2).
    Each worker says why it chose no XLA."""
    root = classify_inputs
    corpus = shared_data("pretrain_text", "sample_text.txt")
    vocab = os.path.join(minilm_path(), "vocab.txt")
    pretrain = [
        "pretrain",
        "--corpus",
        corpus,
        "--preset",
        "bert_tiny_uncased",
        "--vocab",
        vocab,
        "--steps",
        "20",
        "--out",
        str(root / "multi"),
    ]
    for output in run_two_workers(pretrain):
        assert "jit_compile: no XLA (multi-worker on CPUs" in output, output
    assert json.load(open(root / "multi" / "metrics.json"))["steps"] == 20

    data = str(root / "data.tsv")
    finetune = [
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
        "--sequence-length",
        "16",
        "--out",
        str(root / "classified"),
    ]
    for output in run_two_workers(finetune):
        assert "jit_compile: no XLA (multi-worker on CPUs" in output, output
    assert json.load(open(root / "classified" / "metrics.json"))["steps"] == 3 * 6  # 48 examples / 8, 3 epochs
