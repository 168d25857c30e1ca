"""SavedModel signatures on raw Chinese strings (no spaces): classifier, embedder, span QA and fill-mask.

Each model loads from a tiny HF-written Chinese checkpoint (`tests/chinese_fixtures`); the exported graph's
answers must equal the Python API's (itself checked against HF in `tests/models/test_chinese_paths.py`), the
classifier's also HF's own, and QA spans must slice the context by characters.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertClassifier, BertPretrainer, BertSentenceEmbedder, BertSpanQA
from keras_bert_zoo.export.saved_model import export_saved_model
from tests.chinese_fixtures import CHINESE_SENTENCES, hf_tokenizer, write_chinese_checkpoint

REVIEWS = [
    "这本书的内容一般，快递很快，包装也不错。",
    "房间太小了，隔音很差，不推荐。",
    "国产的本能做到这样，心满意足了",
]


def _strings(tensor):
    return [x.decode("utf-8") for x in np.asarray(tensor).reshape(-1)]


def test_classifier_signature_on_chinese_equals_hf(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = write_chinese_checkpoint(str(tmp_path / "cls"), head="classify", label_names=["负面", "正面"])
    model = BertClassifier.from_preset(path)
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "served")))
    out = served.signatures["serving_default"](text=tf.constant(REVIEWS))
    hf = transformers.BertForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        logits = hf(**hf_tokenizer(path)(REVIEWS, return_tensors="pt", padding=True)).logits
    expected = torch.softmax(logits, -1).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=1e-5, rtol=0)
    assert _strings(out["labels"]) == [["负面", "正面"][i] for i in expected.argmax(-1)]
    ids = served.signatures["tokenize"](text=tf.constant(REVIEWS))["token_ids"].numpy()
    hf_ids = hf_tokenizer(path)(REVIEWS, padding="max_length", max_length=ids.shape[1])["input_ids"]
    np.testing.assert_array_equal(ids, hf_ids)


def test_embedder_signature_on_chinese_equals_encode(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "emb"))
    model = BertSentenceEmbedder.from_preset(path, pooling="mean", normalize=True)
    expected = np.asarray(model.encode(CHINESE_SENTENCES))
    assert np.ptp(expected[:, 0]) > 1e-3  # different sentences, different vectors: the check can fail
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "served")))
    got = served.signatures["serving_default"](text=tf.constant(CHINESE_SENTENCES))["embeddings"].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_span_qa_signature_spans_slice_the_chinese_context(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "qa"), head="qa")
    model = BertSpanQA.from_preset(path)
    questions = ["李明在哪里读书？", "华为在哪里设了研发中心？", "谁是国家主席？"]
    contexts = [CHINESE_SENTENCES[3], CHINESE_SENTENCES[2], CHINESE_SENTENCES[0]]
    expected = model.predict_answers(questions, contexts)
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "served")))
    out = served.signatures["serving_default"](question=tf.constant(questions), context=tf.constant(contexts))
    answers, starts, ends = _strings(out["answer"]), out["start"].numpy().tolist(), out["end"].numpy().tolist()
    assert answers == [row["answer"] for row in expected]
    assert starts == [row["start"] for row in expected] and ends == [row["end"] for row in expected]
    for context, answer, start, end in zip(contexts, answers, starts, ends, strict=True):
        assert answer and context[start:end] == answer  # character offsets, not bytes
    np.testing.assert_allclose(out["score"].numpy(), [row["score"] for row in expected], rtol=1e-5, atol=1e-4)


def test_fill_mask_signature_on_chinese_equals_fill_mask(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "mlm"), head="mlm")
    model = BertPretrainer.from_preset(path)
    texts = ["我们在北[MASK]天安门广场见到了中国国家主席习近平。", "上海浦东新区2024年[MASK][MASK]增长5.2%", "没有掩码"]
    expected = model.fill_mask(texts, top_k=3)
    served = tf.saved_model.load(export_saved_model(model, str(tmp_path / "served"), top_k=3, max_masks=4))
    out = served.signatures["fill_mask"](text=tf.constant(texts))
    np.testing.assert_array_equal(out["is_mask"].numpy(), [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    tokens = [[[t.decode("utf-8") for t in slot] for slot in row] for row in out["tokens"].numpy()]
    for row, answer in enumerate(expected):
        for slot, candidates in enumerate(answer):
            assert tokens[row][slot] == [t for t, _ in candidates]
            np.testing.assert_allclose(out["scores"].numpy()[row][slot], [p for _, p in candidates], atol=1e-5)
