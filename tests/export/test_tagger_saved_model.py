"""SavedModel export of a `BertTagger`: raw strings in, word tags and entity spans out.

References nobody here wrote into the serving graph: the Keras model's own host-side
path (`BertTagger.predict_tags` / `predict_entities`: numpy windows merge and the
pure-Python conlleval decoder `tasks.tagger.metrics.entity_spans`), the Python word
split (`as_words`, `word_spans`: HF's BasicTokenizer words, `tests/preprocessing/test_chinese_words.py`)
for words and character offsets, and TensorFlow's
`tf.saved_model.load` in a fresh process where this package cannot be imported.
"""

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, cli
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.tasks.tagger.metrics import entity_spans
from keras_bert_zoo.tasks.tagger.model import BertTagger
from keras_bert_zoo.tasks.tagger.predict import predict_words
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.serving import TaggerServing
from keras_bert_zoo.tasks.tagger.words import as_words, word_spans
from tests.export.test_saved_model import _fresh_process
from tests.helpers import minilm_path

IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
BIOES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
_VOCAB = "Angela Merkel met Emmanuel Macron in Paris and then flew to New York with John Smith of London".split()
LONG = " ".join(random.Random(0).choice(_VOCAB) for _ in range(200))  # many windows at length 16
TEXTS = [
    "Angela Merkel met Emmanuel Macron in Paris .",
    "",
    "  \t\n ",
    LONG,
    "Zürich naïve café, São Paulo e\u0301cole 日本語 東京都 🙂 👍🏽 🇫🇷 done",
    # Irregular whitespace, including what Python splits on but ICU does not (\x1c), and
    # a zero-width space (no whitespace: part of a word; alone, a word with no piece).
    "  John\t\tSmith\nlives in\u3000New\xa0York\u2009now\x1cand\u2028then\u200bstill \u200b  end  ",
]


def _tagger(label_names, scheme="IOB2", seed=0, o_bias=1.5):
    keras.utils.set_random_seed(seed)
    pre = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=16)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    model = BertTagger(backbone, num_labels=len(label_names), label_names=label_names, scheme=scheme, preprocessor=pre)
    # Random head weights (fixed seed) big enough that the tags depend on the word; the
    # O bias keeps some words outside entities.
    kernel = np.random.default_rng(seed).normal(size=model.classifier.kernel.shape).astype("float32")
    model.classifier.kernel.assign(kernel)
    model.classifier.bias.assign(np.array([o_bias] + [0.0] * (len(label_names) - 1), "float32"))
    return model


@pytest.fixture(scope="module")
def tagger():
    return _tagger(IOB2)


@pytest.fixture(scope="module")
def exported(tagger, tmp_path_factory):
    return export_saved_model(tagger, str(tmp_path_factory.mktemp("tagger") / "served"))


def _unpad(result, lengths, keys):
    """Padded dense outputs + a length vector -> per-text Python lists."""
    n = np.asarray(result[lengths])
    out = {}
    for key in keys:
        value = np.asarray(result[key])
        out[key] = [
            [v.decode() if isinstance(v, bytes) else v.item() for v in row[:k]] for row, k in zip(value, n, strict=True)
        ]
    return out


def _entities(result):
    cols = _unpad(result, "num_entities", ("entity_text", "entity_type", "start", "end", "score"))
    return [
        [
            {"text": t, "type": y, "start": s, "end": e, "score": p}
            for t, y, s, e, p in zip(
                *(cols[k][i] for k in ("entity_text", "entity_type", "start", "end", "score")), strict=True
            )
        ]
        for i in range(len(cols["start"]))
    ]


def _exact_scores(model, texts):
    """`predict_entities`' score before its rounding: the mean of the words' max probability."""
    words = [as_words(t) for t in texts]
    tags, logits = predict_words(model, words, model.preprocessor, label_names=model.label_names, return_logits=True)
    scores = []
    for sentence_tags, word_logits in zip(tags, logits, strict=True):
        probs = np.exp(word_logits - word_logits.max(-1, keepdims=True))
        best = (probs / probs.sum(-1, keepdims=True)).max(-1)
        scores.append([float(best[a:b].mean()) for _, a, b in entity_spans(sentence_tags, scheme=model.scheme)])
    return scores


def _check_against_model(model, texts, tags, entities):
    assert tags == model.predict_tags(texts)
    expected = model.predict_entities(texts)
    exact = _exact_scores(model, texts)
    assert [[{k: e[k] for k in ("text", "type", "start", "end")} for e in row] for row in entities] == [
        [{k: e[k] for k in ("text", "type", "start", "end")} for e in row] for row in expected
    ]
    for text, got_row, want_row, exact_row in zip(texts, entities, expected, exact, strict=True):
        for got, want, score in zip(got_row, want_row, exact_row, strict=True):
            assert got["text"] == text[got["start"] : got["end"]]
            assert abs(got["score"] - score) <= 1e-5, (got, score)
            assert abs(got["score"] - want["score"]) <= 1e-5, (got, want)


def test_fresh_process_matches_predict_tags_and_entities(tagger, exported, tmp_path):
    model = tagger
    tags = model.predict_tags(TEXTS)
    flat = [t for row in tags for t in row]
    # The check means something only if the model tags entities, ill-formed ones included.
    assert {"O", "B-PER", "B-LOC"} <= set(flat) and any(t.startswith("I-") for t in flat)
    assert any(a == "O" and b.startswith("I-") for row in tags for a, b in zip(["O"] + row, row, strict=False))
    assert any(" " in e["text"] for row in model.predict_entities(TEXTS) for e in row)
    with open(tmp_path / "texts.json", "w", encoding="utf-8") as f:
        json.dump(TEXTS, f)

    out = _fresh_process(
        f"""
    import json
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    texts = json.load(open("texts.json", encoding="utf-8"))
    served = tf.saved_model.load({exported!r})
    assert "keras_bert_zoo" not in sys.modules

    def plain(result):
        return {{k: (v.numpy().tolist() if v.dtype != tf.string else
                    np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v.numpy()).tolist())
                for k, v in result.items()}}

    result = served.signatures["serving_default"](text=tf.constant(texts))
    by_tag = served.signatures["tag"](text=tf.constant(texts))
    same = all(np.array_equal(result[k].numpy(), by_tag[k].numpy()) for k in result)
    empty = served.signatures["serving_default"](text=tf.zeros([0], tf.string))
    print(json.dumps({{"result": plain(result), "same": same, "signatures": sorted(served.signatures),
                      "empty": {{k: list(v.shape) for k, v in empty.items()}}}}))
    """,
        tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert got["same"]
    assert {"serving_default", "tag", "predict_token_ids", "tokenize"} <= set(got["signatures"])
    result = got["result"]
    words = _unpad(result, "num_words", ("words", "tags", "tag_ids", "word_start", "word_end"))
    assert words["words"] == [as_words(t) for t in TEXTS]
    assert [list(zip(s, e, strict=True)) for s, e in zip(words["word_start"], words["word_end"], strict=True)] == [
        [tuple(span) for span in word_spans(t)] for t in TEXTS
    ]
    assert words["tag_ids"] == [[IOB2.index(t) for t in row] for row in words["tags"]]
    _check_against_model(model, TEXTS, words["tags"], _entities(result))
    # A zero-size batch: no windows at all, every output with a leading 0.
    assert got["empty"] and all(shape[0] == 0 for shape in got["empty"].values())
    assert (
        set(got["empty"])
        == set(result)
        == {
            "words",
            "tags",
            "tag_ids",
            "word_start",
            "word_end",
            "num_words",
            "entity_text",
            "entity_type",
            "start",
            "end",
            "score",
            "num_entities",
        }
    )


def test_signature_dtypes_tokenize_and_token_ids(tagger, exported):
    served = tf.saved_model.load(exported)
    outputs = served.signatures["serving_default"].structured_outputs
    dtypes = {k: v.dtype for k, v in outputs.items()}
    assert dtypes == {
        "words": tf.string,
        "tags": tf.string,
        "tag_ids": tf.int32,
        "word_start": tf.int64,
        "word_end": tf.int64,
        "num_words": tf.int64,
        "entity_text": tf.string,
        "entity_type": tf.string,
        "start": tf.int64,
        "end": tf.int64,
        "score": tf.float32,
        "num_entities": tf.int64,
    }
    # `tokenize` shows the windows the model sees: those of the preprocessor's `windows`.
    tokenized = served.signatures["tokenize"](text=tf.constant(TEXTS))
    windows = tagger.preprocessor.windows(tf.ragged.constant([as_words(t) for t in TEXTS], dtype=tf.string))
    for key, value in windows.items():
        np.testing.assert_array_equal(tokenized[key].numpy(), value.numpy())
    assert tokenized["token_ids"].shape[0] > len(TEXTS)  # the long text took several windows
    # predict_token_ids: token ids in, token-level logits and tags out (no word mapping).
    features = {k: tf.cast(windows[k], tf.int32) for k in ("token_ids", "segment_ids", "padding_mask")}
    by_ids = served.signatures["predict_token_ids"](**features)
    expected = tagger.predict(features, verbose=0)
    np.testing.assert_allclose(by_ids["logits"].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(by_ids["tag_ids"].numpy(), expected.argmax(-1))
    assert [[t.decode() for t in row] for row in by_ids["tags"].numpy()] == [
        [IOB2[i] for i in row] for row in expected.argmax(-1)
    ]
    np.testing.assert_allclose(by_ids["probabilities"].numpy().sum(-1), 1.0, atol=1e-5)
    with open(f"{exported}/assets/export_info.json", encoding="utf-8") as f:
        info = json.load(f)
    assert info["task"] == "BertTagger" and info["label_names"] == IOB2 and info["scheme"] == "IOB2"
    assert info["ragged_outputs"]["num_entities"] == ["entity_text", "entity_type", "start", "end", "score"]


def test_bioes_tagger_in_graph_decoder(tmp_path):
    model = _tagger(BIOES, scheme="BIOES", seed=4)
    tags = model.predict_tags(TEXTS)
    flat = {t[:2] for row in tags for t in row}
    assert {"O", "B-", "I-", "E-", "S-"} <= flat, flat
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "bioes")))
    result = served.signatures["serving_default"](text=tf.constant(TEXTS))
    words = _unpad(result, "num_words", ("tags",))
    _check_against_model(model, TEXTS, words["tags"], _entities(result))


@pytest.mark.parametrize("scheme,names", [("IOB2", IOB2), ("BIOES", BIOES + ["B-MISC", "I-MISC"])])
def test_decoder_equals_conlleval_on_random_sequences(scheme, names):
    """Every rule of conlleval (ill-formed sequences included), against `entity_spans`."""
    model = _tagger(names, scheme=scheme)
    serving = TaggerServing(model, model.preprocessor)
    rng = random.Random(7)
    sentences = [[rng.randrange(len(names)) for _ in range(rng.randrange(0, 12))] for _ in range(400)]
    scores = [[rng.random() for _ in s] for s in sentences]
    ids = tf.ragged.constant(sentences, dtype=tf.int32, row_splits_dtype=tf.int64)
    ragged_scores = tf.ragged.constant(scores, dtype=tf.float32, row_splits_dtype=tf.int64)
    starts = ids.with_values(tf.range(tf.size(ids.values, out_type=tf.int64)) * 10)
    found = serving.entities(ids, ragged_scores, starts, starts + 3)
    got = [
        list(zip(*(found[k][i].numpy().tolist() for k in ("entity_type", "first_word", "last_word")), strict=True))
        for i in range(len(sentences))
    ]
    got = [[(t.decode(), a, b) for t, a, b in row] for row in got]
    expected = [entity_spans([names[i] for i in s], scheme=scheme) for s in sentences]
    assert got == [[tuple(e) for e in row] for row in expected]
    flat_start = np.cumsum([0] + [len(s) for s in sentences])
    for i, row in enumerate(expected):
        np.testing.assert_allclose(
            found["score"][i].numpy(), [np.mean(scores[i][a:b]) for _, a, b in row], rtol=1e-5, atol=1e-6
        )
        assert found["start"][i].numpy().tolist() == [(flat_start[i] + a) * 10 for _, a, _ in row]
        assert found["end"][i].numpy().tolist() == [(flat_start[i] + b - 1) * 10 + 3 for _, _, b in row]


def test_bert_zoo_export_tagger_directory(tagger, tmp_path, capsys):
    tagger.save_to_preset(str(tmp_path / "model"))
    assert cli.main(["export", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "served")]) == 0
    shown = capsys.readouterr().out
    assert (
        "tag(text) -> end, entity_text, entity_type, num_entities, num_words, score, start, tag_ids, "
        "tags, word_end, word_start, words"
    ) in shown
    assert "predict_token_ids(padding_mask, segment_ids, token_ids) -> logits, probabilities, tag_ids, tags" in shown
    served = tf.saved_model.load(str(tmp_path / "served"))
    result = served.signatures["tag"](text=tf.constant(TEXTS))
    _check_against_model(tagger, TEXTS, _unpad(result, "num_words", ("tags",))["tags"], _entities(result))
