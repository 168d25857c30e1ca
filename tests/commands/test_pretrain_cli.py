"""`bert-zoo pretrain` and `bert-zoo evaluate` on a pretrained directory, end to end (tiny)."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo.cli import main
from tests.helpers import minilm_path, shared_data


def tiny_args(corpus, out, *extra):
    return [
        "pretrain",
        "--corpus",
        corpus,
        "--preset",
        "bert_tiny_uncased",
        "--steps",
        "4",
        "--batch-size",
        "4",
        "--sequence-length",
        "32",
        "--eval-every",
        "2",
        "--eval-batches",
        "2",
        "--jit-compile",
        "false",
        "--out",
        out,
        *extra,
    ]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    out = str(tmp_path_factory.mktemp("pretrain") / "run")
    vocab = os.path.join(minilm_path(), "vocab.txt")
    assert main(tiny_args(corpus, out, "--vocab", vocab, "--holdout-every", "3")) == 0
    return corpus, out


def test_pretrain_writes_a_preset_metrics_logs_and_plot(pretrained):
    _, out = pretrained
    files = set(os.listdir(out))
    assert {"config.json", "model.safetensors", "vocab.txt", "metrics.json", "loss_curves.png", "logs"} <= files
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    for key in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss", "tokens_per_second", "steps"):
        assert key in metrics and np.isfinite(metrics[key])
    assert metrics["steps"] == 4
    assert any(name.startswith("events.") for name in os.listdir(os.path.join(out, "logs")))
    with open(os.path.join(out, "loss_curves.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_output_loads_in_ours_and_hf(pretrained):
    _, out = pretrained
    from keras_bert_zoo import BertPretrainer

    model = BertPretrainer.from_preset(out)
    assert model.data_layout["sequence_length"] == 32 and model.data_layout["nsp"] == "nsp"
    transformers = pytest.importorskip("transformers")
    hf, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    import torch

    ids = np.array([[101, 7592, 2088, 103, 102, 2023, 102]])
    x = {
        "token_ids": ids,
        "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1]]),
        "padding_mask": np.ones_like(ids),
        "mask_positions": np.array([[3, 1]]),
    }
    ours = model(x, training=False)
    with torch.no_grad():
        ref = hf.eval()(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(x["segment_ids"]))
    np.testing.assert_allclose(
        np.asarray(ours["mlm_logits"])[0], ref.prediction_logits.numpy()[0, [3, 1]], rtol=1e-5, atol=1e-4
    )
    np.testing.assert_allclose(
        np.asarray(ours["nsp_logits"]), ref.seq_relationship_logits.numpy(), rtol=1e-5, atol=1e-4
    )


def test_evaluate_verb_scores_a_pretrained_dir(pretrained, tmp_path, capsys):
    corpus, out = pretrained
    path = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", out, "--data", corpus, "--out", path]) == 0
    with open(path) as f:
        first = json.load(f)
    assert 0 <= first["mlm_accuracy"] <= 1 and 0 <= first["nsp_accuracy"] <= 1 and first["sequences"] > 0
    from keras_bert_zoo.tasks.pretrainer.spec import evaluate_pretrainer

    again = evaluate_pretrainer(out, [corpus])  # fixed-seed masks: the same numbers
    assert again["mlm_accuracy"] == pytest.approx(first["mlm_accuracy"], abs=1e-6)
    assert again["loss"] == pytest.approx(first["loss"], rel=1e-5)


def test_clear_errors(tmp_path, capsys):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    assert main(tiny_args(corpus, str(tmp_path / "a"))) == 2  # a usage error: a flag is missing
    assert "--vocab" in capsys.readouterr().err
    assert main(tiny_args(str(tmp_path / "missing.txt"), str(tmp_path / "b"), "--vocab-size", "500")) == 1
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "vocab.txt"
    bad.write_text("a\nb\n")
    assert main(tiny_args(corpus, str(tmp_path / "c"), "--vocab", str(bad))) == 1
    assert "[PAD]" in capsys.readouterr().err


def test_learned_vocabulary_and_sop(tmp_path):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    out = str(tmp_path / "sop")
    args = tiny_args(corpus, out, "--vocab-size", "400", "--nsp", "sop", "--whole-word-masking")
    args[args.index("--steps") + 1] = "2"
    assert main(args) == 0
    with open(os.path.join(out, "vocab.txt")) as f:
        vocab = f.read().split("\n")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    assert config["vocab_size"] == len([t for t in vocab if t])
    assert config["keras_bert_zoo"]["task_config"]["data_layout"]["nsp"] == "sop"
