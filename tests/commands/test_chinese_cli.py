"""`bert-zoo finetune`, `evaluate` and `predict` on Chinese files and strings without spaces.

A tiny HF-written Chinese BERT (character vocabulary, `tests/chinese_fixtures`) is fine-tuned on a Chinese review
TSV (the SST-2 layout `zh_sentiment` uses) and on a CMRC 2018-style SQuAD file (contexts without spaces,
`answer_start` counted in characters); the saved models are scored with `evaluate` and asked with `predict`.
Predictions are checked against the model's own Python API and the answers against the contexts they slice.
"""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertClassifier
from keras_bert_zoo.cli import main
from keras_bert_zoo.tasks.span_qa.data import read_squad
from tests.chinese_fixtures import write_chinese_checkpoint

POSITIVE = ["很好", "不错", "满意", "推荐"]
NEGATIVE = ["很差", "失望", "太慢", "退货"]
FILLER = ["这本书的内容", "快递", "房间", "包装", "酒店的服务", "价格"]
NAMES = ["张三", "李四", "王五", "赵六", "孙七", "周八"]
CITIES = ["北京", "上海", "广州", "深圳", "杭州", "南京"]
QA_TEXTS = ["".join(POSITIVE + NEGATIVE + FILLER + NAMES + CITIES) + "住在哪里？。，了也"]


def review_file(path, n, seed):
    rng = np.random.default_rng(seed)
    lines = ["sentence\tlabel"]
    for _ in range(n):
        label = int(rng.integers(2))
        cue = str(rng.choice(POSITIVE if label else NEGATIVE))
        lines.append(f"{rng.choice(FILLER)}{cue}，{rng.choice(FILLER)}也{rng.choice(POSITIVE + NEGATIVE)}了\t{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def cmrc_file(path, n, seed):
    """CMRC 2018's layout: SQuAD JSON, Chinese contexts without spaces, answer_start in characters.

    "房间很差，张三住在北京。快递不错。" -> "张三住在哪里？" -> "北京": the answer's character offset moves with the
    review clauses around it, so a wrong character-to-token mapping cannot score."""
    rng = np.random.default_rng(seed)
    paragraphs = []
    for i in range(n):
        person, city = str(rng.choice(NAMES)), str(rng.choice(CITIES))
        before = "".join(f"{rng.choice(FILLER)}{rng.choice(POSITIVE + NEGATIVE)}，" for _ in range(rng.integers(0, 3)))
        after = "".join(f"{rng.choice(FILLER)}{rng.choice(POSITIVE + NEGATIVE)}。" for _ in range(rng.integers(0, 2)))
        context = f"{before}{person}住在{city}。{after}"
        question = {
            "id": f"CMRC_{seed}_{i}",
            "question": f"{person}住在哪里？",
            "answers": [{"text": city, "answer_start": len(before) + len(person) + 2}],
        }
        paragraphs.append({"id": f"CMRC_{seed}_{i}", "context": context, "qas": [question]})
    data = {"version": "v1.0", "data": [{"id": f"DEV_{seed}", "title": "", "paragraphs": paragraphs}]}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def chinese_model(tmp_path_factory):
    texts = QA_TEXTS + ["".join(FILLER)]
    return write_chinese_checkpoint(str(tmp_path_factory.mktemp("zh_backbone")), texts=texts, seed=1)


def _last_json_lines(capsys):
    return [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]


def test_finetune_classify_evaluate_predict_on_chinese_reviews(chinese_model, tmp_path, capsys):
    train, dev = review_file(tmp_path / "train.tsv", 256, 0), review_file(tmp_path / "dev.tsv", 64, 1)
    out = str(tmp_path / "out")
    args = ["finetune", "classify", "--model", chinese_model, "--glue", "sst2", "--train", train, "--dev", dev]
    args += ["--out", out, "--sequence-length", "32", "--batch-size", "16", "--learning-rate", "3e-3"]
    assert main([*args, "--epochs", "4"]) == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["accuracy"] > 0.9, metrics  # the sentiment word decides the label

    scored = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", out, "--data", dev, "--out", scored]) == 0
    with open(scored) as f:
        assert json.load(f)["accuracy"] == pytest.approx(metrics["accuracy"])

    texts = ["快递很好，包装也不错了", "房间很差，价格也失望了"]
    capsys.readouterr()
    assert main(["predict", "--model", out, "--json", *texts]) == 0
    rows = _last_json_lines(capsys)
    labels, probabilities = BertClassifier.from_preset(out).predict_labels(texts, verbose=0)
    assert [r["label"] for r in rows] == list(labels) == ["positive", "negative"]
    for row, p in zip(rows, np.asarray(probabilities), strict=True):
        np.testing.assert_allclose([row["probabilities"][k] for k in ("negative", "positive")], p, atol=1e-4)


def test_cmrc_style_file_reads_with_character_offsets(tmp_path):
    path = cmrc_file(tmp_path / "cmrc.json", 5, 3)
    examples = read_squad(path)
    for context, start, answers in zip(examples.contexts, examples.answer_starts, examples.answers, strict=True):
        assert " " not in context and context[start : start + len(answers[0])] == answers[0]
    raw = json.loads(open(path, encoding="utf-8").read())
    raw["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1  # shifted by one character
    (tmp_path / "shifted.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(Exception, match="is not at answer_start .* counts characters"):
        read_squad(str(tmp_path / "shifted.json"))


def test_cmrc_style_qa_round_trip(chinese_model, tmp_path, capsys):
    train, dev = cmrc_file(tmp_path / "train.json", 300, 0), cmrc_file(tmp_path / "dev.json", 40, 1)
    out = str(tmp_path / "out")
    args = ["finetune", "qa", "--model", chinese_model, "--train", train, "--dev", dev, "--out", out]
    args += ["--sequence-length", "48", "--max-query-length", "10", "--batch-size", "16", "--learning-rate", "5e-3"]
    assert main([*args, "--epochs", "4"]) == 0
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["exact_match"] > 0.8, metrics

    scored = str(tmp_path / "eval" / "metrics.json")
    os.makedirs(os.path.dirname(scored))
    assert main(["evaluate", "--model", out, "--data", dev, "--out", scored]) == 0
    with open(scored) as f:
        assert json.load(f)["exact_match"] == pytest.approx(metrics["exact_match"])
    with open(os.path.join(os.path.dirname(scored), "predictions.json"), encoding="utf-8") as f:
        predictions = json.load(f)
    examples = read_squad(dev)
    hits = [predictions[i] == a[0] for i, a in zip(examples.ids, examples.answers, strict=True)]
    assert np.mean(hits) == pytest.approx(metrics["exact_match"])

    context = "快递很好，房间失望，张三住在深圳。价格不错。"
    capsys.readouterr()
    assert main(["predict", "--model", out, "--json", "--question", "张三住在哪里？", "--context", context]) == 0
    row = _last_json_lines(capsys)[-1]
    assert context[row["start"] : row["end"]] == row["answer"] == "深圳"


def test_predict_fills_a_chinese_mask(tmp_path, capsys):
    from keras_bert_zoo import BertPretrainer

    hf_dir = write_chinese_checkpoint(str(tmp_path / "mlm"), head="mlm")
    path = str(tmp_path / "pretrainer")  # predict fills masks with a saved BertPretrainer (it says so for HF's)
    BertPretrainer.from_preset(hf_dir).save_to_preset(path)
    text = "我们在北[MASK]天安门广场见到了中国国家主席习近平。"
    expected = BertPretrainer.from_preset(path).fill_mask([text], top_k=5)[0][0]
    capsys.readouterr()
    assert main(["predict", "--model", path, "--json", text]) == 0
    row = _last_json_lines(capsys)[-1]
    assert len(row["masks"]) == 1
    got = row["masks"][0]
    assert [m["token"] if isinstance(m, dict) else m[0] for m in got] == [t for t, _ in expected]
