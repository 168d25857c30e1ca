"""`bert-zoo demo --budget small`: the main job end to end, in CI time.

What it checks against references outside this package: the held-out MLM loss of
the pretrained model against the same model's random initialisation (same
fixed-seed masks), the test accuracy against the majority-class baseline computed
here from the data files, and the exported SavedModel loaded by TensorFlow itself.
"""

import collections
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import cli
from keras_bert_zoo.demo import corpus


@pytest.mark.slow  # over a minute together with the others: kept out of the 20-minute default run
def test_demo_small_budget(tmp_path, capsys):
    out = str(tmp_path / "demo")
    assert cli.main(["demo", "--budget", "small", "--out", out]) == 0
    printed = capsys.readouterr().out
    for k in range(1, 6):
        assert f"[{k}/5]" in printed  # every step reports
    with open(os.path.join(out, "demo_metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)

    # Pretraining worked: held-out MLM loss well below the random initialisation's.
    assert metrics["heldout_mlm_loss"] < metrics["heldout_mlm_loss_init"] - 0.5, metrics
    assert metrics["heldout_mlm_accuracy"] > metrics["heldout_mlm_accuracy_init"], metrics
    for png in ("pretrained/loss_curves.png", "classifier/training_curve.png"):
        with open(os.path.join(out, png), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    # The task is real: splits are disjoint and the baseline is the train majority on test.
    rows = {
        name: [json.loads(line) for line in open(os.path.join(out, "data", f"{name}.jsonl"), encoding="utf-8")]
        for name in ("train", "dev", "test")
    }
    texts = [{r["text"] for r in rows[name]} for name in rows]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    majority = collections.Counter(r["label"] for r in rows["train"]).most_common(1)[0][0]
    baseline = np.mean([r["label"] == majority for r in rows["test"]])
    assert abs(metrics["test_majority_baseline"] - baseline) < 1e-9
    assert "majority-class baseline" in printed

    # The exported model answers raw strings with one of the chapters, as the Keras model.
    assert metrics["savedmodel_max_abs_diff"] <= 1e-5
    served = tf.saved_model.load(os.path.join(out, "saved_model"))
    got = served.signatures["serving_default"](text=tf.constant(["The for statement iterates over a list.", ""]))
    assert {s.decode() for s in got["labels"].numpy()} <= set(corpus.LABELS)
    np.testing.assert_allclose(got["probabilities"].numpy().sum(-1), 1.0, atol=1e-5)
    # Scoring the test split again here gives the reported accuracy.
    test = rows["test"]
    answers = served.signatures["serving_default"](text=tf.constant([r["text"] for r in test]))
    accuracy = np.mean([a.decode() == r["label"] for a, r in zip(answers["labels"].numpy(), test, strict=True)])
    assert abs(accuracy - metrics["test_accuracy"]) < 1e-9


def test_every_documentation_topic_has_a_chapter():
    from pydoc_data.topics import topics

    assert set(topics) <= set(corpus.TOPIC_LABEL), sorted(set(topics) - set(corpus.TOPIC_LABEL))
    rows = corpus.labelled_paragraphs()
    paragraphs = [p for _, _, p in rows]
    assert len(paragraphs) == len(set(paragraphs)) > 1000
    # Chapter labels follow the documentation: the 'if' topic's text is a compound statement.
    assert corpus.TOPIC_LABEL["if"] == corpus.TOPIC_LABEL["compound"] == "statements"
    assert 'The "if" statement is used for conditional execution' in topics["compound"]


def test_start_up_timing_needs_no_download(monkeypatch):
    """The estimate's step timing builds the budget's architecture only: a preset name alone would
    fetch its pretrained checkpoint from the Hub (offline: an error before the demo starts)."""
    from keras_bert_zoo.demo import pipeline

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")  # nothing cached either
    cfg = dict(pipeline.BUDGETS["small"], batch_size=2, sequence_length=16)
    seconds = pipeline.time_pretraining_step(cfg, repeats=1)
    assert 0 < seconds < 60


@pytest.mark.parametrize("step_seconds", [0.05, 0.14, 0.3, 0.45, 0.6, 1.0, 5.0])
def test_full_budget_fits_its_time_on_any_machine(step_seconds):
    """`fit_to_time`: the whole budget where its estimate fits `TIME_LIMITS["full"]`; on a slower
    machine, pretraining steps and fine-tuning epochs scaled by one factor until it fits (down to
    `MIN_SCALE`, below which the estimate may exceed the limit); "small" is never scaled."""
    from keras_bert_zoo.demo import pipeline

    whole = pipeline.BUDGETS["full"]
    limit = pipeline.TIME_LIMITS["full"]
    cfg, scale = pipeline.fit_to_time("full", step_seconds)
    estimate = pipeline.estimate_seconds("full", step_seconds, cfg)
    if pipeline.estimate_seconds("full", step_seconds) <= limit:
        assert (cfg, scale) == (whole, 1.0)
    elif scale > pipeline.MIN_SCALE["full"]:
        assert estimate <= limit and scale < 1.0
        assert cfg["pretrain_steps"] <= whole["pretrain_steps"] * scale
        assert cfg["finetune_epochs"] <= whole["finetune_epochs"] * scale
    else:
        assert scale == pipeline.MIN_SCALE["full"] and cfg["pretrain_steps"] >= 50
    assert 1 <= cfg["eval_every"] <= cfg["pretrain_steps"]
    assert {k: v for k, v in cfg.items() if k not in ("pretrain_steps", "finetune_epochs", "eval_every")} == {
        k: v for k, v in whole.items() if k not in ("pretrain_steps", "finetune_epochs", "eval_every")
    }
    assert pipeline.fit_to_time("small", step_seconds) == (pipeline.BUDGETS["small"], 1.0)
