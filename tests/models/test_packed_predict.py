"""Packed prediction (`batching="packed"`) for the tagger, span QA and sentence embeddings.

Every `batch_size` windows (sentences) are laid end to end in rows and each one's outputs
are read back from its own positions (`preprocessing.packed_predict`,
`preprocessing.unpacking`), so the outputs must equal those of the default batching, which
runs each window in a row of its own: tags and answers identical, logits and embeddings
within float rounding, on real CoNLL-2003, SQuAD and STS-B text of mixed lengths.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertPreprocessor, BertSentenceEmbedder, BertSpanQA, BertTagger
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.tasks.embedder.data import read_sts
from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_windows, window_logits
from keras_bert_zoo.tasks.tagger.data import read_tagged
from keras_bert_zoo.tasks.tagger.predict import window_logits as tag_window_logits
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.windows import make_windows
from tests.helpers import minilm_path, shared_data


def backbone(seed=0):
    keras.utils.set_random_seed(seed)
    return BertBackbone(
        vocabulary_size=30522,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=384,
        dropout=0.0,
        initializer_range=0.5,
    )


@pytest.fixture(scope="module")
def conll():
    return read_tagged(shared_data("conll2003", "eng.testa"), max_examples=120)


@pytest.fixture(scope="module")
def tagger(conll):
    # 24 pieces per window: some sentences need several windows, most fit one.
    pre = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=24, label_names=conll.label_names)
    return BertTagger(
        backbone(), num_labels=len(conll.label_names), label_names=conll.label_names, preprocessor=pre, dropout=0.0
    )


def test_packed_tagger_logits_equal_the_default(tagger, conll):
    windows = make_windows(conll.words, tagger.preprocessor, with_labels=False)
    lengths = windows.features["padding_mask"].sum(1)
    assert lengths.min() < 8 and lengths.max() == 24  # mixed lengths, so rows really hold several windows
    default = tag_window_logits(tagger, windows, batch_size=16)
    packed = tag_window_logits(tagger, windows, batch_size=16, batching="packed")
    real = (windows.features["padding_mask"] > 0)[..., None]
    assert packed.shape == default.shape
    np.testing.assert_allclose(np.where(real, packed, 0), np.where(real, default, 0), rtol=1e-5, atol=1e-5)
    assert np.abs(packed[~real[..., 0]]).max() == 0  # past each window's end: zeros, as the default
    assert np.abs(default).max() > 0.1  # a model of zeros would pass the comparison


def test_packed_rows_narrower_than_a_window_equal_the_default(tagger, conll):
    """`predict_packed(width=...)` with windows longer than `width`: a row is raised to the
    batch's longest window, and every window still gets its own outputs (<= 1e-5)."""
    from keras_bert_zoo.preprocessing.packed_predict import predict_packed

    windows = make_windows(conll.words, tagger.preprocessor, with_labels=False)
    features = {k: np.asarray(v) for k, v in windows.features.items()}
    lengths = features["padding_mask"].sum(1)
    width = 12
    assert (lengths > width).sum() >= 5 and (lengths <= width // 2).sum() >= 2  # both kinds in the batches
    packed = predict_packed(tagger, features, batch_size=8, width=width, fill=0.0)
    default = tagger.predict(features, batch_size=8, verbose=0)
    real = (features["padding_mask"] > 0)[..., None]
    assert packed.shape == default.shape
    np.testing.assert_allclose(np.where(real, packed, 0), np.where(real, default, 0), rtol=1e-5, atol=1e-5)
    assert np.abs(packed[~real[..., 0]]).max() == 0 and np.abs(default).max() > 0.1


def test_packed_tagger_tags_and_entities_equal_the_default(tagger, conll):
    assert tagger.predict_tags(conll.words, batching="packed") == tagger.predict_tags(conll.words)
    texts = [" ".join(words) for words in conll.words[:40]]
    packed, default = tagger.predict_entities(texts, batching="packed"), tagger.predict_entities(texts)
    assert [[(e["start"], e["end"], e["type"]) for e in row] for row in packed] == [
        [(e["start"], e["end"], e["type"]) for e in row] for row in default
    ]
    np.testing.assert_allclose(
        [e["score"] for row in packed for e in row], [e["score"] for row in default for e in row], rtol=1e-5
    )


@pytest.fixture(scope="module")
def squad():
    return read_squad(shared_data("squad", "dev.json"), max_examples=24)


@pytest.fixture(scope="module")
def qa_model():
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=384, doc_stride=128, max_query_length=32)
    return BertSpanQA(backbone(1), preprocessor=pre)


def test_packed_span_logits_equal_the_default(qa_model, squad):
    windows = make_qa_windows(qa_model.preprocessor, squad.questions, squad.contexts)
    lengths = np.sort(windows.features["padding_mask"].sum(1))
    assert lengths[0] + lengths[1] <= 384 < lengths[-2] + lengths[-1]  # some windows share a row, some cannot
    default, packed = window_logits(qa_model, windows, 8), window_logits(qa_model, windows, 8, batching="packed")
    real = windows.features["padding_mask"] > 0
    for ours, theirs in zip(packed, default, strict=True):
        # Rows of 384 keys sum in another order than the window's own: within 1e-5 of the logits' scale.
        np.testing.assert_allclose(ours[real], theirs[real], rtol=1e-5, atol=1e-5 * np.abs(theirs[real]).max())
        assert (ours[~real] == -1e4).all()  # no span can start or end past a window


def test_packed_answers_equal_the_default(qa_model, squad):
    default = qa_model.predict_answers(squad.questions, squad.contexts, batch_size=8)
    packed = qa_model.predict_answers(squad.questions, squad.contexts, batch_size=8, batching="packed")
    assert [(r["start"], r["end"], r["answer"]) for r in packed] == [
        (r["start"], r["end"], r["answer"]) for r in default
    ]
    np.testing.assert_allclose([r["score"] for r in packed], [r["score"] for r in default], rtol=1e-5, atol=1e-5)


def sts_sentences(n=48):
    pairs = read_sts(shared_data("stsb", "sts-dev.csv"), max_examples=n // 2)
    return [s for pair in zip(pairs.sentences1, pairs.sentences2, strict=True) for s in pair]


@pytest.mark.parametrize("pooling", ["mean", "max", "cls", "pooled"])
def test_packed_embeddings_equal_each_sentence_alone(pooling):
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=64)
    embedder = BertSentenceEmbedder(backbone(2), pooling=pooling, preprocessor=pre)
    texts = sts_sentences()
    packed = embedder.encode(texts, batch_size=16, batching="packed")
    alone = np.concatenate([embedder.encode([t]) for t in texts[:6]])
    np.testing.assert_allclose(packed[:6], alone, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(packed, embedder.encode(texts, batch_size=16), rtol=1e-5, atol=1e-5)
    rows = next(iter(embedder.raw_dataset(texts[:16], batch_size=16, batching="packed")))
    assert rows["token_ids"].shape[0] < 16  # the batch really was packed


def test_packed_prediction_refuses_what_it_cannot_do(tagger, conll):
    windows = make_windows(conll.words[:4], tagger.preprocessor, with_labels=False)
    with pytest.raises(UsageError, match="batching='sorted'; prediction takes 'auto'"):
        tag_window_logits(tagger, windows, batching="sorted")
    with pytest.raises(UsageError, match='batching="packed" needs a Keras model'):
        tag_window_logits(lambda batch: batch["padding_mask"], windows, batching="packed")
    with pytest.raises(UsageError, match="encode takes 'auto'"):
        BertSentenceEmbedder(backbone(), preprocessor=tagger.preprocessor).encode(["a"], batching="by_length")
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        with pytest.raises(UsageError, match='batching="packed" prediction runs on one replica'):
            tag_window_logits(tagger, windows, batching="packed")
