"""The raw-text signatures cut padding: each length-sorted chunk of rows runs at its own
longest input. The answers must not change: the references are the same model at full
width (`predict_token_ids` on the `tokenize` output, the Keras model on the full-width
features, `predict_tags` / `predict_entities`), on batches that span several chunks of
mixed lengths, served in a fresh process where this package cannot be imported."""

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertClassifier
from keras_bert_zoo.export.length_chunks import run_in_length_chunks, trim_to_longest
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.export.serving import TaskServing
from keras_bert_zoo.tasks.tagger.serving import TaggerServing
from tests.export.test_saved_model import _backbone, _fresh_process, _preprocessor
from tests.export.test_tagger_saved_model import IOB2, LONG, _check_against_model, _tagger, _unpad

WORDS = (
    "a good film truly great bad boring plot acting Angela Merkel met Emmanuel Macron in Paris and "
    "then flew to New York with John Smith of London , . naïve café 日本語"
).split()
# 41 texts of 0 to 70 words in random order: 3 chunks of 16, some past the sequence length.
TEXTS = [
    " ".join(random.Random(i).choice(WORDS) for _ in range(random.Random(100 + i).randrange(0, 70))) for i in range(40)
] + [LONG]


def _fake_model(inputs):
    """Per row: the sum of its ids, the width it was run at, and its ids per position."""
    ids = inputs["token_ids"]
    out = {
        "row_sum": tf.reduce_sum(tf.reshape(ids, [tf.shape(ids)[0], -1]), -1),
        "width": tf.fill(tf.shape(ids)[:1], tf.shape(ids)[-1]),
    }
    if ids.shape.rank == 2:
        out["per_position"] = tf.cast(ids, tf.float32)[..., None]  # [rows, width, 1]
    return out


@pytest.mark.parametrize("inner", [(), (2,)])  # [rows, seq] and multiple choice's [rows, choices, seq]
def test_each_chunk_runs_at_its_longest_and_rows_come_back_in_order(inner):
    lengths = np.array([3, 9, 1, 5, 0, 7, 2, 9, 4])
    seq = 12
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    if inner:  # the second choice of each question is one shorter: a row's length is its longest choice
        mask = np.stack([mask, np.concatenate([mask[:, 1:], np.zeros_like(mask[:, :1])], 1)], 1)
    ids = mask * (1 + np.arange(mask.size).reshape(mask.shape))
    inputs = {
        "token_ids": tf.constant(ids),
        "padding_mask": tf.constant(mask),
        "segment_ids": tf.zeros_like(tf.constant(ids)),
        "question_id": tf.range(len(lengths)),
    }
    got = run_in_length_chunks(_fake_model, inputs, TaskServing.position_keys, 3, ("per_position",))

    np.testing.assert_array_equal(got["row_sum"].numpy(), ids.reshape(len(lengths), -1).sum(-1))
    order = np.argsort(lengths, kind="stable")
    expected_width = np.zeros_like(lengths)
    for start in range(0, len(order), 3):
        chunk = order[start : start + 3]
        expected_width[chunk] = max(1, lengths[chunk].max())
    np.testing.assert_array_equal(got["width"].numpy(), expected_width)  # not 12, not 9 for every chunk
    if not inner:  # per-position outputs come back padded with zeros to the batch's longest (9), not `seq`
        np.testing.assert_array_equal(got["per_position"].numpy()[..., 0], ids[..., :9])


def test_empty_batch_and_trim_to_longest():
    empty = {
        "token_ids": tf.zeros([0, 8], tf.int32),
        "padding_mask": tf.zeros([0, 8], tf.int32),
        "segment_ids": tf.zeros([0, 8], tf.int32),
    }
    got = run_in_length_chunks(_fake_model, empty, TaskServing.position_keys, 4, ("per_position",))
    assert got["row_sum"].shape == (0,) and got["per_position"].shape[0] == 0
    mask = tf.constant([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]])
    cut = trim_to_longest(
        {"padding_mask": mask, "word_ids": mask * 2, "choices": tf.fill([2, 5], "x")}, ("padding_mask", "word_ids")
    )
    assert cut["padding_mask"].shape == (2, 3) and cut["word_ids"].shape == (2, 3)
    assert cut["choices"].shape == (2, 5)  # not a per-position key: untouched


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(3)
    pre = _preprocessor(sequence_length=48)
    model = BertClassifier(
        _backbone(pre.tokenizer.vocabulary_size()),
        num_classes=3,
        label_names=["neg", "neutral", "pos"],
        preprocessor=pre,
        dropout=0.0,
    )
    # Large random weights, so that every position of every text moves the logits.
    rng = np.random.default_rng(3)
    for w in model.weights:
        if len(w.shape) >= 2:
            w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))
    return model


def test_chunked_logits_equal_the_full_width_model(classifier):
    """Logits of the Keras classifier and tagger: chunked and cut vs one full-width call."""
    features = {k: tf.cast(v, tf.int32) for k, v in classifier.preprocessor(tf.constant(TEXTS)).items()}
    assert features["token_ids"].shape[1] == 48
    full = classifier(features, training=False).numpy()
    cut = run_in_length_chunks(lambda x: classifier(x, training=False), features, TaskServing.position_keys, 16)
    assert np.ptp(full[:, 0]) > 1e-3  # the texts get different logits
    np.testing.assert_allclose(cut.numpy(), full, rtol=1e-5, atol=1e-5)
    # In a graph with unknown batch and width, as in the SavedModel, and chunks of 2 rows so the
    # while-loop body (not only the first chunk) runs.
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in features}
    graph = tf.function(
        lambda x: run_in_length_chunks(lambda c: classifier(c, training=False), x, TaskServing.position_keys, 2),
        input_signature=[spec],
    )
    assert len(TEXTS) > 4
    np.testing.assert_allclose(graph(features).numpy(), full, rtol=1e-5, atol=1e-5)

    tagger = _tagger(IOB2)
    words = tf.ragged.constant([t.split() for t in TEXTS])
    windows = {k: v for k, v in tagger.preprocessor.windows(words).items() if k in tagger.input}
    full = tagger(windows, training=False).numpy()
    cut = run_in_length_chunks(
        lambda x: tagger(x, training=False),
        trim_to_longest(windows, TaskServing.position_keys),
        TaggerServing.position_keys,
        16,
        TaggerServing.position_outputs,
    ).numpy()
    real = windows["padding_mask"].numpy().astype(bool)
    assert cut.shape[1] == real.sum(1).max()
    np.testing.assert_allclose(
        cut[real[:, : cut.shape[1]]], full[:, : cut.shape[1]][real[:, : cut.shape[1]]], rtol=1e-5, atol=1e-5
    )


@pytest.mark.slow  # test_saved_model's fresh-process test runs the same (trimmed) signature by default
def test_fresh_process_classifier_equals_full_width(classifier, tmp_path):
    path = export_saved_model(classifier, str(tmp_path / "served"))
    expected = classifier.logits_to_probabilities(classifier.predict(TEXTS, verbose=0))
    with open(tmp_path / "texts.json", "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False)
    out = _fresh_process(
        f"""
    import json
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    texts = tf.constant(json.load(open("texts.json", encoding="utf-8")))
    served = tf.saved_model.load({path!r})
    assert "keras_bert_zoo" not in sys.modules
    cut = served.signatures["serving_default"](text=texts)
    ids = served.signatures["tokenize"](text=texts)
    full = served.signatures["predict_token_ids"](**ids)
    print(json.dumps({{"cut": cut["probabilities"].numpy().tolist(), "full": full["probabilities"].numpy().tolist(),
                      "labels": [s.decode() for s in cut["labels"].numpy()],
                      "full_labels": [s.decode() for s in full["labels"].numpy()],
                      "width": int(ids["token_ids"].shape[1])}}))
    """,
        tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert got["width"] == 48  # predict_token_ids ran at the full width
    cut, full = np.array(got["cut"]), np.array(got["full"])
    assert np.abs(cut - full).max() <= 1e-5 and np.abs(cut - expected).max() <= 1e-5
    assert got["labels"] == got["full_labels"] == [classifier.label_names[i] for i in expected.argmax(-1)]


@pytest.mark.slow  # test_tagger_saved_model's fresh-process test runs the same (trimmed) signature by default
def test_fresh_process_tagger_equals_predict_tags_and_entities(tmp_path):
    tagger = _tagger(IOB2)
    path = export_saved_model(tagger, str(tmp_path / "served"))
    with open(tmp_path / "texts.json", "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False)
    out = _fresh_process(
        f"""
    import json
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    texts = tf.constant(json.load(open("texts.json", encoding="utf-8")))
    served = tf.saved_model.load({path!r})
    assert "keras_bert_zoo" not in sys.modules
    result = served.signatures["serving_default"](text=texts)
    print(json.dumps({{k: (v.numpy().tolist() if v.dtype != tf.string else
                          np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v.numpy()).tolist())
                      for k, v in result.items()}}))
    """,
        tmp_path,
    )
    result = json.loads(out.strip().splitlines()[-1])
    tags = _unpad(result, "num_words", ("tags",))["tags"]
    keys = ("entity_text", "entity_type", "start", "end", "score")
    cols = _unpad(result, "num_entities", keys)
    entities = [
        [
            {"text": t, "type": y, "start": s, "end": e, "score": p}
            for t, y, s, e, p in zip(*(cols[k][i] for k in keys), strict=True)
        ]
        for i in range(len(TEXTS))
    ]
    assert sum(len(row) for row in entities) > 20  # the check means something
    _check_against_model(tagger, TEXTS, tags, entities)
