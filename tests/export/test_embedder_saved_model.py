"""SavedModel of a `BertSentenceEmbedder`: `serving_default(text)` -> `embeddings`, served
in a fresh process where this package cannot be imported, equal to `encode`."""

import json

import keras
import numpy as np

from keras_bert_zoo import BertBackbone, BertPreprocessor, BertSentenceEmbedder
from keras_bert_zoo.export.saved_model import export_saved_model
from tests.export.test_saved_model import _fresh_process
from tests.helpers import minilm_path

TEXTS = ["A man is playing a guitar.", "", "Zürich, café — 日本語 🙂", "and on " * 60, "A man plays guitar."]


def test_fresh_process_serving_equals_encode(tmp_path):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=32)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    model = BertSentenceEmbedder(backbone, pooling="mean", normalize=True, preprocessor=pre)
    expected = model.encode(TEXTS)
    assert np.ptp(expected[:, 0]) > 1e-2  # the texts get different vectors: the check can fail
    path = export_saved_model(model, str(tmp_path / "served"))
    with open(tmp_path / "texts.json", "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False)
    out = _fresh_process(
        f"""
    import json
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the WordPiece / regex ops
    texts = json.load(open("texts.json", encoding="utf-8"))
    served = tf.saved_model.load({path!r})
    result = served.signatures["serving_default"](text=tf.constant(texts))
    assert "keras_bert_zoo" not in sys.modules
    info = json.load(open({path!r} + "/assets/export_info.json"))
    print(json.dumps({{"embeddings": result["embeddings"].numpy().tolist(), "outputs": sorted(result),
                       "info": info}}))
    """,
        tmp_path,
    )
    served = json.loads(out.strip().splitlines()[-1])
    assert served["outputs"] == ["embeddings"]
    assert served["info"]["task"] == "BertSentenceEmbedder" and served["info"]["pooling"] == "mean"
    got = np.asarray(served["embeddings"], "float32")
    assert got.shape == expected.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
