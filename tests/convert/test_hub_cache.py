"""Preset names and `hf://` load through huggingface_hub's cache, offline.

This machine has no Hub access, so each test builds a cache laid out exactly as
`huggingface_hub` writes it (`models--ORG--NAME/blobs/<hash>`, `refs/main` holding the
commit, `snapshots/<commit>/<file>` symlinked to the blob) holding the real
all-MiniLM-L6-v2 files under a test repo id, and points huggingface_hub at it with
`HF_HUB_OFFLINE=1`. `huggingface_hub` reads both settings into `constants` at import, so
the test sets the module attributes as well as the environment.
"""

import hashlib
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertSentenceEmbedder
from keras_bert_zoo.cli import main
from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.models import presets
from tests.helpers import minilm_path

REPO = "test-org/minilm-l6"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = (
    "config.json",
    "model.safetensors",
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)


def cache_repo(cache, repo_id, source, commit=COMMIT, files=FILES):
    """Puts `source`'s `files` into `cache` as huggingface_hub stores a downloaded repo."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)  # no newline, as huggingface_hub writes it
    for name in files:
        src = os.path.join(source, name)
        if not os.path.exists(src):
            continue
        data = open(src, "rb").read()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return repo


def test_hf_uri_loads_the_cached_snapshot_like_the_directory(hf_cache):
    source = minilm_path()
    cache_repo(hf_cache, REPO, source)
    by_path = BertBackbone.from_preset(source)
    for address in (f"hf://{REPO}", f"hf://{REPO}@{COMMIT}", f"hf://{REPO}@main"):
        by_hub = BertBackbone.from_preset(address)
        x = {
            "token_ids": np.array([[101, 7592, 2088, 999, 102, 0]], "int32"),
            "segment_ids": np.zeros((1, 6), "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], "int32"),
        }
        a, b = by_path(x), by_hub(x)
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(np.asarray(b[key]), np.asarray(a[key]), atol=1e-5, rtol=0)
        assert by_hub.count_params() == 22_713_216


def test_hf_uri_embedder_reads_sentence_transformers_settings_from_the_cache(hf_cache):
    source = minilm_path()
    cache_repo(hf_cache, REPO, source)
    texts = ["A man is playing a guitar.", "Zürich is lovely."]
    by_path = BertSentenceEmbedder.from_preset(source).encode(texts)
    by_hub = BertSentenceEmbedder.from_preset(f"hf://{REPO}").encode(texts)
    np.testing.assert_allclose(by_hub, by_path, atol=1e-5, rtol=0)


def test_preset_name_resolves_to_its_repo_in_the_cache(hf_cache, monkeypatch):
    """A name stands for its repo: here bert_tiny_uncased is pointed at the cached test repo."""
    cache_repo(hf_cache, REPO, minilm_path())
    monkeypatch.setitem(presets.PRETRAINED_REPOS, "bert_tiny_uncased", REPO)
    assert BertBackbone.from_preset("bert_tiny_uncased").hidden_dim == 384  # the checkpoint's, not the table's
    assert BertBackbone.from_preset("bert_tiny_uncased", load_weights=False).hidden_dim == 128  # the table


def test_official_repos_of_the_presets():
    repos = presets.PRETRAINED_REPOS
    assert set(repos) == set(presets.BACKBONE_PRESETS)
    assert repos["bert_base_uncased"] == "google-bert/bert-base-uncased"
    assert repos["bert_large_cased"] == "google-bert/bert-large-cased"
    assert repos["bert_tiny_uncased"] == "google/bert_uncased_L-2_H-128_A-2"
    assert repos["bert_medium_uncased"] == "google/bert_uncased_L-8_H-512_A-8"
    assert [n for n, r in repos.items() if r is None] == [
        f"bert_{s}_cased" for s in ("tiny", "mini", "small", "medium")
    ]


def test_uncached_preset_name_is_one_line_naming_the_repo_and_the_fixes(hf_cache):
    with pytest.raises(CheckpointError) as e:
        BertBackbone.from_preset("bert_base_uncased")
    message = str(e.value)
    assert "\n" not in message
    assert "google-bert/bert-base-uncased" in message and "HF_HUB_OFFLINE=1" in message
    assert "go online once" in message and "local directory" in message


def test_unreachable_hub_without_offline_mode_does_not_say_unset_it(hf_cache, monkeypatch):
    """HF_HUB_OFFLINE never set, no network: the line says the Hub could not be reached, and does
    not tell the user to unset a variable they never set."""
    import huggingface_hub
    from huggingface_hub import constants, errors

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def unreachable(*args, **kwargs):  # what huggingface_hub raises when the Hub cannot be reached
        raise errors.LocalEntryNotFoundError("cannot reach huggingface.co and the file is not cached")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    with pytest.raises(CheckpointError) as e:
        BertBackbone.from_preset("bert_base_uncased")
    message = str(e.value)
    assert "the Hub could not be reached" in message and "go online once to cache it" in message
    assert "HF_HUB_OFFLINE" not in message
    # With it set, the line names it (and how to turn it off).
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError, match=r"HF_HUB_OFFLINE=1; go online once to cache it \(unset HF_HUB_OFFLINE\)"):
        BertBackbone.from_preset("bert_base_uncased")


def test_preset_without_official_checkpoint_says_so(hf_cache):
    with pytest.raises(CheckpointError, match="no pretrained checkpoint.*load_weights=False"):
        BertBackbone.from_preset("bert_small_cased")
    assert BertBackbone.from_preset("bert_small_cased", load_weights=False).num_layers == 4


def test_cli_exits_1_with_one_line_and_writes_nothing(hf_cache, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["convert", "--from", "bert_base_uncased", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "google-bert/bert-base-uncased" in err[0] and "Traceback" not in err[0]
    assert not out.exists()


def test_cli_converts_a_cached_hf_uri(hf_cache, tmp_path, capsys):
    cache_repo(hf_cache, REPO, minilm_path())
    out = tmp_path / "out"
    assert main(["convert", "--from", f"hf://{REPO}", "--out", str(out)]) == 0
    assert "22,713,216 parameters" in capsys.readouterr().out
    assert (out / "vocab.txt").exists()
    a, b = BertBackbone.from_preset(minilm_path()), BertBackbone.from_preset(str(out))
    for x, y in zip(a.weights, b.weights, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("address", ["hf://just-a-name", "hf://a/b/c", "hf:///x"])
def test_malformed_hf_uri_is_a_usage_error(address):
    with pytest.raises(ValueError, match="hf://ORG/NAME"):
        BertBackbone.from_preset(address)


def test_pretrain_preset_starts_from_scratch_and_says_so(hf_cache, tmp_path, capsys):
    """`pretrain --preset` needs no checkpoint (the cache is empty and offline) and says it starts from scratch."""
    from tests.helpers import shared_data

    out = tmp_path / "run"
    assert (
        main(
            [
                "pretrain",
                "--corpus",
                shared_data("pretrain_text", "sample_text.txt"),
                "--preset",
                "bert_tiny_uncased",
                "--vocab-size",
                "300",
                "--steps",
                "1",
                "--batch-size",
                "2",
                "--sequence-length",
                "32",
                "--jit-compile",
                "false",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "pretraining bert_tiny_uncased from scratch" in capsys.readouterr().err
    assert (out / "model.safetensors").exists()


def test_a_directory_named_like_a_preset_is_that_directory(hf_cache, tmp_path, monkeypatch):
    """`./bert_base_chinese` holding a checkpoint loads it, not the preset, even when the preset's repo is cached."""
    from keras_bert_zoo import BertClassifier
    from keras_bert_zoo.convert.checkpoint import read_architecture
    from keras_bert_zoo.models import loading
    from tests.chinese_fixtures import write_chinese_checkpoint

    # The preset's repo in the cache: 48 wide; the directory of the same name: 32 wide; the table: 768.
    hub = write_chinese_checkpoint(str(tmp_path / "hub_source"), hidden=48)
    cache_repo(hf_cache, presets.PRETRAINED_REPOS["bert_base_chinese"], hub, files=("config.json", "model.safetensors"))
    local = write_chinese_checkpoint(str(tmp_path / "bert_base_chinese"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert BertBackbone.from_preset("bert_base_chinese").hidden_dim == 48  # no such directory here: the preset

    monkeypatch.chdir(tmp_path)
    by_name, by_path = BertBackbone.from_preset("bert_base_chinese"), BertBackbone.from_preset(local)
    assert by_name.hidden_dim == 32
    for x, y in zip(by_name.weights, by_path.weights, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert BertBackbone.from_preset("bert_base_chinese", load_weights=False).hidden_dim == 32
    assert read_architecture("bert_base_chinese")["hidden_dim"] == 32
    assert BertClassifier.from_preset("bert_base_chinese", num_classes=2).backbone.hidden_dim == 32
    out = tmp_path / "converted"
    assert main(["convert", "--from", "bert_base_chinese", "--out", str(out)]) == 0
    assert BertBackbone.from_preset(str(out)).hidden_dim == 32
    assert not loading.is_preset_name("bert_base_chinese")  # the one rule every path asks
