import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from tests.helpers import run_model_test

TINY = dict(vocabulary_size=10, num_layers=2, num_heads=2, hidden_dim=4, intermediate_dim=8, max_sequence_length=5)


def tiny_inputs(batch=2, seq=5):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, 10, (batch, seq)).astype("int32")
    padding_mask = np.ones((batch, seq), "int32")
    padding_mask[-1, 3:] = 0
    return {
        "token_ids": token_ids,
        "segment_ids": (np.arange(seq)[None, :] >= 2).astype("int32").repeat(batch, 0),
        "padding_mask": padding_mask,
    }


def test_backbone_contract(tmp_path):
    backbone = BertBackbone(**TINY, output_hidden_states=True)
    outputs = run_model_test(backbone, tiny_inputs(), tmp_path)
    assert tuple(outputs["sequence_output"].shape) == (2, 5, 4)
    assert tuple(outputs["pooled_output"].shape) == (2, 4)
    assert tuple(outputs["hidden_states"].shape) == (2, 3, 5, 4)
    np.testing.assert_allclose(outputs["hidden_states"][:, -1], outputs["sequence_output"], rtol=1e-5, atol=1e-6)


def test_padding_does_not_change_real_positions():
    backbone = BertBackbone(**{**TINY, "max_sequence_length": 8})
    short = tiny_inputs(batch=1, seq=5)
    long = {k: np.pad(v, ((0, 0), (0, 3))) for k, v in short.items()}
    a = backbone(short)["sequence_output"].numpy()
    b = backbone(long)["sequence_output"].numpy()[:, :5]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_layer_names_mirror_checkpoint_names():
    backbone = BertBackbone(**TINY)
    paths = {v.path for v in backbone.weights}
    assert "embeddings/word_embeddings/embeddings" in paths
    assert "encoder_layer_1/query/kernel" in paths
    assert "encoder_layer_0/attention_layer_norm/gamma" in paths
    assert "pooler/kernel" in paths


@pytest.mark.parametrize(
    "name,expected",
    [
        ("bert_tiny_uncased", 4_385_920),
        ("bert_mini_uncased", None),
        ("bert_base_uncased", 109_482_240),
        ("bert_base_cased", 108_310_272),
        ("bert_large_uncased", 335_141_888),
    ],
)
def test_preset_parameter_counts_equal_hf(name, expected):
    transformers = pytest.importorskip("transformers")
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    p = BACKBONE_PRESETS[name]
    hf_config = transformers.BertConfig(
        vocab_size=p["vocabulary_size"],
        hidden_size=p["hidden_dim"],
        num_hidden_layers=p["num_layers"],
        num_attention_heads=p["num_heads"],
        intermediate_size=p["intermediate_dim"],
    )
    with __import__("torch").device("meta"):
        hf_count = sum(t.numel() for t in transformers.BertModel(hf_config).parameters())
    ours = BertBackbone.from_preset(name, load_weights=False).count_params()
    assert ours == hf_count
    if expected:
        assert ours == expected


def test_unknown_preset_error_lists_known_ones():
    with pytest.raises(ValueError, match="bert_tiny_uncased"):
        BertBackbone.from_preset("bert_huge_uncased")


def test_heads_must_divide_hidden():
    with pytest.raises(ValueError, match="not divisible"):
        BertBackbone(**{**TINY, "num_heads": 3})


def test_mixed_bfloat16_runs_in_bf16_with_float32_weights_and_stays_close():
    # Softmax is upcast in BertEncoderBlock and LayerNorm in keras.ops.layer_normalization;
    # this checks the observable result: bf16 compute, float32 variables, outputs near float32's.
    inputs = tiny_inputs()
    full = BertBackbone(**TINY)
    mixed = BertBackbone(**TINY, dtype="mixed_bfloat16")
    mixed.set_weights(full.get_weights())
    assert all(v.dtype == "float32" for v in mixed.weights)
    block = mixed.encoder_layers[0]
    assert block.query.compute_dtype == "bfloat16"
    out_full = full(inputs)["sequence_output"].numpy()
    out_mixed = keras.ops.convert_to_numpy(keras.ops.cast(mixed(inputs)["sequence_output"], "float32"))
    assert np.isfinite(out_mixed).all()
    # bf16 has 8 bits of mantissa; LayerNorm-normalised outputs of O(1) agree to ~1e-2.
    np.testing.assert_allclose(out_mixed, out_full, atol=0.1)


def test_mixed_bfloat16_trains():
    backbone = BertBackbone(**TINY, dtype="mixed_bfloat16")
    inputs = keras.Input(shape=(5,), dtype="int32")
    features = {
        "token_ids": inputs,
        "segment_ids": keras.ops.zeros_like(inputs),
        "padding_mask": keras.ops.ones_like(inputs),
    }
    logits = keras.layers.Dense(2, dtype="float32")(backbone(features)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).integers(0, 10, (8, 5)).astype("int32")
    history = model.fit(x, np.arange(8) % 2, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


RANDOM_INIT_LINE = (
    "bert_tiny_uncased: architecture only, random initialisation (load_weights=False; "
    "load_weights=True loads its pretrained checkpoint)"
)


def test_a_preset_without_a_checkpoint_does_not_promise_one(capsys):
    """The small cased sizes have no pretrained checkpoint: the line says so, and names the one that has."""
    BertBackbone.from_preset("bert_tiny_cased", load_weights=False)
    line = capsys.readouterr().err.strip()
    assert line == (
        "bert_tiny_cased: architecture only, random initialisation (load_weights=False; Google released "
        "no pretrained checkpoint of this size and casing; bert_tiny_uncased has one)"
    )


def test_preset_name_says_it_is_random_initialisation(capsys, tmp_path):
    """A preset name with load_weights=False is the architecture alone, and says so once."""
    from keras_bert_zoo import BertClassifier, BertPretrainer
    from keras_bert_zoo.models.task import Task

    backbone = BertBackbone.from_preset("bert_tiny_uncased", load_weights=False)
    assert capsys.readouterr().err.splitlines().count(RANDOM_INIT_LINE) == 1
    BertClassifier.from_preset("bert_tiny_uncased", load_weights=False, num_classes=2)
    assert capsys.readouterr().err.splitlines().count(RANDOM_INIT_LINE) == 1
    BertPretrainer.from_preset("bert_tiny_uncased", load_weights=False)
    assert capsys.readouterr().err.splitlines().count(RANDOM_INIT_LINE) == 1
    # A directory holds weights: no such line.
    backbone.save_to_preset(str(tmp_path / "tiny"))
    BertBackbone.from_preset(str(tmp_path / "tiny"))
    assert "random initialisation" not in capsys.readouterr().err
    for method in (BertBackbone.from_preset, Task.from_preset, BertClassifier.from_preset):
        assert "random initialisation" in " ".join(method.__doc__.split()), method.__qualname__
    assert "KerasHub" in BertBackbone.from_preset.__doc__ and "KerasHub" in Task.from_preset.__doc__
