"""`keras_bert_zoo.finetune`: a plain function returning the model and its metrics; final vs best-of-dev."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, finetune
from keras_bert_zoo.tasks.classifier.data import DataLayout

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "the", "film", "was"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    import keras

    root = tmp_path_factory.mktemp("job")
    model_dir = str(root / "model")
    keras.utils.set_random_seed(0)
    BertBackbone(
        vocabulary_size=len(WORDS),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        dropout=0.0,
    ).save_to_preset(model_dir)
    (root / "model" / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    rng = np.random.default_rng(0)
    rows = ["sentence\tlabel"]
    for _ in range(96):
        label = int(rng.integers(2))
        rows.append(f"the film was {'good' if label else 'bad'}\t{label}")
    (root / "data.tsv").write_text("\n".join(rows) + "\n")
    return model_dir, str(root / "data.tsv"), root


@pytest.mark.parametrize("select", ["final", "best"])
def test_returns_the_kept_model_and_its_scores(job, select):
    model_dir, data, root = job
    out = str(root / select)
    model, metrics = finetune(
        "classify",
        model_dir,
        data,
        data,
        out,
        layout=DataLayout.for_task("sst2"),
        epochs=2,
        batch_size=16,
        learning_rate=1e-2,
        sequence_length=16,
        eval_every=2,
        select=select,
        verbose=0,
    )
    assert isinstance(model, BertClassifier)
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f) == pytest.approx(metrics)
    assert metrics["selection_best"] == int(select == "best")
    assert metrics["steps"] == 2 * 6 and metrics["best_step"] in range(2, 13, 2)  # 96 examples / 16, 2 epochs
    if select == "best":
        assert metrics["accuracy"] == metrics["best_dev_accuracy"]
    else:
        assert metrics["accuracy"] <= metrics["best_dev_accuracy"]
    # The returned model is the saved one, and its dev score is the reported one.
    saved = BertClassifier.from_preset(out)
    texts = [line.split("\t")[0] for line in open(data).read().splitlines()[1:]]
    np.testing.assert_allclose(saved.predict(texts, verbose=0), model.predict(texts, verbose=0), rtol=1e-5, atol=1e-5)
    labels = np.array([int(line.split("\t")[1]) for line in open(data).read().splitlines()[1:]])
    accuracy = float(np.mean(np.argmax(saved.predict(texts, verbose=0), -1) == labels))
    assert accuracy == pytest.approx(metrics["accuracy"])


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("epochs", 0, "--epochs 0 must be positive"),
        ("learning_rate", float("nan"), "--learning-rate nan must be positive"),
        ("warmup_ratio", 1.5, "--warmup-ratio 1.5 must be within"),
        ("select", "last", "select='last'"),
    ],
)
def test_bad_recipe_is_refused_before_anything_is_written(job, flag, value, message):
    model_dir, data, root = job
    out = root / f"bad_{flag}"
    with pytest.raises(ValueError, match=message):
        finetune("classify", model_dir, data, data, str(out), layout=DataLayout.for_task("sst2"), **{flag: value})
    assert not out.exists()
