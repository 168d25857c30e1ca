"""`bert-zoo embed`, `evaluate-embeddings`, and the embed task's evaluate / predict / export;
`bert-zoo finetune classify --task stsb` on the original STS-B layout (regression)."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, BertSentenceEmbedder
from keras_bert_zoo.cli import main
from tests.helpers import minilm_path

STS_ROWS = [  # genre file year id score sentence1 sentence2 (+ the 2016 rows' two extra fields)
    ("main-captions", "MSRvid", "2012test", "0001", "5.000", "A plane is taking off.", "An air plane is taking off."),
    (
        "main-captions",
        "MSRvid",
        "2012test",
        "0004",
        "3.800",
        "A man is playing a large flute.",
        'A man "plays a flute.',
    ),
    ("main-news", "headlines", "2016", "0012", "1", "Driver backs into stroller", "Oil prices fall", "EMM", "EMM"),
    ("main-forums", "answers", "2015", "0007", "0.4", "Tea or coffee?", "The dog sleeps."),
    ("main-news", "MSRpar", "2012test", "0698", "2.5", "Treasury\x12s plan", "The Treasury said it wants a plan."),
]


@pytest.fixture(scope="module")
def embedder_dir(tmp_path_factory):
    """A saved 1-layer embedder with the real MiniLM vocabulary (max pooling)."""
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=24)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    path = str(tmp_path_factory.mktemp("embedder"))
    BertSentenceEmbedder(backbone, pooling="max", preprocessor=pre).save_to_preset(path)
    return path


def _sts_file(path):
    path.write_text("".join("\t".join(r) + "\n" for r in STS_ROWS), encoding="utf-8")
    return str(path)


def test_embed_cli_writes_the_rows_of_encode(embedder_dir, tmp_path, capsys):
    texts = ["A plane is taking off.", "", "Zürich café", "and on " * 50]
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = str(tmp_path / "vectors.npy")
    assert main(["embed", "--model", embedder_dir, "--data", str(data), "--out", out]) == 0
    assert "wrote" in capsys.readouterr().out
    vectors = np.load(out)
    expected = BertSentenceEmbedder.from_preset(embedder_dir).encode(texts)
    assert vectors.shape == (4, 16) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # the atomic writer left nothing behind
    assert (
        main(["embed", "--model", embedder_dir, "--data", str(data), "--out", out, "--pooling", "cls", "--normalize"])
        == 2
    )  # an existing --out needs --overwrite (issue 27)
    assert (
        main(
            [
                "embed",
                "--model",
                embedder_dir,
                "--data",
                str(data),
                "--out",
                out,
                "--pooling",
                "cls",
                "--normalize",
                "--overwrite",
            ]
        )
        == 0
    )
    cls = np.load(out)
    np.testing.assert_allclose(np.linalg.norm(cls, axis=1), 1.0, atol=1e-5)
    assert np.abs(cls - vectors).max() > 1e-3
    # Bad input: one line naming the flag, and the old output stays as it was.
    before = open(out, "rb").read()
    assert (
        main(["embed", "--model", embedder_dir, "--data", str(tmp_path / "nope.txt"), "--out", out, "--overwrite"]) == 1
    )
    assert "--data" in capsys.readouterr().err and open(out, "rb").read() == before


def test_embed_cli_progress_on_long_files(embedder_dir, tmp_path, capsys):
    from keras_bert_zoo.commands.embed import LONG_FILE

    data = tmp_path / "long.txt"
    data.write_text("\n".join(f"sentence {i % 7}" for i in range(LONG_FILE)) + "\n")
    assert (
        main(
            [
                "embed",
                "--model",
                embedder_dir,
                "--data",
                str(data),
                "--out",
                str(tmp_path / "e.npy"),
                "--batch-size",
                "64",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"embedded 4096/{LONG_FILE} texts" in err and f"embedded {LONG_FILE}/{LONG_FILE} texts" in err
    assert np.load(tmp_path / "e.npy").shape == (LONG_FILE, 16)


def test_evaluate_embeddings_cli_equals_a_reference_written_here(embedder_dir, tmp_path, capsys):
    stats = pytest.importorskip("scipy.stats")
    data = _sts_file(tmp_path / "sts-dev.csv")
    out = str(tmp_path / "metrics.json")
    assert (
        main(["evaluate-embeddings", "--model", embedder_dir, "--data", data, "--pooling", "mean", "--out", out]) == 0
    )
    printed = json.loads(capsys.readouterr().out)
    metrics = json.load(open(out))
    model = BertSentenceEmbedder.from_preset(embedder_dir, pooling="mean")
    a, b = model.encode([r[5] for r in STS_ROWS]), model.encode([r[6] for r in STS_ROWS])
    cosine = [float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(a, b, strict=True)]
    gold = [float(r[4]) for r in STS_ROWS]
    assert metrics["spearman"] == pytest.approx(stats.spearmanr(gold, cosine)[0], abs=1e-6)
    assert metrics["pearson"] == pytest.approx(stats.pearsonr(gold, cosine)[0], abs=1e-6)
    assert metrics["examples"] == 5 and printed["pooling"] == "mean"
    # The saved embedder's own pooling (max) through `bert-zoo evaluate` (the embed task).
    assert main(["evaluate", "--model", embedder_dir, "--data", data]) == 0
    by_task = json.loads(capsys.readouterr().out)
    a, b = (
        BertSentenceEmbedder.from_preset(embedder_dir).encode([r[5] for r in STS_ROWS]),
        BertSentenceEmbedder.from_preset(embedder_dir).encode([r[6] for r in STS_ROWS]),
    )
    cosine = [float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(a, b, strict=True)]
    assert by_task["spearman"] == pytest.approx(stats.spearmanr(gold, cosine)[0], abs=1e-6)
    bad = tmp_path / "bad.csv"
    bad.write_text("main\tMSRvid\t2012\t0001\tfive\ta\tb\n")
    assert main(["evaluate-embeddings", "--model", embedder_dir, "--data", str(bad)]) == 1
    assert "bad.csv:1: score 'five' is not a number" in capsys.readouterr().err


def test_predict_and_export_an_embedder_dir(embedder_dir, tmp_path, capsys):
    assert main(["predict", "--model", embedder_dir, "--json", "A plane is taking off."]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    expected = BertSentenceEmbedder.from_preset(embedder_dir).encode(["A plane is taking off."])[0]
    np.testing.assert_allclose(row["embedding"], expected, rtol=1e-5, atol=1e-5)
    assert main(["export", "--model", embedder_dir, "--out", str(tmp_path / "served")]) == 0
    assert "serving_default(text) -> embeddings" in capsys.readouterr().out


@pytest.mark.slow  # the STS-B reader's own tests stay in the default run
def test_finetune_classify_task_stsb_reads_the_original_files(tmp_path):
    """`--task stsb` (alias of `--glue stsb`): the original layout, regression on the score."""
    stats = pytest.importorskip("scipy.stats")
    keras.utils.set_random_seed(0)
    model_dir = str(tmp_path / "tiny")
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=24)
    BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    ).save_to_preset(model_dir)
    pre.save_to_preset(model_dir)
    train, dev = _sts_file(tmp_path / "sts-train.csv"), _sts_file(tmp_path / "sts-dev.csv")
    out = str(tmp_path / "out")
    assert (
        main(
            [
                "finetune",
                "classify",
                "--task",
                "stsb",
                "--model",
                model_dir,
                "--train",
                train,
                "--dev",
                dev,
                "--out",
                out,
                "--epochs",
                "1",
                "--batch-size",
                "2",
                "--sequence-length",
                "24",
            ]
        )
        == 0
    )
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    model = BertClassifier.from_preset(out)
    assert (model.num_classes, model.problem_type) == (1, "regression")
    scores = model.predict([(r[5], r[6]) for r in STS_ROWS], verbose=0)[:, 0]
    gold = [float(r[4]) for r in STS_ROWS]
    assert metrics["spearman"] == pytest.approx(stats.spearmanr(gold, scores)[0], abs=1e-4)
    assert metrics["pearson"] == pytest.approx(stats.pearsonr(gold, scores)[0], abs=1e-4)
    assert main(["evaluate", "--model", out, "--data", dev]) == 0  # the saved layout reads the file again
