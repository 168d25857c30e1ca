"""`keras_bert_zoo.pretrain`: exactly N steps, only the chief writes, the vocabulary never sees held-out text."""

import json
import os
import re

import pytest

from keras_bert_zoo import pretrain
from tests.helpers import minilm_path, shared_data

TINY = dict(preset="bert_tiny_uncased", sequence_length=32, batch_size=4, eval_batches=2, jit_compile=False, verbose=0)


def test_steps_are_exact_when_not_a_multiple_of_eval_every(tmp_path):
    # 5 steps with an evaluation every 2: epochs of 2 steps would run 6 (the old behaviour).
    corpus = shared_data("pretrain_text", "sample_text.txt")
    model, metrics = pretrain(
        corpus, str(tmp_path / "run"), vocab=minilm_path(), steps=5, eval_every=2, holdout_every=3, **TINY
    )
    assert int(model.optimizer.iterations.numpy()) == 5
    assert metrics["steps"] == 5
    with open(tmp_path / "run" / "metrics.json") as f:
        assert json.load(f)["steps"] == 5
    # The held-out score of the last (partial) epoch is the one reported.
    assert 0 <= metrics["mlm_accuracy"] <= 1


def test_only_the_chief_writes(tmp_path, monkeypatch):
    """A non-chief worker (multi-worker) trains but writes nothing: no vocab.txt, no logs, no preset."""
    import keras_bert_zoo.training as training

    monkeypatch.setattr(training, "is_chief", lambda strategy=None: False)
    corpus = shared_data("pretrain_text", "sample_text.txt")
    out = tmp_path / "worker1"
    model, metrics = pretrain(corpus, str(out), vocab_size=300, steps=2, eval_every=2, **TINY)
    assert metrics == {} and int(model.optimizer.iterations.numpy()) == 2
    assert not out.exists(), sorted(os.listdir(out))


def _corpus_with_a_heldout_word(path, documents=6, word="quokkaquokka"):
    """Documents of ordinary sentences; the held-out ones (every 2nd) also repeat one rare word."""
    ordinary = [
        "the cat sat on the mat near the door .",
        "a dog ran in the park with a ball .",
        "we read a book about the sea and the sky .",
        "the sun was warm and the wind was soft .",
    ]
    lines = []
    for d in range(documents):
        lines += [f"{s} ({d})" for s in ordinary]
        if d % 2 == 1:  # split_documents(i, 2) holds out i = 1, 3, 5
            lines += [f"the {word} is a {word} ."] * 30
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("holdout_every, learned", [(2, False), (0, True)])
def test_vocabulary_is_learned_on_training_documents_only(tmp_path, holdout_every, learned):
    corpus = _corpus_with_a_heldout_word(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    pretrain(corpus, str(out), vocab_size=200, steps=1, eval_every=1, holdout_every=holdout_every, **TINY)
    vocab = (out / "vocab.txt").read_text().split("\n")
    # Without a hold-out the word is frequent enough to be learned (so the test can fail).
    assert any("quokka" in token for token in vocab) == learned


def test_a_holdout_that_holds_out_nothing_is_refused_with_the_fix(tmp_path, capsys):
    """3 documents, every 10th held out: none is. Training used to go on and print an empty
    "held-out" line after Keras' "Your input ran out of data" (evaluate on zero batches); now it
    stops before training, naming the count and the flags that fix it. The vocabulary learned
    first (1,119 tokens of the 8,000 asked for) says so."""
    from keras_bert_zoo.errors import InvalidInputError, UsageError

    corpus = shared_data("pretrain_text", "sample_text.txt")
    out = tmp_path / "run"
    with pytest.raises(
        InvalidInputError,
        match=r"--holdout-every 10 holds out every 10th document, but the corpus "
        r"has 3, so none is held out .* use --holdout-every 3 or less, "
        r"--eval-corpus FILE, or --holdout-every 0",
    ):
        pretrain(corpus, str(out), vocab_size=8000, steps=2, eval_every=1, holdout_every=10, **TINY)
    assert not out.exists()
    assert re.search(r"note: learned a vocabulary of 1,1\d\d tokens, not the 8,000 asked for", capsys.readouterr().err)
    with pytest.raises(UsageError, match="--holdout-every 1 holds out every document"):
        pretrain(corpus, str(out), vocab_size=300, steps=2, holdout_every=1, **TINY)
