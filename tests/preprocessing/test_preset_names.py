"""A preset name given to a tokenizer or preprocessor resolves as the backbone resolves it.

`BertPreprocessor.from_preset("bert_base_chinese")` reads the tokenizer files of the preset's Hub repo
(`google-bert/bert-base-chinese`) through `keras_bert_zoo.convert.hub`, the code `BertBackbone.from_preset`
goes through. The Hub is not reachable here: offline, both must say the same thing (the repo the files come
from, that it could not be fetched, and how to pass a local directory instead); with the download pointed at
a tiny Chinese checkpoint written by HF's classes, the ids must equal HF's `BertTokenizer` on that vocabulary
with the preset's casing (`tokenizer_settings`).
"""

import os
import shutil

import pytest

from keras_bert_zoo import (
    BertBackbone,
    BertPreprocessor,
    BertTokenizer,
    MultipleChoicePreprocessor,
    SpanQAPreprocessor,
    TaggingPreprocessor,
)
from keras_bert_zoo.convert import hub
from keras_bert_zoo.errors import CheckpointError, MissingPathError
from keras_bert_zoo.models.presets import pretrained_repo, tokenizer_settings
from tests.chinese_fixtures import CHINESE_SENTENCES, write_chinese_checkpoint

NAME = "bert_base_chinese"
REPO = "google-bert/bert-base-chinese"
LOADERS = [BertTokenizer, BertPreprocessor, TaggingPreprocessor, SpanQAPreprocessor, MultipleChoicePreprocessor]


@pytest.fixture(scope="module")
def chinese_dir(tmp_path_factory):
    return write_chinese_checkpoint(str(tmp_path_factory.mktemp("zh") / "ckpt"))


def _error(load, name=NAME):
    with pytest.raises(CheckpointError) as e:
        load(name)
    return str(e.value)


def _check_offline_messages():
    """Every preprocessor's line names the repo and the local-directory fix, and begins as the backbone's."""
    backbone = _error(BertBackbone.from_preset)
    head = backbone.split(" and ")[0]  # up to the reason (the backbone's names what asking the Hub raised)
    assert head.startswith(f"{NAME}: its files come from the Hub repo {REPO}, which could not be fetched: {REPO} is")
    for cls in LOADERS:
        message = _error(cls.from_preset)
        assert "\n" not in message and "preset directory not found" not in message, (cls, message)
        assert message.split(" and ")[0] == head, (cls, message)
        assert "go online once to cache it" in message
        local = f"pass the path of a local directory holding vocab.txt (+ tokenizer_config.json) instead of {NAME!r}"
        assert local in message, (cls, message)


def test_offline_preset_name_says_where_its_files_come_from(hf_cache):
    """HF_HUB_OFFLINE=1 and an empty cache: huggingface_hub's own offline errors, one line each."""
    _check_offline_messages()
    assert "HF_HUB_OFFLINE=1" in _error(BertPreprocessor.from_preset)


def test_unreachable_hub_says_the_same_for_backbone_and_preprocessors(hf_cache, monkeypatch):
    import huggingface_hub
    from huggingface_hub import constants, errors

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def unreachable(*args, **kwargs):  # what huggingface_hub raises with no network and nothing cached
        raise errors.LocalEntryNotFoundError("cannot reach huggingface.co and the file is not cached")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    _check_offline_messages()
    assert "the Hub could not be reached" in _error(TaggingPreprocessor.from_preset)


def _hf_ids(vocab_path, lowercase, texts):
    import transformers

    reference = transformers.BertTokenizer(vocab_path, do_lower_case=lowercase, tokenize_chinese_chars=True)
    return [reference(t)["input_ids"] for t in texts]


@pytest.mark.parametrize("with_tokenizer_config", [True, False])
def test_preset_name_reads_its_repos_files_as_hf_does(chinese_dir, tmp_path, monkeypatch, with_tokenizer_config):
    """The download returns a Chinese checkpoint; without its tokenizer_config.json, the preset's table
    entry gives the casing (bert_base_chinese keeps case: "Apple" and "GDP" are [UNK] as in HF), not the
    vocabulary's look (lowercase Latin pieces, which would infer lowercase=True)."""
    source = str(tmp_path / "snapshot")
    shutil.copytree(chinese_dir, source)
    if not with_tokenizer_config:
        os.remove(os.path.join(source, "tokenizer_config.json"))
    calls = []

    def fake_download(repo_id, revision=None, what=None, files="model"):
        calls.append((repo_id, what, files))
        return source

    monkeypatch.setattr(hub, "download", fake_download)
    lowercase = tokenizer_settings(NAME)["lowercase"]
    assert lowercase is False and pretrained_repo(NAME) == REPO
    expected = _hf_ids(os.path.join(source, "vocab.txt"), lowercase, CHINESE_SENTENCES)
    assert any(ids.count(1) for ids in expected)  # the cased Latin words are [UNK]: casing is tested
    pre = BertPreprocessor.from_preset(NAME, sequence_length=64)
    features = pre(CHINESE_SENTENCES)
    for row, mask, want in zip(features["token_ids"].numpy(), features["padding_mask"].numpy(), expected, strict=True):
        assert row[mask.astype(bool)].tolist() == want
    assert pre.tokenizer.lowercase is False
    assert calls == [(REPO, NAME, "tokenizer")]  # the tokenizer's files only, no weights
    tagger = TaggingPreprocessor.from_preset(NAME)
    assert tagger.tokenizer.lowercase is False and tagger.sequence_length == 128


def test_hf_address_works_for_preprocessors(chinese_dir, monkeypatch):
    monkeypatch.setattr(hub, "download", lambda repo_id, revision=None, what=None, files="model": chinese_dir)
    ids = BertTokenizer.from_preset("hf://hfl/chinese-bert-wwm-ext")(CHINESE_SENTENCES[0]).numpy().tolist()
    assert ids == _hf_ids(os.path.join(chinese_dir, "vocab.txt"), False, CHINESE_SENTENCES[:1])[0][1:-1]


def test_a_local_directory_named_like_the_preset_wins(chinese_dir, tmp_path, monkeypatch):
    shutil.copytree(chinese_dir, tmp_path / NAME)
    monkeypatch.chdir(tmp_path)

    def no_download(*args, **kwargs):
        raise AssertionError("a local directory must be read, not the Hub")

    monkeypatch.setattr(hub, "download", no_download)
    assert (
        BertPreprocessor.from_preset(NAME).tokenizer.vocabulary_size() == BertBackbone.from_preset(NAME).vocabulary_size
    )


def test_unknown_name_lists_the_closest_presets():
    with pytest.raises(
        MissingPathError,
        match=r"preset directory not found: 'bert_base_chinse'.*Closest preset names: bert_base_chinese",
    ):
        BertPreprocessor.from_preset("bert_base_chinse")
    with pytest.raises(CheckpointError, match=r"Closest preset names: bert_base_chinese"):
        BertBackbone.from_preset("bert_base_chinse")


def test_preset_without_checkpoint_has_no_vocabulary():
    with pytest.raises(CheckpointError, match="no pretrained checkpoint .* no vocabulary to load; pass a directory"):
        BertPreprocessor.from_preset("bert_tiny_cased")
