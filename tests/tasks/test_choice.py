"""`bert-zoo finetune choice`, `evaluate`, `predict`, `export` end to end on a tiny model; the SWAG
reader on the real shared rows; bad input fails up front naming file and line."""

import csv
import json
import os
import re

import numpy as np
import pytest

from keras_bert_zoo import BertMultipleChoice
from keras_bert_zoo.cli import main
from keras_bert_zoo.tasks.multiple_choice.data import read_choices
from tests.helpers import save_tiny_model, shared_data

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["anna", "bert", "carl", "paris", "rome", "oslo", "met", "in", "the", "a", "went", "to", "sun", "rain"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_choice")), SPECIAL + WORDS)


def _questions(n, seed, choices=4):
    """The right choice is the one that mentions the sun (the others: rain); every choice
    starts with the same word (SWAG's `sent2`)."""
    rng = np.random.default_rng(seed)
    filler = WORDS[:12]
    rows = []
    for _ in range(n):
        label = int(rng.integers(choices))
        context = " ".join(rng.choice(filler, 4))
        head = rng.choice(filler)
        options = [" ".join([head, *rng.choice(filler, 2), "sun" if k == label else "rain"]) for k in range(choices)]
        rows.append({"context": context, "choices": options, "label": label})
    return rows


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _swag(path, rows):
    """SWAG's CSV layout; sent2 is the first word of each choice, as in the real files."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "",
                "video-id",
                "fold-ind",
                "startphrase",
                "sent1",
                "sent2",
                "gold-source",
                "ending0",
                "ending1",
                "ending2",
                "ending3",
                "label",
            ]
        )
        for i, r in enumerate(rows):
            head = r["choices"][0].split()[0]
            endings = [c[len(head) + 1 :] for c in r["choices"]]
            writer.writerow([i, "v", i, r["context"], r["context"], head, "gen", *endings, r["label"]])
    return str(path)


def _finetune(model, train, dev, out, *extra):
    return main(
        [
            "finetune",
            "choice",
            "--model",
            model,
            "--train",
            train,
            "--dev",
            dev,
            "--out",
            out,
            "--sequence-length",
            "24",
            "--batch-size",
            "16",
            "--learning-rate",
            "3e-3",
            *extra,
        ]
    )


def test_swag_reader_on_the_shared_rows():
    """The real SWAG rows: context = sent1, choice i = sent2 + " " + ending i (HF run_swag.py)."""
    for name, count in (("val_sample.csv", 11), ("train_sample.csv", 4)):
        path = shared_data("swag", name)
        examples = read_choices(path)
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        assert len(examples) == len(rows) == count and examples.num_choices == 4
        for got_context, got_choices, got_label, row in zip(
            examples.contexts, examples.choices, examples.labels, rows, strict=True
        ):
            assert got_context == row["sent1"]
            assert got_choices == [f"{row['sent2']} {row[f'ending{i}']}" for i in range(4)]
            assert got_label == int(row["label"])
    first = read_choices(shared_data("swag", "val_sample.csv"))
    assert first.contexts[0] == "Students lower their eyes nervously."
    assert first.choices[0][2] == "She walks slowly towards someone." and first.labels[0] == 2
    # A quoted ending with a comma stays one field.
    assert first.choices[0][0] == "She pats her shoulder, then saunters toward someone."


def test_finetune_evaluate_predict_export(tiny_model, tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", _questions(160, 0))
    dev_rows = _questions(40, 1)
    dev = _swag(tmp_path / "dev.csv", dev_rows)  # the other reader, same questions
    assert read_choices(dev).choices == [r["choices"] for r in dev_rows]
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out, "--epochs", "4") == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["accuracy"] > 0.9, metrics

    model = BertMultipleChoice.from_preset(out)
    assert model.data_layout == {"sequence_length": 24, "num_choices": 4}
    # The saved accuracy is the saved model's, recomputed from its probabilities.
    probs, best = model.predict_choices([r["context"] for r in dev_rows], [r["choices"] for r in dev_rows])
    assert np.mean(best == [r["label"] for r in dev_rows]) == pytest.approx(metrics["accuracy"])
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)

    capsys.readouterr()
    scored = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", out, "--data", dev, "--out", scored]) == 0
    with open(scored) as f:
        again = json.load(f)
    assert again["accuracy"] == pytest.approx(metrics["accuracy"]) and again["examples"] == 40
    assert again["random_baseline"] == 0.25

    capsys.readouterr()
    question = dev_rows[0]
    as_json = json.dumps({"context": "anna met bert", "choices": ["a rain", "the sun"]})
    assert (
        main(["predict", "--model", out, "--json", " ||| ".join([question["context"], *question["choices"]]), as_json])
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert rows[0]["choices"] == question["choices"] and rows[0]["best_index"] == int(best[0])
    np.testing.assert_allclose(rows[0]["probabilities"], probs[0], atol=1e-4)
    assert rows[1]["best_choice"] == "the sun" and len(rows[1]["probabilities"]) == 2

    capsys.readouterr()
    served = str(tmp_path / "served")
    assert main(["export", "--model", out, "--out", served]) == 0
    shown = capsys.readouterr().out
    assert "serving_default(choices, context) -> best_choice, best_index, logits, probabilities" in shown
    import tensorflow as tf

    result = tf.saved_model.load(served).signatures["serving_default"](
        context=tf.constant([r["context"] for r in dev_rows]), choices=tf.constant([r["choices"] for r in dev_rows])
    )
    np.testing.assert_allclose(result["probabilities"].numpy(), probs, atol=1e-5)
    np.testing.assert_array_equal(result["best_index"].numpy(), best)


def test_predict_refuses_a_question_without_choices(tiny_model, tmp_path, capsys):
    model = BertMultipleChoice.from_preset(tiny_model)
    model.save_to_preset(str(tmp_path / "m"))
    assert main(["predict", "--model", str(tmp_path / "m"), "anna met bert"]) == 1
    assert "give a context and at least 2 choices" in capsys.readouterr().err


@pytest.mark.parametrize(
    "case, message",
    [
        ("label_range", r"train.jsonl:2: label 7 is not a choice index \(0..3\)"),
        ("choice_count", r"train.jsonl:3: 3 choices, earlier lines have 4"),
        ("not_json", r"train.jsonl:2: not a JSON object"),
        ("no_choices_key", r"train.jsonl:1: needs an object with \"context\", \"choices\""),
        ("swag_column", r"dev.csv:1: no column 'sent2'"),
        ("swag_label", r"dev.csv:3: label 'x' is not a choice index"),
        ("empty", r"train.jsonl has no questions"),
        ("dev_count", r"dev.jsonl has 2 choices per question but the training file 4"),
        ("unknown_format", r"train.txt: unknown multiple-choice format"),
    ],
)
def test_bad_input_fails_before_training(tiny_model, tmp_path, capsys, case, message):
    rows = _questions(6, 0)
    train, dev = _jsonl(tmp_path / "train.jsonl", rows), _jsonl(tmp_path / "dev.jsonl", rows)
    lines = [json.dumps(r) for r in rows]
    if case == "label_range":
        lines[1] = json.dumps({**rows[1], "label": 7})
    elif case == "choice_count":
        lines[2] = json.dumps({**rows[2], "choices": rows[2]["choices"][:3], "label": 0})
    elif case == "not_json":
        lines[1] = "{context: oops"
    elif case == "no_choices_key":
        lines[0] = json.dumps({"context": "a", "endings": ["b", "c"], "label": 0})
    elif case == "empty":
        lines = []
    if case in ("label_range", "choice_count", "not_json", "no_choices_key", "empty"):
        (tmp_path / "train.jsonl").write_text("".join(line + "\n" for line in lines))
    elif case == "swag_column":
        dev = str(tmp_path / "dev.csv")
        (tmp_path / "dev.csv").write_text("sent1,ending0,ending1,label\na,b,c,0\n")
    elif case == "swag_label":
        dev = _swag(tmp_path / "dev.csv", rows)
        text = (tmp_path / "dev.csv").read_text().splitlines()
        text[2] = text[2].rsplit(",", 1)[0] + ",x"
        (tmp_path / "dev.csv").write_text("\n".join(text) + "\n")
    elif case == "dev_count":
        dev = _jsonl(tmp_path / "dev.jsonl", _questions(4, 1, choices=2))
    elif case == "unknown_format":
        train = str(tmp_path / "train.txt")
        (tmp_path / "train.txt").write_text("a\n")
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    assert not os.path.exists(out)
