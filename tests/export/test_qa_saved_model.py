"""SavedModel export of a `BertSpanQA`: (question, context) raw strings in, answer span out.

The fresh process has only tensorflow + tensorflow_text (this package cannot be imported
there); its answers must equal `BertSpanQA.predict_answers` (what `bert-zoo predict`
prints), on passages with accents, CJK and emoji, an empty passage and a 3,000-word one.
"""

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertSpanQA
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor
from tests.export.test_saved_model import _fresh_process
from tests.helpers import minilm_path

_WORDS = "the river flows north past Zürich and the old café where 東京 visitors met Ångström in 1889 🙂".split()
LONG = " ".join(random.Random(0).choice(_WORDS) for _ in range(3000))
QUESTIONS = ["Where does the river flow?", "Who met Ångström?", "What is empty?", "When did they meet?", "Which city?"]
CONTEXTS = [
    "The river flows north past Zürich, and the old café 🙂 stands where 東京 visitors met Ångström in 1889.",
    "Visitors from 東京 met Ångström. " * 30,
    "",
    LONG,
    "Kyōto 京都 ☕ naïve résumé",
]


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    pre = SpanQAPreprocessor.from_preset(minilm_path())  # the SQuAD defaults: 384, step 128, question 64
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=384,
    )
    qa = BertSpanQA(backbone, preprocessor=pre)
    qa.qa_outputs.kernel.assign(np.random.default_rng(0).normal(size=(16, 2)).astype("float32") * 3)
    return qa


@pytest.fixture(scope="module")
def exported(model, tmp_path_factory):
    return export_saved_model(model, str(tmp_path_factory.mktemp("qa") / "served"))


def test_fresh_process_equals_predict_answers(model, exported, tmp_path):
    expected = model.predict_answers(QUESTIONS, CONTEXTS)
    windows = model.preprocessor.windows(QUESTIONS, CONTEXTS)
    assert int(tf.reduce_sum(tf.cast(windows["example_ids"] == 3, tf.int32))) > 20  # the long passage
    with open(tmp_path / "inputs.json", "w", encoding="utf-8") as f:
        json.dump({"questions": QUESTIONS, "contexts": CONTEXTS}, f)
    out = _fresh_process(
        f"""
    import json
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    data = json.load(open("inputs.json", encoding="utf-8"))
    served = tf.saved_model.load({exported!r})
    assert "keras_bert_zoo" not in sys.modules
    fn = served.signatures["serving_default"]
    result = fn(question=tf.constant(data["questions"]), context=tf.constant(data["contexts"]))
    alias = served.signatures["answer"](question=tf.constant(data["questions"]), context=tf.constant(data["contexts"]))
    same = all(np.array_equal(result[k].numpy(), alias[k].numpy()) for k in result)

    def plain(v):
        v = v.numpy()
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v).tolist() if v.dtype == object \\
            else v.tolist()

    empty = fn(question=tf.zeros([0], tf.string), context=tf.zeros([0], tf.string))
    print(json.dumps({{"result": {{k: plain(v) for k, v in result.items()}}, "same": same,
                      "signatures": sorted(served.signatures),
                      "empty": {{k: list(v.shape) for k, v in empty.items()}}}}))
    """,
        tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert got["same"] and {"serving_default", "answer", "tokenize", "predict_token_ids"} <= set(got["signatures"])
    result = got["result"]
    assert result["answer"] == [row["answer"] for row in expected]
    assert result["start"] == [row["start"] for row in expected] and result["end"] == [row["end"] for row in expected]
    np.testing.assert_allclose(result["score"], [row["score"] for row in expected], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(result["probability"], [row["probability"] for row in expected], atol=1e-4)
    for i, row in enumerate(expected):
        k = result["num_n_best"][i]
        assert k == len(row["n_best"])
        assert result["n_best_text"][i][:k] == [n["text"] for n in row["n_best"]]
        assert result["n_best_start"][i][:k] == [n["start"] for n in row["n_best"]]
        np.testing.assert_allclose(
            result["n_best_score"][i][:k], [n["score"] for n in row["n_best"]], rtol=1e-5, atol=1e-4
        )
        assert CONTEXTS[i][row["start"] : row["end"]] == row["answer"] if row["start"] >= 0 else row["answer"] == ""
    assert result["answer"][2] == "" and result["start"][2] == -1  # the empty passage: no span
    assert all(a for i, a in enumerate(result["answer"]) if i != 2)
    assert any(ord(ch) > 127 for a in result["answer"] for ch in a)  # character offsets, not bytes, on real text
    assert all(shape[0] == 0 for shape in got["empty"].values())


def test_tokenize_and_token_ids_signatures(model, exported):
    served = tf.saved_model.load(exported)
    tokenized = served.signatures["tokenize"](question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS))
    windows = model.preprocessor.windows(QUESTIONS, CONTEXTS)
    for key, value in windows.items():
        np.testing.assert_array_equal(tokenized[key].numpy(), value.numpy())
    features = {k: tf.cast(windows[k][:4], tf.int32) for k in ("token_ids", "segment_ids", "padding_mask")}
    by_ids = served.signatures["predict_token_ids"](**features)
    expected = model.predict(features, verbose=0)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(by_ids[name].numpy(), expected[name], rtol=1e-5, atol=1e-5)
    with open(f"{exported}/assets/export_info.json", encoding="utf-8") as f:
        info = json.load(f)
    assert info["task"] == "BertSpanQA" and info["inputs"] == ["question", "context"]
    assert (info["sequence_length"], info["doc_stride"], info["stride_mode"]) == (384, 128, "step")
