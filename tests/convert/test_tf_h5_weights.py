"""HF's TF2 weight files (`tf_model.h5`) load, and preset names find them on the Hub.

The fixtures in tests/fixtures/hf_tf_bert/ were written by HF's own `TFBertModel` and
`TFBertForPreTraining` (transformers 4.57.6, tf-keras 2.21, by `make_fixtures.py` there), with
HF's outputs on fixed inputs in `reference.npz`. Google's Turc et al. miniatures
(`google/bert_uncased_L-*_H-*_A-*`, our tiny/mini/small/medium presets) hold `tf_model.h5` and
`pytorch_model.bin` but no `model.safetensors`, so the preset-name tests build a Hub cache (or a
Hub listing) with just those files.
"""

import json
import os
import pickle
import shutil

import h5py
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.convert.checkpoint import Checkpoint
from keras_bert_zoo.convert.tf_h5_io import read_tf_h5
from keras_bert_zoo.errors import CheckpointError, UnsafeFileError
from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
from tests.convert.test_hub_cache import cache_repo
from tests.failures.test_cli_failures import Exploit
from tests.helpers import REPO_ROOT

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "hf_tf_bert")
MODEL, PRETRAINING = os.path.join(FIXTURES, "model"), os.path.join(FIXTURES, "pretraining")
TINY_REPO = "google/bert_uncased_L-2_H-128_A-2"  # bert_tiny_uncased's official repo
TURC_FILES = ("config.json", "vocab.txt", "tf_model.h5", "pytorch_model.bin", "flax_model.msgpack")


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(os.path.join(FIXTURES, "reference.npz")))


def inputs(ref, all_positions=False):
    x = {k: ref[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    if all_positions:  # MLM logits at every position, as HF's prediction_logits
        x["mask_positions"] = np.tile(np.arange(ref["token_ids"].shape[1], dtype="int32"), (len(ref["token_ids"]), 1))
    return x


def assert_backbone_matches(backbone, ref, prefix):
    out = backbone(inputs(ref))
    np.testing.assert_allclose(np.asarray(out["sequence_output"]), ref[f"{prefix}_sequence_output"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out["pooled_output"]), ref[f"{prefix}_pooled_output"], atol=1e-5, rtol=0)


def assert_pretrainer_matches(model, ref):
    assert_backbone_matches(model.backbone, ref, "pretraining")
    out = model(inputs(ref, all_positions=True), training=False)
    np.testing.assert_allclose(np.asarray(out["mlm_logits"]), ref["mlm_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out["nsp_logits"]), ref["nsp_logits"], atol=1e-5, rtol=0)


def test_tf_bert_model_h5_matches_hf(ref, capsys):
    backbone = BertBackbone.from_preset(MODEL)
    assert (backbone.num_layers, backbone.hidden_dim, backbone.vocabulary_size) == (2, 32, 100)
    assert_backbone_matches(backbone, ref, "model")
    assert "not used" not in capsys.readouterr().err


def test_tf_bert_for_pretraining_h5_heads_match_hf(ref, capsys):
    model = BertPretrainer.from_preset(PRETRAINING)
    assert_pretrainer_matches(model, ref)
    err = capsys.readouterr().err
    assert "not used" not in err and "random" not in err  # every stored tensor read, no head left fresh


def test_h5_names_and_shapes_are_hf_pytorch_ones():
    """The h5 reader gives the names and [out, in] layout of HF's PyTorch BertForPreTraining."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig.from_pretrained(PRETRAINING)
    torch_model = transformers.BertForPreTraining(config)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    expected = {
        k: tuple(v.shape)
        for k, v in torch_model.state_dict().items()
        if k not in tied and not k.endswith("position_ids")
    }
    got = {k: v.shape for k, v in read_tf_h5(os.path.join(PRETRAINING, "tf_model.h5")).items()}
    assert got == expected


def test_h5_converted_to_our_preset_loads_in_hf_pytorch(ref, tmp_path):
    """h5 -> our preset (safetensors) -> HF's PyTorch BertForPreTraining gives HF TF's logits."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    out = str(tmp_path / "converted")
    BertPretrainer.from_preset(PRETRAINING).save_to_preset(out)
    model = transformers.BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        got = model(
            **{
                name: torch.tensor(ref[key]).long()
                for name, key in (
                    ("input_ids", "token_ids"),
                    ("token_type_ids", "segment_ids"),
                    ("attention_mask", "padding_mask"),
                )
            }
        )
    np.testing.assert_allclose(got.prediction_logits.numpy(), ref["mlm_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got.seq_relationship_logits.numpy(), ref["nsp_logits"], atol=1e-5, rtol=0)


def test_safetensors_is_read_before_tf_model_h5(tmp_path, ref):
    both = tmp_path / "both"
    shutil.copytree(MODEL, both)
    other = BertBackbone(
        vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64, max_sequence_length=64
    )
    other.save_to_preset(str(tmp_path / "st"))
    shutil.copy(tmp_path / "st" / "model.safetensors", both / "model.safetensors")
    loaded = BertBackbone.from_preset(str(both))
    for a, b in zip(loaded.weights, other.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    os.remove(both / "model.safetensors")  # the same directory without it reads the h5
    assert_backbone_matches(BertBackbone.from_preset(str(both)), ref, "model")


# The keys of the Turc et al. repos' config.json: no `architectures`, no `model_type`.
TURC_CONFIG_KEYS = (
    "hidden_size",
    "hidden_act",
    "initializer_range",
    "vocab_size",
    "hidden_dropout_prob",
    "num_attention_heads",
    "type_vocab_size",
    "max_position_embeddings",
    "num_hidden_layers",
    "intermediate_size",
    "attention_probs_dropout_prob",
)


def turc_snapshot(tmp_path, source=PRETRAINING):
    """A directory holding what a Turc et al. repo holds: its config keys, no model.safetensors, a pickle
    beside the h5."""
    snap = tmp_path / "turc"
    shutil.copytree(source, snap)
    config = json.loads((snap / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps({k: config[k] for k in TURC_CONFIG_KEYS}))
    with open(snap / "pytorch_model.bin", "wb") as f:
        pickle.dump(Exploit(str(tmp_path / "UNPICKLED")), f, protocol=4)
    (snap / "flax_model.msgpack").write_bytes(b"\x80not read")
    return str(snap)


@pytest.fixture
def turc_cache(hf_cache, tmp_path):
    """The offline HF cache holding google/bert_uncased_L-2_H-128_A-2 with a Turc repo's files only."""
    return cache_repo(hf_cache, TINY_REPO, turc_snapshot(tmp_path), files=TURC_FILES)


def test_preset_name_loads_tf_model_h5_from_an_offline_cache(turc_cache, tmp_path, ref):
    model = BertPretrainer.from_preset("bert_tiny_uncased")  # the real repo id, resolved in the cache
    assert_pretrainer_matches(model, ref)
    assert_backbone_matches(BertBackbone.from_preset(f"hf://{TINY_REPO}"), ref, "pretraining")
    assert not (tmp_path / "UNPICKLED").exists()  # the pickle beside it was never opened


def test_cli_converts_the_preset_name_with_its_heads(turc_cache, tmp_path, ref, capsys):
    """`bert-zoo convert --from bert_tiny_uncased`: the heads are found by their tensors (no architectures)."""
    from keras_bert_zoo.cli import main

    out = str(tmp_path / "out")
    assert main(["convert", "--from", "bert_tiny_uncased", "--out", out]) == 0
    assert "BertPretrainer" in capsys.readouterr().out
    assert_pretrainer_matches(BertPretrainer.from_preset(out), ref)


def test_cache_without_a_safe_weight_file_is_one_line(hf_cache, tmp_path):
    cache_repo(hf_cache, TINY_REPO, turc_snapshot(tmp_path), files=("config.json", "vocab.txt", "pytorch_model.bin"))
    with pytest.raises(CheckpointError) as e:
        BertBackbone.from_preset("bert_tiny_uncased")
    message = str(e.value)
    assert "\n" not in message and TINY_REPO in message and "without model.safetensors or tf_model.h5" in message
    assert "HF_HUB_OFFLINE=1" in message and "go online once" in message
    assert not (tmp_path / "UNPICKLED").exists()


class FakeHub:
    """An online Hub that lists `files` for every repo and records what snapshot_download is asked for."""

    def __init__(self, monkeypatch, files, directory):
        import huggingface_hub
        from huggingface_hub import constants

        self.asked = []
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        siblings = [huggingface_hub.hf_api.RepoSibling(rfilename=name) for name in files]
        info = huggingface_hub.hf_api.ModelInfo(id="x", siblings=[{"rfilename": s.rfilename} for s in siblings])
        monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda api, repo_id, revision=None, **kw: info)

        def snapshot_download(repo_id, revision=None, allow_patterns=None, **kwargs):
            self.asked.append((repo_id, sorted(allow_patterns)))
            return directory

        monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


@pytest.mark.parametrize(
    "files, weights",
    [
        (TURC_FILES, "tf_model.h5"),
        (TURC_FILES + ("model.safetensors",), "model.safetensors"),  # e.g. google-bert/bert-base-uncased
    ],
)
def test_online_the_hub_listing_decides_which_weight_file_is_fetched(monkeypatch, tmp_path, files, weights):
    hub_ = FakeHub(monkeypatch, files, turc_snapshot(tmp_path))
    BertBackbone.from_preset("bert_tiny_uncased")
    ((repo_id, patterns),) = hub_.asked
    assert repo_id == TINY_REPO
    assert weights in patterns and not {"tf_model.h5", "model.safetensors"} - {weights} & set(patterns)
    assert not any(p.endswith((".bin", ".msgpack")) for p in patterns)


def test_online_repo_with_only_a_pickle_is_refused_before_download(monkeypatch, tmp_path):
    hub_ = FakeHub(monkeypatch, ("config.json", "vocab.txt", "pytorch_model.bin"), str(tmp_path))
    with pytest.raises(UnsafeFileError) as e:
        BertBackbone.from_preset("bert_tiny_uncased")
    message = str(e.value)
    assert message.startswith(f"bert_tiny_uncased: {TINY_REPO} holds no model.safetensors or tf_model.h5")
    assert "\n" not in message and "pytorch_model.bin" in message and "never loaded" in message
    assert hub_.asked == []


def test_h5_that_is_not_hdf5_is_a_checkpoint_error(tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(MODEL, bad)
    with open(bad / "tf_model.h5", "wb") as f:
        pickle.dump(Exploit(str(tmp_path / "UNPICKLED")), f, protocol=4)
    with pytest.raises(CheckpointError, match="is not an HDF5 file"):
        Checkpoint(str(bad))
    assert not (tmp_path / "UNPICKLED").exists()


def _copy_with(tmp_path, edit):
    path = tmp_path / "edited"
    shutil.copytree(MODEL, path)
    with h5py.File(path / "tf_model.h5", "r+") as f:
        edit(f)
    return str(path)


def test_keras_file_without_weight_names_is_refused(tmp_path):
    path = _copy_with(tmp_path, lambda f: f.attrs.__delitem__("layer_names"))
    with pytest.raises(CheckpointError, match="has no 'layer_names' attribute.*not a Keras weights file"):
        Checkpoint(path)


def test_link_to_another_file_is_refused(tmp_path):
    outside = tmp_path / "outside.h5"
    with h5py.File(outside, "w") as f:
        f["kernel"] = np.zeros((32, 32), "float32")

    def link_out(f):
        name = "tf_bert_model/bert/pooler/dense/kernel:0"
        del f["bert"][name]
        f["bert"][name] = h5py.ExternalLink(str(outside), "kernel")

    with pytest.raises(CheckpointError, match=r"a link \(ExternalLink\).*only weights stored in the file itself"):
        Checkpoint(_copy_with(tmp_path, link_out))


def test_non_float_weight_is_refused(tmp_path):
    def to_strings(f):
        name = "tf_bert_model/bert/pooler/dense/bias:0"
        del f["bert"][name]
        f["bert"][name] = np.array([b"x"] * 32)

    with pytest.raises(CheckpointError, match="not a float array"):
        Checkpoint(_copy_with(tmp_path, to_strings))
