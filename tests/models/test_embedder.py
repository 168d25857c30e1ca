"""`BertSentenceEmbedder`: pooling against numpy references, raw strings, presets, and
parity with sentence-transformers' `encode` on the real all-MiniLM-L6-v2."""

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertPreprocessor, BertSentenceEmbedder, BertTagger
from keras_bert_zoo.tasks.embedder.data import read_sts
from tests.helpers import minilm_path, shared_data

TEXTS = ["A man is playing a guitar.", "", "Zürich, café — 日本語", "and on " * 60, "A man plays guitar."]


def _backbone(vocabulary_size=60, **kwargs):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def _ids(seed=0):
    rng = np.random.default_rng(seed)
    mask = np.array([[1] * 10, [1] * 6 + [0] * 4, [1] * 2 + [0] * 8], "int32")
    return {
        "token_ids": (rng.integers(5, 60, (3, 10)) * mask).astype("int32"),
        "segment_ids": np.zeros((3, 10), "int32"),
        "padding_mask": mask,
    }


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooled", "max"])
def test_pooling_matches_numpy_on_the_backbone_outputs(pooling):
    keras.utils.set_random_seed(0)
    backbone = _backbone()
    x = _ids()
    out = backbone.predict(x, verbose=0)
    seq, mask = out["sequence_output"], x["padding_mask"].astype(bool)
    expected = {
        "mean": np.stack([s[m].mean(0) for s, m in zip(seq, mask, strict=True)]),
        "cls": seq[:, 0],
        "pooled": out["pooled_output"],
        "max": np.stack([s[m].max(0) for s, m in zip(seq, mask, strict=True)]),
    }[pooling]
    got = BertSentenceEmbedder(backbone, pooling=pooling).predict(x, verbose=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    unit = BertSentenceEmbedder(backbone, pooling=pooling, normalize=True).predict(x, verbose=0)
    np.testing.assert_allclose(unit, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)


def test_padding_never_changes_an_embedding():
    """Extra [PAD] positions holding arbitrary ids leave every pooling's output unchanged."""
    keras.utils.set_random_seed(1)
    backbone = _backbone()
    x = _ids()
    wide = {k: np.concatenate([v, np.zeros((3, 6), "int32")], axis=1) for k, v in x.items()}
    wide["token_ids"][:, 10:] = 7
    for pooling in ("mean", "cls", "pooled", "max"):
        model = BertSentenceEmbedder(backbone, pooling=pooling)
        np.testing.assert_allclose(model.predict(x, verbose=0), model.predict(wide, verbose=0), rtol=1e-5, atol=1e-5)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="pooling='first'; use one of"):
        BertSentenceEmbedder(_backbone(), pooling="first")
    with pytest.raises(ValueError, match="encode needs a preprocessor"):
        BertSentenceEmbedder(_backbone()).encode(["a"])


@pytest.fixture(scope="module")
def small_embedder():
    """A 1-layer random model with the real MiniLM vocabulary (fast raw-string tests)."""
    keras.utils.set_random_seed(2)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=32)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    return BertSentenceEmbedder(backbone, preprocessor=pre)


def test_encode_equals_the_model_on_padded_ids_in_input_order(small_embedder):
    """encode sorts texts into length buckets; rows come back in input order and equal the
    model applied to the preprocessor's full-length ids."""
    expected = small_embedder.predict(small_embedder.preprocessor(TEXTS), verbose=0)
    got = small_embedder.encode(TEXTS, batch_size=2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.ptp(got[:, 0]) > 1e-3  # the texts get different vectors
    unit = small_embedder.encode(TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(small_embedder.encode(TEXTS[0])[0], got[0], rtol=1e-5, atol=1e-6)
    seen = []
    small_embedder.encode(TEXTS * 40, batch_size=1, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(64, 200), (128, 200), (192, 200), (200, 200)]
    with pytest.raises(ValueError, match="text 1 is a int"):
        small_embedder.encode(["a", 3])


def test_save_to_preset_round_trip_and_other_model_dirs(small_embedder, tmp_path, capfd):
    small_embedder.save_to_preset(str(tmp_path / "emb"))
    again = BertSentenceEmbedder.from_preset(str(tmp_path / "emb"))
    assert again.pooling == "mean" and again.preprocessor.sequence_length == 32
    np.testing.assert_allclose(again.encode(TEXTS), small_embedder.encode(TEXTS), rtol=1e-5, atol=1e-6)
    # A tagger's directory: no pooler is written (as HF's BertForTokenClassification).
    tagger = BertTagger(small_embedder.backbone, num_labels=3, preprocessor=None)
    tagger.save_to_preset(str(tmp_path / "tagger"))
    small_embedder.preprocessor.save_to_preset(str(tmp_path / "tagger"))
    capfd.readouterr()
    mean = BertSentenceEmbedder.from_preset(str(tmp_path / "tagger"))
    err = capfd.readouterr().err
    assert "no pooler weights" not in err and "classifier.weight" in err  # the unused head is named
    np.testing.assert_allclose(mean.encode(TEXTS), small_embedder.encode(TEXTS), rtol=1e-5, atol=1e-6)
    BertSentenceEmbedder.from_preset(str(tmp_path / "tagger"), pooling="pooled")
    assert "has no pooler weights (pooler.dense.*): the pooler is randomly initialised" in capfd.readouterr().err


def test_sentence_transformers_settings_are_read():
    embedder = BertSentenceEmbedder.from_preset(minilm_path())
    assert (embedder.pooling, embedder.normalize, embedder.preprocessor.sequence_length) == ("mean", True, 256)
    cls = BertSentenceEmbedder.from_preset(minilm_path(), pooling="cls", normalize=False, sequence_length=64)
    assert (cls.pooling, cls.normalize, cls.preprocessor.sequence_length) == ("cls", False, 64)


def _sentence_transformers_parity(sentences):
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(minilm_path(), device="cpu").encode(sentences, batch_size=64)
    ours = BertSentenceEmbedder.from_preset(minilm_path()).encode(sentences, batch_size=64)
    assert ours.shape == reference.shape == (len(sentences), 384)
    cosine = np.sum(ours * reference, 1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(reference, axis=1)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.99999, (cosine.min(), sentences[worst])
    return cosine


def test_mean_pooling_equals_sentence_transformers_on_sts_dev_sample():
    pairs = read_sts(shared_data("stsb", "sts-dev.csv"))
    # Every 15th pair (both sentences) and the edge cases: 200 + 5 sentences.
    sample = [s for i in range(0, len(pairs), 15) for s in (pairs.sentences1[i], pairs.sentences2[i])]
    _sentence_transformers_parity(sample + TEXTS)


@pytest.mark.slow
def test_mean_pooling_equals_sentence_transformers_on_every_sts_dev_sentence():
    pairs = read_sts(shared_data("stsb", "sts-dev.csv"))
    sentences = sorted(set(pairs.sentences1) | set(pairs.sentences2))
    cosine = _sentence_transformers_parity(sentences)
    print(f"{len(sentences)} distinct STS-B dev sentences, min cosine {cosine.min():.8f}")
