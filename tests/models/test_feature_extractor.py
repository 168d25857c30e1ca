"""`BertFeatureExtractor`: HF `output_hidden_states=True` parity on the real all-MiniLM-L6-v2,
the paper's combinations computed from HF's states in numpy, and a frozen layer that
trains inside a user's own Keras model without changing."""

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertFeatureExtractor, BertPreprocessor
from keras_bert_zoo.models.feature_extractor import COMBINATIONS
from tests.helpers import minilm_path

SENTENCES = ["EU rejects German call to boycott British lamb .", "Peter Blackburn", "", "Zürich café — 日本語 " * 8]


def _reference(states, combination):
    """The combinations written out on HF's hidden states `[L + 1][b, s, h]` (numpy)."""
    states = np.stack(states, axis=1)
    return {
        "last": states[:, -1],
        "second_to_last": states[:, -2],
        "sum_last_four": states[:, -4] + states[:, -3] + states[:, -2] + states[:, -1],
        "concat_last_four": np.concatenate([states[:, -4], states[:, -3], states[:, -2], states[:, -1]], -1),
        "sum_all": states[:, 1:].sum(1),
        "all": states,
    }[combination]


def test_hidden_states_and_combinations_equal_hf():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = minilm_path()
    x = BertPreprocessor.from_preset(path, sequence_length=48)(SENTENCES)
    x = {k: np.asarray(v) for k, v in x.items()}
    hf = transformers.BertModel.from_pretrained(path).eval()
    with torch.no_grad():
        out = hf(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
            output_hidden_states=True,
        )
    states = [s.numpy() for s in out.hidden_states]
    assert len(states) == 7
    real = x["padding_mask"].astype(bool)
    backbone = BertFeatureExtractor.from_preset(path, combination="all").backbone
    for combination in COMBINATIONS:
        ours = BertFeatureExtractor(backbone, combination=combination).predict(x, verbose=0)
        expected = _reference(states, combination)
        assert ours.shape == expected.shape, combination
        if combination == "all":  # [b, L + 1, s, h] -> [b, s, L + 1, h]
            ours, expected = ours.transpose(0, 2, 1, 3), expected.transpose(0, 2, 1, 3)
        # Padded positions are not compared (HF and we both compute garbage there).
        np.testing.assert_allclose(ours[real], expected[real], rtol=1e-5, atol=1e-4, err_msg=combination)


def _tiny(dropout=0.1, num_layers=4):
    return BertBackbone(
        vocabulary_size=50,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        dropout=dropout,
        output_hidden_states=True,
    )


def _inputs(n=16, length=10, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, length + 1, n)
    mask = (np.arange(length)[None] < lengths[:, None]).astype("int32")
    return {
        "token_ids": (rng.integers(5, 50, (n, length)) * mask).astype("int32"),
        "segment_ids": np.zeros((n, length), "int32"),
        "padding_mask": mask,
    }


def test_frozen_inside_a_users_model_only_the_head_trains():
    keras.utils.set_random_seed(0)
    extractor = BertFeatureExtractor(_tiny(dropout=0.3), combination="concat_last_four")
    assert extractor.feature_dim == 32 and not extractor.trainable_weights
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
    head = keras.layers.Dense(3, name="tags")
    model = keras.Model(inputs, head(extractor(inputs)))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    x = _inputs()
    y = np.random.default_rng(1).integers(0, 3, (16, 10))
    frozen = [w.copy() for w in extractor.backbone.get_weights()]
    features_before = extractor.predict(x, verbose=0)
    history = model.fit(x, y, batch_size=4, epochs=3, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    for before, after in zip(frozen, extractor.backbone.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)
    assert len(model.trainable_weights) == 2  # the Dense kernel and bias
    # No dropout inside the frozen extractor, even in a training-mode call (dropout 0.3 would move
    # features by ~0.1; eager and `predict`'s graph round differently, by ~1e-7).
    np.testing.assert_allclose(np.asarray(extractor(x, training=True)), features_before, rtol=1e-5, atol=1e-5)


def test_config_round_trip_and_errors(tmp_path):
    keras.utils.set_random_seed(0)
    extractor = BertFeatureExtractor(_tiny(), combination="sum_last_four")
    x = _inputs(4)
    path = str(tmp_path / "extractor.keras")
    extractor.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(restored.predict(x, verbose=0), extractor.predict(x, verbose=0))
    assert restored.combination == "sum_last_four" and not restored.trainable_weights
    with pytest.raises(ValueError, match="output_hidden_states=True"):
        BertFeatureExtractor(
            BertBackbone(vocabulary_size=50, num_layers=4, num_heads=2, hidden_dim=8, intermediate_dim=16)
        )
    with pytest.raises(ValueError, match="needs at least 4 layers; the backbone has 2"):
        BertFeatureExtractor(_tiny(num_layers=2), combination="concat_last_four")
    with pytest.raises(ValueError, match="combination='first'"):
        BertFeatureExtractor(_tiny(), combination="first")
