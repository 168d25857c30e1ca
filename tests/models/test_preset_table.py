"""Google's preset table against HF: sizes (HF's `BertModel` on the same config), repos, tokenizer settings.

Parameter counts: HF's `BertModel` is built on torch's meta device (no memory), so every preset is compared;
ours is instantiated for the presets under 12 M parameters and compared by the formula for the rest (the
formula is itself checked against our instantiated models). Tokenizer settings: the `tokenizer_config.json`
each repo holds (as published on the Hub) is written beside a vocabulary, and HF's `BertTokenizer` reads it;
the table must say what HF read, and our `BertTokenizer.from_preset` must read the same.
"""

import json

import pytest

from keras_bert_zoo import BertBackbone, BertTokenizer
from keras_bert_zoo.models import presets
from keras_bert_zoo.models.presets import BACKBONE_PRESETS, PRETRAINED_REPOS, tokenizer_settings

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

# tokenizer_config.json as each repo holds it on the Hub (None: the repo has none, HF's defaults apply).
REPO_TOKENIZER_CONFIGS = {
    "google-bert/bert-base-chinese": {"do_lower_case": False},
    "google-bert/bert-base-multilingual-cased": {"do_lower_case": False, "model_max_length": 512},
    "google-bert/bert-base-multilingual-uncased": {"do_lower_case": True, "model_max_length": 512},
    "google-bert/bert-base-uncased": {"do_lower_case": True},
    "google-bert/bert-base-cased": {"do_lower_case": False},
    "google-bert/bert-large-uncased-whole-word-masking": {"do_lower_case": True},
    "google-bert/bert-large-cased-whole-word-masking": {"do_lower_case": False, "model_max_length": 512},
    "google/bert_uncased_L-6_H-256_A-4": None,
    # HFL's repos hold {"init_inputs": []}: HF's defaults (lowercase) apply.
    "hfl/chinese-roberta-wwm-ext": {"init_inputs": []},
}
TURC = [(layers, hidden) for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)]


def formula_count(p):
    """BertModel's parameters: embeddings (+LayerNorm), per layer attention + FFN + 2 LayerNorms, pooler."""
    h, i, layers = p["hidden_dim"], p["intermediate_dim"], p["num_layers"]
    embeddings = (p["vocabulary_size"] + p["max_sequence_length"] + p["num_segments"]) * h + 2 * h
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h
    return embeddings + layers * layer + (h * h + h)


def hf_count(p):
    config = transformers.BertConfig(
        vocab_size=p["vocabulary_size"],
        hidden_size=p["hidden_dim"],
        num_hidden_layers=p["num_layers"],
        num_attention_heads=p["num_heads"],
        intermediate_size=p["intermediate_dim"],
        max_position_embeddings=p["max_sequence_length"],
        type_vocab_size=p["num_segments"],
    )
    with torch.device("meta"):
        return sum(t.numel() for t in transformers.BertModel(config).parameters())


@pytest.mark.parametrize("name", sorted(BACKBONE_PRESETS))
def test_preset_parameter_count_equals_hf_bert_model(name):
    p = BACKBONE_PRESETS[name]
    expected = hf_count(p)
    assert formula_count(p) == expected
    if expected < 12_000_000:  # cheap enough to build here (the formula, checked on these, covers the rest)
        assert BertBackbone.from_preset(name, load_weights=False).count_params() == expected


def test_google_sizes_and_vocabularies():
    sizes = {n: (p["vocabulary_size"], p["num_layers"], p["hidden_dim"]) for n, p in BACKBONE_PRESETS.items()}
    assert sizes["bert_base_chinese"] == (21128, 12, 768)
    assert sizes["bert_base_multilingual_cased"] == (119547, 12, 768)
    assert sizes["bert_base_multilingual_uncased"] == (105879, 12, 768)
    assert sizes["bert_large_wwm_uncased"] == (30522, 24, 1024)
    assert sizes["bert_large_wwm_cased"] == (28996, 24, 1024)
    # Their totals, as the Hub lists them (102M, 178M), exactly.
    assert hf_count(BACKBONE_PRESETS["bert_base_chinese"]) == 102_267_648
    assert hf_count(BACKBONE_PRESETS["bert_base_multilingual_cased"]) == 177_853_440


def test_all_24_turc_miniatures_have_a_preset_and_their_repo():
    by_repo = {repo: name for name, repo in PRETRAINED_REPOS.items() if repo}
    for layers, hidden in TURC:
        repo = f"google/bert_uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"
        name = by_repo[repo]
        p = BACKBONE_PRESETS[name]
        assert (p["num_layers"], p["hidden_dim"], p["num_heads"]) == (layers, hidden, hidden // 64)
        assert p["vocabulary_size"] == 30522 and p["intermediate_dim"] == 4 * hidden
    named = {"bert_tiny_uncased": (2, 128), "bert_mini_uncased": (4, 256), "bert_small_uncased": (4, 512)}
    named["bert_medium_uncased"] = (8, 512)
    for name, (layers, hidden) in named.items():  # the four named ones keep their names
        assert PRETRAINED_REPOS[name] == f"google/bert_uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"
    assert PRETRAINED_REPOS["bert_l6_h256_uncased"] == "google/bert_uncased_L-6_H-256_A-4"
    assert PRETRAINED_REPOS["bert_l12_h768_uncased"] == "google/bert_uncased_L-12_H-768_A-12"
    assert len(set(by_repo)) == len(by_repo)  # one name per repo


def test_chinese_multilingual_and_wwm_repos():
    assert PRETRAINED_REPOS["bert_base_chinese"] == "google-bert/bert-base-chinese"
    assert PRETRAINED_REPOS["bert_base_multilingual_cased"] == "google-bert/bert-base-multilingual-cased"
    assert PRETRAINED_REPOS["bert_base_multilingual_uncased"] == "google-bert/bert-base-multilingual-uncased"
    assert PRETRAINED_REPOS["bert_large_wwm_uncased"] == "google-bert/bert-large-uncased-whole-word-masking"
    assert PRETRAINED_REPOS["bert_large_wwm_cased"] == "google-bert/bert-large-cased-whole-word-masking"
    assert set(PRETRAINED_REPOS) == set(BACKBONE_PRESETS) == set(__import__("keras_bert_zoo").presets())


def _repo_dir(tmp_path, repo, vocab):
    path = tmp_path / repo.replace("/", "--")
    path.mkdir()
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = REPO_TOKENIZER_CONFIGS[repo]
    if config is not None:
        (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "北", "京", "my", "name", "cafe", "café", "##s"]
VOCAB += [f"word{i}" for i in range(30)]  # enough lowercase pieces for the casing to be read from vocab.txt


@pytest.mark.parametrize("repo", sorted(REPO_TOKENIZER_CONFIGS))
def test_table_tokenizer_settings_are_what_hf_reads_from_the_repo(tmp_path, repo):
    path = _repo_dir(tmp_path, repo, VOCAB)
    hf = transformers.BertTokenizer.from_pretrained(str(path))
    # What HF's tokenizer runs: its normalizer's switches (transformers 5's BertTokenizer is tokenizers-backed).
    normalizer = json.loads(hf.backend_tokenizer.normalizer.__getstate__())
    hf_settings = {
        "lowercase": normalizer["lowercase"],
        "strip_accents": normalizer["strip_accents"],
        "tokenize_chinese_chars": normalizer["handle_chinese_chars"],
    }
    assert hf_settings == {
        "lowercase": hf.do_lower_case,
        "strip_accents": hf.strip_accents,
        "tokenize_chinese_chars": hf.tokenize_chinese_chars,
    }
    names = [n for n, r in PRETRAINED_REPOS.items() if r == repo]
    for name in names:
        assert tokenizer_settings(name) == hf_settings, name
    ours = BertTokenizer.from_preset(str(path))
    assert {k: getattr(ours, k) for k in hf_settings} == hf_settings
    text = "My name is Café 北京"
    assert ours.tokenize(text).numpy().tolist() == hf.encode(text, add_special_tokens=False)


def test_preset_names_are_consistent():
    for name in BACKBONE_PRESETS:
        assert name.startswith("bert_") and name == name.lower()
        lowercase = BACKBONE_PRESETS[name]["lowercase"]
        if name.endswith("_uncased"):
            assert lowercase
        if name.endswith("_cased") or name == "bert_base_chinese":
            assert not lowercase
    assert presets.backbone_config("bert_base_chinese")["vocabulary_size"] == 21128
    assert "lowercase" not in presets.backbone_config("bert_base_chinese")
