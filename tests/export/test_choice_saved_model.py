"""SavedModel export of a `BertMultipleChoice`: a context and its choices (raw strings) in,
probabilities and the best choice out, served in a fresh process where this package cannot be
imported, equal to the Keras model's `predict_choices` (and, through it, to HF's packing: see
tests/models/test_multiple_choice.py)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertMultipleChoice
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from tests.export.test_saved_model import _fresh_process
from tests.helpers import minilm_path

CONTEXTS = [
    "Members of the procession walk down the street holding small horn brass instruments.",
    "",
    "Zürich naïve café, São Paulo 日本語 🙂",
    "He rides the motorcycle down the hall and into the elevator. " * 6,
]
CHOICES = [
    ["A drum line passes by.", "A drum line has heard them.", "A drum line arrives.", ""],
    ["He looks at a mirror.", "He stops.", "He exits the building.", "He pulls the bag out."],
    ["élan vital", "東京都", "🇫🇷 done", "e\u0301cole"],
    ["He looks at a mirror in the mirror as he watches someone walk through a door. " * 3, "x", "y", "z"],
]


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    pre = MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=24)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    model = BertMultipleChoice(backbone, preprocessor=pre, data_layout={"sequence_length": 24, "num_choices": 4})
    # A pooler and head big enough that the choices get clearly different scores.
    rng = np.random.default_rng(0)
    backbone.pooler.kernel.assign(rng.normal(size=(16, 16)).astype("float32"))
    model.classifier.kernel.assign(rng.normal(size=(16, 1)).astype("float32") * 30)
    return model


@pytest.fixture(scope="module")
def exported(model, tmp_path_factory):
    return export_saved_model(model, str(tmp_path_factory.mktemp("choice") / "served"))


@pytest.mark.slow  # 28 s; tests/tasks/test_choice.py checks this signature against predict in the default run,
# and the classifier, tagger, QA and embedder suites keep a fresh-process (no package) test there
def test_fresh_process_matches_predict_choices(model, exported, tmp_path):
    probs, best = model.predict_choices(CONTEXTS, CHOICES)
    assert np.ptp(probs, axis=1).min() > 1e-2 and len(set(best.tolist())) > 1, probs  # a check that can fail
    with open(tmp_path / "questions.json", "w", encoding="utf-8") as f:
        json.dump({"contexts": CONTEXTS, "choices": CHOICES}, f, ensure_ascii=False)

    out = _fresh_process(
        f"""
    import json
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    q = json.load(open("questions.json", encoding="utf-8"))
    served = tf.saved_model.load({exported!r})
    assert "keras_bert_zoo" not in sys.modules
    result = served.signatures["serving_default"](context=tf.constant(q["contexts"]),
                                                  choices=tf.constant(q["choices"]))
    by_name = served.signatures["choose"](context=tf.constant(q["contexts"]), choices=tf.constant(q["choices"]))
    two = served.signatures["serving_default"](context=tf.constant(q["contexts"][:2]),
                                               choices=tf.constant([c[:2] for c in q["choices"][:2]]))
    print(json.dumps({{"probabilities": result["probabilities"].numpy().tolist(),
                      "logits": result["logits"].numpy().tolist(),
                      "best_index": result["best_index"].numpy().tolist(),
                      "best_choice": [b.decode("utf-8") for b in result["best_choice"].numpy()],
                      "same": bool((by_name["logits"].numpy() == result["logits"].numpy()).all()),
                      "two": two["logits"].numpy().tolist(),
                      "signatures": sorted(served.signatures)}}))
    """,
        tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert got["same"] and {"serving_default", "choose", "predict_token_ids", "tokenize"} <= set(got["signatures"])
    np.testing.assert_allclose(got["probabilities"], probs, atol=1e-5)
    assert got["best_index"] == best.tolist()
    assert got["best_choice"] == [row[b] for row, b in zip(CHOICES, best, strict=True)]
    # Each pair is scored alone: two choices give the first two of the four logits.
    np.testing.assert_allclose(got["two"], np.asarray(got["logits"])[:2, :2], rtol=1e-5, atol=1e-5)


def test_tokenize_and_token_ids_signatures(model, exported):
    served = tf.saved_model.load(exported)
    tokenized = served.signatures["tokenize"](context=tf.constant(CONTEXTS), choices=tf.constant(CHOICES))
    expected = model.preprocessor((CONTEXTS, CHOICES))
    for key, value in expected.items():
        np.testing.assert_array_equal(tokenized[key].numpy(), value.numpy())
    assert tokenized["token_ids"].shape == (4, 4, 24)
    features = {k: tf.cast(expected[k], tf.int32) for k in ("token_ids", "segment_ids", "padding_mask")}
    by_ids = served.signatures["predict_token_ids"](**features)
    np.testing.assert_allclose(by_ids["logits"].numpy(), model.predict(features, verbose=0), rtol=1e-5, atol=1e-5)
    assert "best_choice" not in by_ids
    with open(f"{exported}/assets/export_info.json", encoding="utf-8") as f:
        info = json.load(f)
    assert info["task"] == "BertMultipleChoice" and info["inputs"] == ["context", "choices"]
    assert info["num_choices"] == 4 and info["sequence_length"] == 24
