"""Flag mistakes on the training verbs exit 2 with one `error:` line, before any work (issue #25).

Each case used to fail with a bare `ValueError` (exit 1, as a data error) or, for `--tpu`
without `--strategy tpu`, to train on the CPU without a word. Every case runs `bert-zoo` in
this process and stops at the flag check: no model is trained, nothing is written.
"""

import json
import os

import pytest

from tests.failures.helpers import check_case
from tests.helpers import shared_data

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "film", "was", "good", "bad", "where"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer HF-layout checkpoint with its vocabulary."""
    import keras

    from keras_bert_zoo import BertBackbone

    path = str(tmp_path_factory.mktemp("tiny") / "model")
    keras.utils.set_random_seed(0)
    BertBackbone(
        vocabulary_size=len(SPECIAL + WORDS),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=64,
        dropout=0.0,
    ).save_to_preset(path)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(SPECIAL + WORDS) + "\n")
    return path


def _files(root):
    """The data files a case points at: a sentiment TSV, a SQuAD file and a text corpus."""
    os.makedirs(root)
    tsv = os.path.join(root, "t.tsv")
    with open(tsv, "w") as f:
        f.write("sentence\tlabel\nthe film was good\t1\nthe film was bad\t0\n")
    squad = os.path.join(root, "t.json")
    qa = {"id": "q1", "question": "where", "answers": [{"text": "good", "answer_start": 13}]}
    with open(squad, "w") as f:
        json.dump(
            {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "the film was good", "qas": [qa]}]}]},
            f,
        )
    return {
        "tsv": tsv,
        "squad": squad,
        "corpus": shared_data("pretrain_text", "sample_text.txt"),
        "out": os.path.join(root, "out"),
    }


def _pretrain(f, *extra):
    return [
        "pretrain",
        "--corpus",
        f["corpus"],
        "--preset",
        "bert_tiny_uncased",
        "--vocab-size",
        "200",
        "--out",
        f["out"],
        *extra,
    ]


def _classify(model, f, *extra):
    return ["finetune", "classify", "--model", model, "--train", f["tsv"], "--dev", f["tsv"], "--out", f["out"], *extra]


CASES = [
    # tasks/classifier/spec.py: a file layout needs --glue, or both columns.
    (
        "classify-no-layout",
        lambda m, f: _classify(m, f, "--text-column", "sentence"),
        r"give --glue \(a GLUE layout\) or both --text-column and --label-column",
    ),
    # tasks/pretrainer/job.py `_check_arguments`: a TPU host cannot run the Python text reader.
    (
        "pretrain-tpu-text-corpus",
        lambda m, f: _pretrain(f, "--strategy", "tpu", "--tpu", "local"),
        r"--strategy tpu reads TFRecords",
    ),
    # training/strategies.py `check_strategy`: --tpu alone trained on the CPU before.
    (
        "pretrain-tpu-without-strategy",
        lambda m, f: _pretrain(f, "--tpu", "local"),
        r"--tpu applies to --strategy tpu, not default",
    ),
    (
        "finetune-tpu-without-strategy",
        lambda m, f: _classify(m, f, "--glue", "sst2", "--tpu", "local"),
        r"--tpu applies to --strategy tpu, not default",
    ),
    (
        "finetune-replicas-without-mirrored",
        lambda m, f: _classify(m, f, "--glue", "sst2", "--replicas", "2"),
        r"--replicas applies to --strategy mirrored, not default",
    ),
    (
        "finetune-multi-worker-without-tf-config",
        lambda m, f: _classify(m, f, "--glue", "sst2", "--strategy", "multi_worker"),
        r"--strategy multi_worker needs the TF_CONFIG environment variable",
    ),
    # commands/finetune.py: a LoRA rank is a positive integer.
    (
        "finetune-lora-rank-zero",
        lambda m, f: _classify(m, f, "--glue", "sst2", "--lora-rank", "0"),
        r"argument --lora-rank: .*0",
    ),
    (
        "pretrain-tpu-without-address",
        lambda m, f: _pretrain(f, "--strategy", "tpu"),
        r"--strategy tpu needs --tpu ADDRESS",
    ),
    # tasks/span_qa/preprocessor.py: the window has no room for the passage after the question.
    (
        "qa-sequence-shorter-than-question",
        lambda m, f: [
            "finetune",
            "qa",
            "--model",
            m,
            "--train",
            f["squad"],
            "--dev",
            f["squad"],
            "--out",
            f["out"],
            "--sequence-length",
            "32",
            "--max-query-length",
            "64",
        ],
        r"--sequence-length 32 leaves no room for the passage after a question of up to 64 pieces",
    ),
]


@pytest.mark.parametrize("case_id, argv, pattern", CASES, ids=[c[0] for c in CASES])
def test_flag_mistake_exits_2(case_id, argv, pattern, tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    files = _files(str(tmp_path / "w"))
    check_case(str(tmp_path / "w"), argv(tiny, files), 2, pattern, capsys)
