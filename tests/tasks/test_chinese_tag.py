"""A Chinese tagger end to end: `bert-zoo finetune tag` on a BMES file (one character a line, CRLF) from a tiny
HF-written Chinese checkpoint, then raw Chinese strings (no spaces) tagged one character a word, with entity
spans that slice the string, in Python, from `bert-zoo predict` and from the exported SavedModel in a process
where this package cannot be imported."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertTagger
from keras_bert_zoo.cli import main
from tests.chinese_fixtures import CHINESE_SENTENCES, write_chinese_checkpoint
from tests.export.serving_process import run_serving_script

PEOPLE, PLACES, ORGS = ["李明", "王小红", "习近平"], ["北京", "上海", "天安门广场"], ["华为", "清华大学"]
FILLER = ["在", "见到了", "和", "说", "去了", "的", "很好"]
LABELS = ["O"] + [f"{p}-{t}" for p in "BEMS" for t in ("LOC", "ORG", "PER")]
SENTENCE = "我们在北京天安门广场见到了中国国家主席习近平。"
TEXTS = [SENTENCE, "李明在北京见到了王小红。", "华为和清华大学", "", "Apple在上海 2024年"]


def _bmes(word, kind):
    if kind == "O":
        return ["O"] * len(word)
    if len(word) == 1:
        return [f"S-{kind}"]
    return [f"B-{kind}"] + [f"M-{kind}"] * (len(word) - 2) + [f"E-{kind}"]


def _msra_style_file(path, n, seed):
    """MSRA's layout: `char SPACE tag` CRLF lines, BMES, a blank line between sentences."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        for k in range(int(rng.integers(2, 7))):
            kind = ["PER", "LOC", "ORG"][k % 3] if k % 2 == 0 else "O"
            pool = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS, "O": FILLER}[kind]
            word = str(rng.choice(pool))
            lines += [f"{c} {t}" for c, t in zip(word, _bmes(word, kind), strict=True)]
        lines += ["。 O", ""]
    path.write_bytes("\r\n".join(lines).encode("utf-8"))
    return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("chinese_tag")
    checkpoint = write_chinese_checkpoint(
        str(root / "ckpt"), texts=CHINESE_SENTENCES + PEOPLE + PLACES + ORGS + FILLER, head="tag", label_names=LABELS
    )
    train, dev = _msra_style_file(root / "train.txt", 240, 0), _msra_style_file(root / "dev.txt", 40, 1)
    out = str(root / "out")
    args = ["finetune", "tag", "--model", checkpoint, "--train", train, "--dev", dev, "--out", out]
    args += ["--sequence-length", "32", "--batch-size", "16", "--learning-rate", "5e-3", "--epochs", "3"]
    assert main(args) == 0
    return out


def _plain(entities):
    return [[{k: e[k] for k in ("text", "type", "start", "end")} for e in row] for row in entities]


def test_bmes_model_keeps_its_scheme_and_tags_one_character_a_word(trained):
    with open(os.path.join(trained, "metrics.json")) as f:
        assert json.load(f)["f1"] > 0.8
    model = BertTagger.from_preset(trained)
    assert model.scheme == "BMES" and "M-PER" in model.label_names and "I-PER" not in model.label_names
    with open(os.path.join(trained, "config.json")) as f:
        assert "M-PER" in json.load(f)["id2label"].values()  # HF's config: the file's own tags
    tags = model.predict_tags([SENTENCE])[0]
    assert len(tags) == len(SENTENCE)  # one tag per character, not one for the whole string
    entities = model.predict_entities(TEXTS)
    for text, row in zip(TEXTS, entities, strict=True):
        for e in row:
            assert e["text"] == text[e["start"] : e["end"]] and len(e["text"]) < len(text), (text, e)
    assert _plain(entities)[1] == [
        {"text": "李明", "type": "PER", "start": 0, "end": 2},
        {"text": "北京", "type": "LOC", "start": 3, "end": 5},
        {"text": "王小红", "type": "PER", "start": 8, "end": 11},
    ]
    assert {"text": "习近平", "type": "PER", "start": 19, "end": 22} in _plain(entities)[0]
    assert {"text": "北京", "type": "LOC", "start": 3, "end": 5} in _plain(entities)[0]


def test_cli_predict_gives_character_offsets(trained, capsys):
    capsys.readouterr()
    assert main(["predict", "--model", trained, "--json", *TEXTS[:3]]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["text"] for r in rows] == TEXTS[:3]
    expected = _plain(BertTagger.from_preset(trained).predict_entities(TEXTS[:3]))
    assert _plain([r["entities"] for r in rows]) == expected
    for row in rows:
        for e in row["entities"]:
            assert row["text"][e["start"] : e["end"]] == e["text"]
    assert any(e["text"] == "王小红" for e in rows[1]["entities"])


def test_saved_model_spans_slice_the_string_in_a_fresh_process(trained, tmp_path):
    served = str(tmp_path / "served")
    assert main(["export", "--model", trained, "--out", served]) == 0
    with open(tmp_path / "texts.json", "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False)
    out = run_serving_script(
        f"""
import json
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops, as a serving machine does)
texts = json.load(open("texts.json", encoding="utf-8"))
r = tf.saved_model.load({served!r}).signatures["serving_default"](text=tf.constant(texts))
rows = []
for i in range(len(texts)):
    n, w = int(r["num_entities"][i]), int(r["num_words"][i])
    rows.append({{
        "words": [x.decode("utf-8") for x in r["words"][i][:w].numpy()],
        "entities": [{{"text": r["entity_text"][i][k].numpy().decode("utf-8"),
                      "type": r["entity_type"][i][k].numpy().decode("utf-8"),
                      "start": int(r["start"][i][k]), "end": int(r["end"][i][k])}} for k in range(n)],
    }})
print(json.dumps(rows, ensure_ascii=False))
""",
        tmp_path,
    )
    rows = json.loads(out.strip().splitlines()[-1])
    model = BertTagger.from_preset(trained)
    assert [r["entities"] for r in rows] == _plain(model.predict_entities(TEXTS))
    assert rows[0]["words"] == list(SENTENCE) and rows[4]["words"] == ["Apple", "在", "上", "海", "2024", "年"]
    for text, row in zip(TEXTS, rows, strict=True):
        for e in row["entities"]:
            assert text[e["start"] : e["end"]] == e["text"]
