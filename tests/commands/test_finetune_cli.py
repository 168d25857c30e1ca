"""`bert-zoo finetune classify`, `evaluate`, `predict` end to end on a tiny model."""

import json
import os

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from keras_bert_zoo.cli import main
from keras_bert_zoo.models.backbone import BertBackbone
from keras_bert_zoo.tasks.classifier.model import BertClassifier

WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "film", "was", "plot", "a", "very"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A random tiny HF-layout checkpoint with its own vocabulary."""
    import keras

    path = str(tmp_path_factory.mktemp("tiny_model"))
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=len(SPECIAL + WORDS),
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=32,
        dropout=0.0,
    )
    backbone.save_to_preset(path)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(SPECIAL + WORDS) + "\n")
    return path


def _sentiment_file(path, n, seed, extra_label=None):
    rng = np.random.default_rng(seed)
    lines = ["sentence\tlabel"]
    for _ in range(n):
        label = int(rng.integers(2))
        cue = rng.choice(["good", "great", "fine"] if label else ["bad", "awful", "poor"])
        filler = " ".join(rng.choice(["the", "film", "was", "plot", "a", "very"], size=rng.integers(1, 12)))
        lines.append(f"{filler} {cue} {filler}\t{label}")
    if extra_label is not None:
        lines.append(f"the film\t{extra_label}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _finetune(tiny_model, train, dev, out, *extra):
    return main(
        [
            "finetune",
            "classify",
            "--model",
            tiny_model,
            "--glue",
            "sst2",
            "--train",
            train,
            "--dev",
            dev,
            "--out",
            out,
            "--sequence-length",
            "32",
            "--batch-size",
            "16",
            "--learning-rate",
            "5e-3",
            *extra,
        ]
    )


def test_finetune_evaluate_predict(tiny_model, tmp_path, capsys):
    train = _sentiment_file(tmp_path / "train.tsv", 400, seed=0)
    dev = _sentiment_file(tmp_path / "dev.tsv", 120, seed=1)
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out, "--epochs", "5", "--eval-every", "10") == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    for key in ("accuracy", "f1", "matthews_corrcoef", "train_seconds", "train_examples_per_second", "best_step"):
        assert key in metrics
    assert metrics["accuracy"] > 0.9, metrics  # the cue word decides the label
    assert os.path.getsize(os.path.join(out, "training_curve.png")) > 1000

    # The preset remembers task, labels and layout; the raw-string predict path
    # (Task, padded to the full length) agrees with sklearn on its own predictions
    # and with the bucketed scores `finetune` saved.
    model = BertClassifier.from_preset(out)
    assert model.label_names == ["negative", "positive"] and model.data_layout["task"] == "sst2"
    rows = [line.split("\t") for line in open(dev).read().splitlines()[1:]]
    labels, probs = model.predict_labels([r[0] for r in rows], verbose=0)
    labels = [{"negative": "0", "positive": "1"}[name] for name in labels]
    truth = [r[1] for r in rows]
    assert metrics["accuracy"] == pytest.approx(accuracy_score(truth, labels))
    assert metrics["f1"] == pytest.approx(f1_score(truth, labels, pos_label="1"))

    capsys.readouterr()
    scored = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", out, "--data", dev, "--out", scored]) == 0
    with open(scored) as f:
        again = json.load(f)
    assert again["accuracy"] == pytest.approx(metrics["accuracy"]) and again["examples"] == 120

    capsys.readouterr()
    assert main(["predict", "--model", out, "--json", "the film was great", "awful plot"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [line["label"] for line in lines] == ["positive", "negative"]
    assert set(lines[0]["probabilities"]) == {"negative", "positive"}


@pytest.mark.parametrize(
    "case, message, code",
    [  # exit code 1: data/model, 2: usage (a flag)
        ("unknown_label", "dev.tsv:.*unknown label '7'", 1),
        ("missing_column", "no column 'label'", 1),
        ("empty", "has no examples", 1),
        ("vocab_mismatch", "vocab.txt has 18 entries but the model.s embedding table has 17 rows", 1),
        # A preset name is its pretrained checkpoint; offline and uncached, one line names the repo.
        ("preset_without_vocab", "google/bert_uncased_L-2_H-128_A-2 is not in the Hugging Face cache", 1),
        ("too_long", "--sequence-length 64 is longer than the model's 32 learned positions", 2),
    ],
)
def test_bad_input_fails_before_training(tiny_model, tmp_path, capsys, monkeypatch, case, message, code):
    train = _sentiment_file(tmp_path / "train.tsv", 20, seed=0)
    dev = _sentiment_file(tmp_path / "dev.tsv", 10, seed=1)
    model = tiny_model
    if case == "unknown_label":
        dev = _sentiment_file(tmp_path / "dev.tsv", 10, seed=1, extra_label=7)
    elif case == "missing_column":
        (tmp_path / "dev.tsv").write_text("sentence\tstars\ngood\t1\n")
    elif case == "empty":
        (tmp_path / "train.tsv").write_text("")
    elif case == "vocab_mismatch":
        model = str(tmp_path / "model")
        os.makedirs(model)
        for name in ("config.json", "model.safetensors"):
            os.link(os.path.join(tiny_model, name), os.path.join(model, name))
        with open(os.path.join(model, "vocab.txt"), "w") as f:
            f.write("\n".join(SPECIAL + WORDS + ["extra"]) + "\n")
    elif case == "preset_without_vocab":
        model = "bert_tiny_uncased"
        constants = pytest.importorskip("huggingface_hub.constants")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty_hf_cache"))  # nothing cached
    out = str(tmp_path / "out")
    extra = ["--sequence-length", "64"] if case == "too_long" else []
    assert _finetune(model, train, dev, out, *extra) == code
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    import re

    assert re.search(message, err), err
    assert not os.path.exists(out)  # nothing trained, nothing written


def test_unregistered_task_is_rejected_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["finetune", "no_such_task", "--model", "x", "--train", "t", "--dev", "d", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no_such_task'" in capsys.readouterr().err


def test_evaluate_rejects_directories_without_a_task(tiny_model, capsys):
    assert main(["evaluate", "--model", tiny_model, "--data", "x.tsv"]) == 1
    assert "without a task head" in capsys.readouterr().err


def test_csv_pairs_regression(tiny_model, tmp_path):
    """CSV with named columns, sentence pairs, num_classes=1 regression scored by Pearson/Spearman."""
    import csv

    import scipy.stats

    rng = np.random.default_rng(0)

    def write(path, n):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["left", "right", "similarity"])
            for _ in range(n):
                k = int(rng.integers(0, 4))
                w.writerow([" ".join(["good"] * (k + 1)), "the film", k / 3])
        return str(path)

    train, dev = write(tmp_path / "train.csv", 192), write(tmp_path / "dev.csv", 40)
    out = str(tmp_path / "out")
    code = main(
        [
            "finetune",
            "classify",
            "--model",
            tiny_model,
            "--train",
            train,
            "--dev",
            dev,
            "--out",
            out,
            "--text-column",
            "left",
            "--text-column",
            "right",
            "--label-column",
            "similarity",
            "--problem-type",
            "regression",
            "--epochs",
            "10",
            "--learning-rate",
            "3e-3",
            "--sequence-length",
            "16",
        ]
    )
    assert code == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    model = BertClassifier.from_preset(out)
    assert model.num_classes == 1 and model.problem_type == "regression"
    rows = list(csv.reader(open(dev)))[1:]
    scores = model.predict([(r[0], r[1]) for r in rows], verbose=0)[:, 0]
    truth = [float(r[2]) for r in rows]
    # Trained so that the predictions spread (after 1 step at 5e-5 they differed by 1e-5). Rounded:
    # equal inputs give outputs that differ by float noise with their row in the batch, which
    # would break the truth's ties at random in Spearman's ranks.
    assert np.ptp(scores) > 0.1
    scores = np.round(scores, 4)
    assert metrics["pearson"] == pytest.approx(scipy.stats.pearsonr(truth, scores)[0], abs=1e-4)
    assert metrics["spearman"] == pytest.approx(scipy.stats.spearmanr(truth, scores)[0], abs=1e-4)


@pytest.mark.parametrize("extra", [("--mixed-precision", "bf16"), ("--strategy", "mirrored")])
def test_finetune_under_precision_and_strategy_flags(tiny_model, tmp_path, extra):
    """The distribution flags build and compile the classifier in the strategy scope and it still learns."""
    train = _sentiment_file(tmp_path / "train.tsv", 400, seed=0)
    dev = _sentiment_file(tmp_path / "dev.tsv", 120, seed=1)
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out, "--epochs", "5", *extra) == 0
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f)["accuracy"] > 0.9


@pytest.mark.parametrize(
    "flags, expected",
    [
        ([], "auto"),
        (["--batching", "by_length"], "by_length"),
        (["--batching", "bucketed"], "bucketed"),
        (["--batching", "fixed"], "fixed"),
    ],
)
def test_batching_flags_reach_finetune(monkeypatch, tmp_path, flags, expected):
    import keras_bert_zoo.tasks.finetuning as finetuning

    seen = {}
    monkeypatch.setattr(finetuning, "finetune", lambda *a, **kw: (seen.update(kw), (None, {}))[1])
    assert (
        main(["finetune", "tag", "--model", "m", "--train", "t", "--dev", "d", "--out", str(tmp_path / "o"), *flags])
        == 0
    )
    assert seen["batching"] == expected


def test_a_task_offers_only_its_own_batchings(tmp_path, capsys):
    """`--batching by_length` is a choice of `finetune classify`, `tag` and `choice`, not of qa, whose
    windows pack instead (argparse: exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "finetune",
                "qa",
                "--model",
                "m",
                "--train",
                "t",
                "--dev",
                "d",
                "--out",
                str(tmp_path),
                "--batching",
                "by_length",
            ]
        )
    assert exit_info.value.code == 2
    assert "--batching: invalid choice: 'by_length'" in capsys.readouterr().err


def test_finetune_with_lora_and_the_verbs_on_its_output(tiny_model, tmp_path, capsys):
    """`--lora-rank`: only the adapters, the query/value biases and the head train (the frozen
    weights in `out` are the input model's, bit for bit); `out` reloads with its adapters and
    `evaluate`, `predict` and `export` work on it with the same outputs."""
    import tensorflow as tf

    from keras_bert_zoo.convert.safetensors_io import read_safetensors

    train = _sentiment_file(tmp_path / "train.tsv", 400, seed=0)
    dev = _sentiment_file(tmp_path / "dev.tsv", 120, seed=1)
    out = str(tmp_path / "out")
    # LoRA needs a higher rate (a later flag wins over _finetune's 5e-3)
    assert _finetune(tiny_model, train, dev, out, "--epochs", "5", "--lora-rank", "4", "--learning-rate", "5e-2") == 0
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    # 1 layer x (query, value) x (a 32x4 + b 4x32 + bias 32) + head 32x2 + 2
    assert metrics["lora_rank"] == 4 and metrics["trainable_parameters"] == 2 * (128 + 128 + 32) + 66
    assert metrics["trainable_parameters"] < 0.06 * metrics["parameters"]
    # a frozen random 1-layer model learns the cue through q/v adapters only part way (dev majority 0.48)
    assert metrics["accuracy"] > 0.65, metrics
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(os.listdir(out))
    before, after = (
        read_safetensors(os.path.join(tiny_model, "model.safetensors")),
        read_safetensors(os.path.join(out, "model.safetensors")),
    )
    frozen = [n for n in before if not n.endswith(("query.bias", "value.bias"))]
    for name in frozen:
        np.testing.assert_array_equal(after["bert." + name], before[name], err_msg=name)
    assert not np.array_equal(
        after["bert.encoder.layer.0.attention.self.query.bias"], before["encoder.layer.0.attention.self.query.bias"]
    )

    model = BertClassifier.from_preset(out)
    assert model.backbone.encoder_layers[0].value.lora_rank == 4
    texts = ["the film was great", "awful plot"]
    _, probs = model.predict_labels(texts, verbose=0)
    capsys.readouterr()
    assert main(["evaluate", "--model", out, "--data", dev, "--out", str(tmp_path / "eval.json")]) == 0
    assert json.load(open(tmp_path / "eval.json"))["accuracy"] == pytest.approx(metrics["accuracy"])
    capsys.readouterr()
    assert main(["predict", "--model", out, "--json", *texts]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    np.testing.assert_allclose(
        [[line["probabilities"][k] for k in ("negative", "positive")] for line in lines], probs, atol=1e-4
    )
    saved = str(tmp_path / "saved_model")
    assert main(["export", "--model", out, "--out", saved]) == 0
    served = tf.saved_model.load(saved).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), probs, atol=1e-5)


def test_lora_run_interrupted_and_resumed_ends_as_the_uninterrupted_one(tiny_model, tmp_path, monkeypatch, capsys):
    """`--lora-rank` with checkpoints: stopped mid-epoch 2 (Ctrl-C after step 10), the same command
    resumes from its step-8 checkpoint with LoRA on and its adapters, optimizer and step restored,
    and ends with the uninterrupted run's weights and adapters (`--deterministic`); the frozen
    weights stay the input model's, bit for bit."""
    from keras_bert_zoo.convert.safetensors_io import read_safetensors
    from keras_bert_zoo.training import callbacks

    train = _sentiment_file(tmp_path / "train.tsv", 96, seed=0)
    dev = _sentiment_file(tmp_path / "dev.tsv", 32, seed=1)
    flags = (
        "--epochs",
        "2",
        "--lora-rank",
        "4",
        "--learning-rate",
        "5e-2",
        "--checkpoint-every",
        "4",
        "--deterministic",
    )  # 7 batches per epoch (by length): checkpoints at 4, 7, 8, 12, 14
    reference, out = str(tmp_path / "reference"), str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, reference, *flags) == 0

    original = callbacks.StepLog.on_train_batch_end

    def stop_at_step_10(self, batch, logs=None):
        original(self, batch, logs)
        if self.steps == 10:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(callbacks.StepLog, "on_train_batch_end", stop_at_step_10)
        assert _finetune(tiny_model, train, dev, out, *flags) == 130
    assert not os.path.exists(os.path.join(out, "model.safetensors"))
    capsys.readouterr()
    assert _finetune(tiny_model, train, dev, out, *flags) == 0
    stdout = capsys.readouterr().out
    assert "resumed from" in stdout and "step 8 of 14" in stdout, stdout  # 6 steps left, not 14
    # Float rounding apart (1e-7 here: the reference ran in this process, its steps traced in
    # another order; test_resume.py checks bit identity across processes): a resume that lost
    # the adapters or their optimizer state would be 1e-2 away.
    for name in ("model.safetensors", "adapter_model.safetensors"):
        want, got = read_safetensors(os.path.join(reference, name)), read_safetensors(os.path.join(out, name))
        assert sorted(got) == sorted(want)
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5, err_msg=f"{name}: {key}")
    adapters = read_safetensors(os.path.join(out, "adapter_model.safetensors"))
    assert any("lora_B" in k and np.abs(v).max() > 0 for k, v in adapters.items())  # they trained
    before, after = (
        read_safetensors(os.path.join(tiny_model, "model.safetensors")),
        read_safetensors(os.path.join(out, "model.safetensors")),
    )
    for name in before:
        if not name.endswith(("query.bias", "value.bias")):
            np.testing.assert_array_equal(after["bert." + name], before[name], err_msg=name)
    with open(os.path.join(out, "metrics.json")) as f, open(os.path.join(reference, "metrics.json")) as g:
        resumed, uninterrupted = json.load(f), json.load(g)
    assert resumed["steps"] == uninterrupted["steps"] == 14
    assert resumed["accuracy"] == pytest.approx(uninterrupted["accuracy"], abs=1 / 32)
