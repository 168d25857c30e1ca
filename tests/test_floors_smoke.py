"""The user's paths on raw text, end to end with tiny models and nothing but the package's own
dependencies: what `.ci/floors` runs in a fresh venv at the lowest versions pyproject.toml
declares (docs/dependencies.md), and what the main suite runs at the newest.

`fit` / `evaluate` / `predict` of a classifier and a tagger on raw text, the `finetune`
job (its own training loop and checkpoints), `export` to a raw-string SavedModel, `convert`
of an HF-layout checkpoint and `vocab` (HF tokenizers' WordPiece trainer). No test here may
import transformers, torch, scikit-learn or the MiniLM checkpoint: the floor venv has none.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertClassifier, BertTagger, TaggingPreprocessor, cli
from keras_bert_zoo.training import create_optimizer
from tests.helpers import save_tiny_model

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["good", "great", "bad", "awful", "the", "film", "was", "plot", "a", "very", "paris", "john", "visited"]


def _sentences(n, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    texts = [
        " ".join(rng.choice(WORDS[4:10], size=int(rng.integers(1, 10)))) + " " + ("good" if y else "bad")
        for y in labels
    ]
    return texts, labels


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_model(str(tmp_path_factory.mktemp("tiny")), SPECIAL + WORDS)


def test_classifier_fit_evaluate_predict_on_raw_text(tiny, tmp_path):
    texts, labels = _sentences(48)
    model = BertClassifier.from_preset(tiny, num_classes=2, label_names=["neg", "pos"])
    model.compile(optimizer=create_optimizer(1e-2))
    history = model.fit(texts, labels, batch_size=8, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert int(model.optimizer.iterations) == model.optimizer.learning_rate_schedule.total_steps
    metrics = model.evaluate(texts, labels, batch_size=16, return_dict=True, verbose=0)
    assert metrics["accuracy"] > 0.8
    logits = model.predict(texts[:5], verbose=0)
    assert logits.shape == (5, 2)
    names, probabilities = model.predict_labels(texts[:5], verbose=0)
    assert set(names) <= {"neg", "pos"} and np.allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    model.save(str(tmp_path / "model.keras"))
    reloaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    np.testing.assert_allclose(reloaded.predict(texts[:5], verbose=0), logits, atol=1e-5)


def test_tagger_fit_and_predict_tags_on_raw_words(tiny):
    words = [["john", "visited", "paris"], ["the", "film", "was", "good"], ["paris", "was", "great"]] * 6
    tags = [[1, 0, 2], [0, 0, 0, 0], [2, 0, 0]] * 6
    model = BertTagger.from_preset(
        tiny,
        label_names=["O", "B-PER", "B-LOC"],
        preprocessor=TaggingPreprocessor.from_preset(tiny, sequence_length=16),
    )
    model.compile(optimizer=create_optimizer(1e-2))
    model.fit(words, tags, batch_size=4, epochs=2, verbose=0)
    predicted = model.predict_tags(words[:3])
    assert [len(p) for p in predicted] == [3, 4, 3]


def _tsv(path, n, seed):
    texts, labels = _sentences(n, seed)
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in zip(texts, labels, strict=True)))
    return str(path)


def test_finetune_export_and_serve(tiny, tmp_path):
    out, served = str(tmp_path / "out"), str(tmp_path / "served")
    assert (
        cli.main(
            [
                "finetune",
                "classify",
                "--model",
                tiny,
                "--glue",
                "sst2",
                "--train",
                _tsv(tmp_path / "train.tsv", 40, 0),
                "--dev",
                _tsv(tmp_path / "dev.tsv", 16, 1),
                "--out",
                out,
                "--epochs",
                "1",
                "--batch-size",
                "8",
                "--sequence-length",
                "16",
                "--checkpoint-every",
                "2",
            ]
        )
        == 0
    )
    with open(os.path.join(out, "metrics.json")) as f:
        assert 0.0 <= json.load(f)["accuracy"] <= 1.0
    assert cli.main(["export", "--model", out, "--out", served]) == 0
    model = BertClassifier.from_preset(out)
    texts = ["the film was good", "a very bad plot", ""]
    expected = model.logits_to_probabilities(model.predict(texts, verbose=0))
    got = tf.saved_model.load(served).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)


def test_convert_an_hf_layout_checkpoint(tiny, tmp_path):
    out = str(tmp_path / "converted")
    assert cli.main(["convert", "--from", tiny, "--out", out]) == 0
    for a, b in zip(BertBackbone.from_preset(tiny).weights, BertBackbone.from_preset(out).weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_vocab_learns_a_wordpiece_vocabulary(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the {w} film was {v}\n" for w in WORDS for v in WORDS))
    out = str(tmp_path / "vocab.txt")
    assert (
        cli.main(["vocab", "--corpus", str(corpus), "--size", "60", "--out", out, "--learner", "tokenizers"]) == 0
    )  # HF tokenizers' trainer, at its floor too
    with open(out) as f:
        vocabulary = f.read().split()
    assert vocabulary[:1] == ["[PAD]"] and "film" in vocabulary and len(vocabulary) <= 60
