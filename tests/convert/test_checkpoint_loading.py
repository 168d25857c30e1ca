"""Checkpoint layouts and failure modes, against HF transformers' own files."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.convert.safetensors_io import read_safetensors, write_safetensors
from keras_bert_zoo.errors import CheckpointError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def hf_tiny(tmp_path, **overrides):
    """A random tiny HF BertModel saved as safetensors; returns (dir, model)."""
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        **overrides,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    path = tmp_path / "hf"
    model.save_pretrained(path, safe_serialization=True)
    return str(path), model


def inputs():
    rng = np.random.default_rng(1)
    mask = np.ones((2, 7), "int32")
    mask[1, 4:] = 0
    return {
        "token_ids": rng.integers(0, 50, (2, 7)).astype("int32"),
        "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 1]] * 2, "int32"),
        "padding_mask": mask,
    }


def hf_outputs(model, x):
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(x["token_ids"]).long(),
            token_type_ids=torch.tensor(x["segment_ids"]).long(),
            attention_mask=torch.tensor(x["padding_mask"]).long(),
        )
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def assert_matches(backbone, model):
    x = inputs()
    seq, pooled = hf_outputs(model, x)
    ours = backbone(x)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(ours["sequence_output"].numpy()[real], seq[real], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours["pooled_output"].numpy(), pooled, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new", "relu"])
def test_hf_activations(tmp_path, hidden_act):
    path, model = hf_tiny(tmp_path, hidden_act=hidden_act)
    assert_matches(BertBackbone.from_preset(path), model)


def test_hf_key_variants(tmp_path):
    """`bert.` prefixes, gamma/beta LayerNorm names, a missing pooler and buffers are all accepted."""
    path, model = hf_tiny(tmp_path)
    tensors = dict(read_safetensors(os.path.join(path, "model.safetensors")))
    renamed = {}
    for k, v in tensors.items():
        if k.startswith("pooler."):
            continue
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        renamed["bert." + k] = np.array(v)
    renamed["bert.embeddings.position_ids"] = np.arange(16, dtype=np.int64)[None]
    renamed["cls.predictions.bias"] = np.zeros(50, np.float32)
    write_safetensors(renamed, os.path.join(path, "model.safetensors"))
    backbone = BertBackbone.from_preset(path)
    x = inputs()
    seq, _ = hf_outputs(model, x)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(backbone(x)["sequence_output"].numpy()[real], seq[real], rtol=1e-5, atol=1e-5)


def test_save_to_preset_round_trips_exactly_and_hf_loads_it(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )
    backbone.save_to_preset(str(tmp_path / "ours"))
    restored = BertBackbone.from_preset(str(tmp_path / "ours"))
    assert restored.get_config() == {**backbone.get_config(), "name": restored.name}
    for a, b in zip(backbone.weights, restored.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    hf = transformers.BertModel.from_pretrained(str(tmp_path / "ours")).eval()
    assert_matches(backbone, hf)


def test_wrong_shape_names_tensor_and_shapes(tmp_path):
    path, _ = hf_tiny(tmp_path)
    tensors = {k: np.array(v) for k, v in read_safetensors(os.path.join(path, "model.safetensors")).items()}
    tensors["encoder.layer.1.intermediate.dense.weight"] = np.zeros((17, 8), np.float32)
    write_safetensors(tensors, os.path.join(path, "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"encoder\.layer\.1\.intermediate\.dense\.weight.*\(8, 17\).*\(8, 16\)"):
        BertBackbone.from_preset(path)


def test_missing_tensor_is_named(tmp_path):
    path, _ = hf_tiny(tmp_path)
    tensors = {
        k: np.array(v)
        for k, v in read_safetensors(os.path.join(path, "model.safetensors")).items()
        if "layer.0.attention.self.key.bias" not in k
    }
    write_safetensors(tensors, os.path.join(path, "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing.*encoder\.layer\.0\.attention\.self\.key\.bias"):
        BertBackbone.from_preset(path)


def test_relative_position_embeddings_refused(tmp_path):
    path, _ = hf_tiny(tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["position_embedding_type"] = "relative_key"
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    with pytest.raises(CheckpointError, match="position_embedding_type='relative_key'"):
        BertBackbone.from_preset(path)


def test_pickle_checkpoints_are_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(CheckpointError, match="never loaded"):
        BertBackbone.from_preset(str(tmp_path))


def test_unrecognised_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(CheckpointError, match="not a BERT checkpoint.*notes.txt"):
        BertBackbone.from_preset(str(tmp_path))


def test_load_weights_false_builds_architecture_only(tmp_path):
    path, model = hf_tiny(tmp_path)
    backbone = BertBackbone.from_preset(path, load_weights=False)
    assert backbone.count_params() == sum(p.numel() for p in model.parameters())


def _minilm_copy(tmp_path, keep=lambda name: True):
    """A copy of the real all-MiniLM-L6-v2 directory with only the tensors `keep` accepts."""
    import shutil

    from tests.helpers import minilm_path

    src = minilm_path()
    dst = tmp_path / "minilm"
    dst.mkdir()
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(src, name), dst / name)
    tensors = {k: np.array(v) for k, v in read_safetensors(os.path.join(src, "model.safetensors")).items() if keep(k)}
    write_safetensors(tensors, str(dst / "model.safetensors"))
    return src, str(dst)


def test_checkpoint_without_pooler_warns_once_and_names_the_fix(tmp_path, capsys):
    src, path = _minilm_copy(tmp_path, keep=lambda name: not name.startswith("pooler."))
    backbone = BertBackbone.from_preset(path)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "pooler" in line]
    assert len(warnings) == 1, warnings
    line = warnings[0]
    assert path in line and "pooler.dense" in line and "randomly initialised" in line
    assert "pooled_output" in line and "pooling='mean'" in line
    # Everything else is the real checkpoint.
    reference = BertBackbone.from_preset(src)
    for a, b in zip(reference.weights, backbone.weights, strict=True):
        if not a.path.startswith("pooler"):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert "pooler" not in capsys.readouterr().err  # the real one has its pooler: no warning


def test_backbone_tensors_beyond_the_config_are_named(tmp_path, capsys):
    """A config saying 1 layer over 2 layers of weights loads layer 0 and says what it left."""
    path, _ = hf_tiny(tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["num_hidden_layers"] = 1
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    BertBackbone.from_preset(path)
    lines = [line for line in capsys.readouterr().err.splitlines() if "not used" in line]
    assert len(lines) == 1 and "16 checkpoint tensor(s) not used by BertBackbone" in lines[0]
    assert "encoder.layer.1." in lines[0]


def test_task_heads_are_not_reported_when_loading_a_backbone(tmp_path, capsys):
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    transformers.BertForPreTraining(config).save_pretrained(tmp_path / "hf", safe_serialization=True)
    capsys.readouterr()
    BertBackbone.from_preset(str(tmp_path / "hf"))
    assert capsys.readouterr().err == ""
