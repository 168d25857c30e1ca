"""`bert-zoo finetune tag`, `evaluate`, `predict` end to end on a tiny model; bad input fails up front."""

import json
import os
import re

import numpy as np
import pytest

from keras_bert_zoo import BertTagger
from keras_bert_zoo.cli import main
from keras_bert_zoo.tasks.tagger.metrics import entity_scores
from tests.helpers import save_tiny_model

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PEOPLE, PLACES, OTHER = ["anna", "bert", "carl"], ["paris", "rome", "oslo"], ["met", "in", "the", "a", "went", "to"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_tagger")), SPECIAL + PEOPLE + PLACES + OTHER + ["##s"])


def _conll_file(path, n, seed):
    """CoNLL-2003 columns in IOB1: people are I-PER, places I-LOC (the original files' scheme)."""
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- O O", ""]
    for _ in range(n):
        previous = 2
        for _ in range(rng.integers(2, 9)):
            kind = 2 if previous != 2 else rng.integers(3)  # entities are one word, never adjacent
            previous = kind
            word, tag = (
                (rng.choice(PEOPLE), "I-PER")
                if kind == 0
                else (rng.choice(PLACES), "I-LOC")
                if kind == 1
                else (rng.choice(OTHER), "O")
            )
            lines.append(f"{word.capitalize() if tag != 'O' else word} NNP I-NP {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _finetune(model, train, dev, out, *extra):
    return main(
        [
            "finetune",
            "tag",
            "--model",
            model,
            "--train",
            train,
            "--dev",
            dev,
            "--out",
            out,
            "--sequence-length",
            "16",
            "--batch-size",
            "16",
            "--learning-rate",
            "5e-3",
            *extra,
        ]
    )


def test_finetune_evaluate_predict(tiny_model, tmp_path, capsys):
    train, dev = _conll_file(tmp_path / "train.txt", 300, 0), _conll_file(tmp_path / "dev.txt", 60, 1)
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out, "--epochs", "4") == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["f1"] > 0.9 and metrics["f1_PER"] > 0.9 and metrics["support_LOC"] > 0, metrics

    model = BertTagger.from_preset(out)
    assert model.scheme == "IOB2" and "B-PER" in model.label_names  # IOB1 was read as IOB2
    # The saved metrics are the entity scores of the saved model, recomputed by hand.
    from keras_bert_zoo.tasks.tagger.data import read_tagged

    gold = read_tagged(dev)
    predicted = model.predict_tags(gold.words)
    assert entity_scores(gold.tags, predicted)["f1"] == pytest.approx(metrics["f1"])

    capsys.readouterr()
    scored = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", out, "--data", dev, "--out", scored]) == 0
    with open(scored) as f:
        again = json.load(f)
    assert again["f1"] == pytest.approx(metrics["f1"]) and again["sentences"] == 60

    capsys.readouterr()
    assert main(["predict", "--model", out, "--json", "Anna went to Paris", "the  Carl   met Bert in Oslo"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    first = rows[0]["entities"]
    assert [(e["text"], e["type"], e["start"], e["end"]) for e in first] == [
        ("Anna", "PER", 0, 4),
        ("Paris", "LOC", 13, 18),
    ]
    text = rows[1]["text"]
    assert [text[e["start"] : e["end"]] for e in rows[1]["entities"]] == ["Carl", "Bert", "Oslo"]


def test_every_word_of_a_long_sentence_is_tagged(tiny_model):
    model = BertTagger.from_preset(tiny_model, num_labels=3, label_names=["O", "B-PER", "I-PER"])
    sentence = [PEOPLE[i % 3] for i in range(1000)]
    for length in (16, 32):
        model.preprocessor.sequence_length = length
        assert len(model.predict_tags([sentence])[0]) == 1000


@pytest.mark.parametrize(
    "case, message",
    [
        ("unseen_tag", r"dev.txt:4: tag 'B-FOO' is not among the model's labels"),
        ("no_tag_column", r"train.txt:3: .*(column|tag)"),
        ("empty", r"train.txt has no sentences"),
        ("jsonl_mismatch", r"train.jsonl:2: .*3 tokens .*2 tags|train.jsonl:2: .*tokens.*tags"),
    ],
)
def test_bad_input_fails_before_training(tiny_model, tmp_path, capsys, case, message):
    train, dev = _conll_file(tmp_path / "train.txt", 20, 0), _conll_file(tmp_path / "dev.txt", 5, 1)
    if case == "unseen_tag":
        (tmp_path / "dev.txt").write_text("-DOCSTART- -X- O O\n\nanna x x B-PER\nparis x x B-FOO\n")
    elif case == "no_tag_column":
        (tmp_path / "train.txt").write_text("-DOCSTART- -X- O O\n\nanna\n")
    elif case == "empty":
        (tmp_path / "train.txt").write_text("")
    elif case == "jsonl_mismatch":
        train = str(tmp_path / "train.jsonl")
        (tmp_path / "train.jsonl").write_text(
            '{"tokens": ["anna"], "tags": ["B-PER"]}\n{"tokens": ["a", "b", "c"], "tags": ["O", "O"]}\n'
        )
    out = str(tmp_path / "out")
    assert _finetune(tiny_model, train, dev, out) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(message, err), err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    assert not os.path.exists(out)


def test_length_grouped_batches_train_through_the_token_weighted_loss(tiny_model, tmp_path, monkeypatch):
    """`batching="by_length"`: batches of similar length with their row weights (see
    `make_tagging_dataset`) go through the resumable loop into the tagger's loss."""
    from keras_bert_zoo import finetune
    from keras_bert_zoo.tasks.tagger import dataset as tag_dataset

    made = []  # the training batches finetune really builds (by_length was once lost on the way)

    def spy(*args, **kwargs):
        ds = make(*args, **kwargs)
        if kwargs.get("training"):
            made.append((kwargs.get("group_by_length"), ds.element_spec))
        return ds

    make = tag_dataset.make_tagging_dataset
    monkeypatch.setattr(tag_dataset, "make_tagging_dataset", spy)
    train, dev = _conll_file(tmp_path / "train.txt", 300, 0), _conll_file(tmp_path / "dev.txt", 60, 1)
    _, metrics = finetune(
        "tag",
        tiny_model,
        train,
        dev,
        str(tmp_path / "out"),
        epochs=4,
        batch_size=16,
        learning_rate=5e-3,
        sequence_length=16,
        batching="by_length",
    )
    assert [grouped for grouped, _ in made] == [True]
    assert len(made[0][1]) == 3  # (features, labels, sample_weight): the token weights reach the loss
    assert metrics["f1"] > 0.9, metrics


def test_default_batches_are_packed_rows_and_learn(tiny_model, tmp_path, monkeypatch):
    """`finetune("tag")` packs its random training batches into rows (`preprocessing.packing`)
    and learns the tags through them; `"bucketed"` keeps the rows one window each."""
    from keras_bert_zoo import finetune
    from keras_bert_zoo.tasks.tagger import dataset as tag_dataset

    made = []

    def spy(*args, **kwargs):
        ds = make(*args, **kwargs)
        if kwargs.get("training"):
            made.append((kwargs.get("pack_width"), next(iter(ds))[0]["padding_mask"].numpy()))
        return ds

    make = tag_dataset.make_tagging_dataset
    monkeypatch.setattr(tag_dataset, "make_tagging_dataset", spy)
    train, dev = _conll_file(tmp_path / "train.txt", 300, 0), _conll_file(tmp_path / "dev.txt", 60, 1)
    _, metrics = finetune(
        "tag",
        tiny_model,
        train,
        dev,
        str(tmp_path / "out"),
        epochs=4,
        batch_size=16,
        learning_rate=5e-3,
        sequence_length=16,
    )
    assert metrics["f1"] > 0.9, metrics
    finetune(
        "tag",
        tiny_model,
        train,
        dev,
        str(tmp_path / "padded"),
        epochs=1,
        batch_size=16,
        max_train_examples=32,
        sequence_length=16,
        batching="bucketed",
    )
    (width, packed), (no_width, padded) = made
    assert width == 16 and no_width is None  # 64, but never wider than the windows (16 here)
    assert packed.max() > 1 and len(packed) < 16  # several sentences per row, fewer rows than sentences
    assert padded.max() == 1 and len(padded) == 16


def test_an_unknown_batching_is_refused_not_read_as_random_batches(tiny_model, tmp_path):
    """A truthy string `finetune` does not know (here a misspelling) once meant the default
    random batches, silently; now it is refused before anything is read or written."""
    from keras_bert_zoo import finetune
    from keras_bert_zoo.errors import UsageError

    train, dev = _conll_file(tmp_path / "train.txt", 20, 0), _conll_file(tmp_path / "dev.txt", 5, 1)
    with pytest.raises(
        UsageError,
        match="batching='bylength' is not a batching of task 'tag'; use one of "
        "'auto', 'packed', 'by_length', 'bucketed', 'fixed'.$",
    ):
        finetune("tag", tiny_model, train, dev, str(tmp_path / "out"), batching="bylength")
    with pytest.raises(UsageError, match=r"batching=True is not a batching of task 'tag'"):  # the old bool form
        finetune("tag", tiny_model, train, dev, str(tmp_path / "out"), batching=True)
    assert not os.path.exists(tmp_path / "out")
