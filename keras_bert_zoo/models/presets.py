"""The architecture table: every BERT size this package knows by name.

Sizes follow google-research/bert's released models: base and large (cased, uncased, and
the whole-word-masking large pair), the 24 miniatures of Turc et al. 2019 ("Well-Read
Students Learn Better"), the Chinese model and the two multilingual ones. A preset name
loads the official pretrained checkpoint of that size from the Hugging Face Hub
(`PRETRAINED_REPOS`, resolved by `keras_bert_zoo.convert.hub` through `huggingface_hub`'s
cache); `load_weights=False` builds the architecture alone, randomly initialised, with
nothing fetched.

Each entry also records the tokenizer settings HF's `BertTokenizer` reads from that repo
(`lowercase`, `strip_accents`, `tokenize_chinese_chars`): `do_lower_case` from the repo's
`tokenizer_config.json`, HF's defaults for what it leaves out (`strip_accents=None`: accents
are stripped exactly when lowercasing; `tokenize_chinese_chars=True`). Loading a name reads
the repo's own files; these entries say what that gives.

Examples:
>>> from keras_bert_zoo.models.presets import BACKBONE_PRESETS, pretrained_repo
>>> pretrained_repo("bert_base_chinese"), BACKBONE_PRESETS["bert_base_chinese"]["vocabulary_size"]
('google-bert/bert-base-chinese', 21128)
>>> pretrained_repo("bert_l6_h256_uncased")
'google/bert_uncased_L-6_H-256_A-4'
"""

from keras_bert_zoo.errors import CheckpointError, UsageError

__all__ = [
    "BACKBONE_PRESETS",
    "PRETRAINED_REPOS",
    "pretrained_repo",
    "tokenizer_settings",
    "backbone_config",
    "check_architecture",
    "known_presets_hint",
]

_SIZES = {
    # name: (num_layers, hidden_dim, num_heads)
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}
# Google's English WordPiece vocabularies (vocab.txt of uncased_L-12_H-768_A-12 / cased_L-12_H-768_A-12).
_VOCABULARY_SIZES = {"uncased": 30522, "cased": 28996}
# Turc et al.'s grid: every depth with every width, heads = width / 64, uncased only. Four have names above.
_TURC_LAYERS = (2, 4, 6, 8, 10, 12)
_TURC_WIDTHS = (128, 256, 512, 768)


def _entry(layers, hidden, heads, vocab, lowercase, repo):
    return {
        "vocabulary_size": vocab,
        "num_layers": layers,
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": 4 * hidden,
        "max_sequence_length": 512,
        "num_segments": 2,
        # What HF's BertTokenizer reads from the repo (see the module docstring).
        "lowercase": lowercase,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "repo": repo,
    }


def _build_table():
    table = {}
    named = {}
    for size, (layers, hidden, heads) in _SIZES.items():
        for casing, vocab in _VOCABULARY_SIZES.items():
            if size in ("base", "large"):
                # Google's original release, moved to the `google-bert` org. Their tokenizer_config.json
                # says {"do_lower_case": true} (uncased) / {"do_lower_case": false} (cased).
                repo = f"google-bert/bert-{size}-{casing}"
            elif casing == "uncased":
                repo = f"google/bert_uncased_L-{layers}_H-{hidden}_A-{heads}"
                named[(layers, hidden)] = size
            else:
                repo = None  # Turc et al. released the small sizes uncased only: an architecture, no checkpoint
            table[f"bert_{size}_{casing}"] = _entry(layers, hidden, heads, vocab, casing == "uncased", repo)
    # The rest of the 24 miniatures. Their repos hold no tokenizer_config.json: HF's default
    # do_lower_case=True applies (their vocab.txt is Google's uncased one, which is also what
    # this package infers from it).
    for layers in _TURC_LAYERS:
        for hidden in _TURC_WIDTHS:
            if (layers, hidden) in named:
                continue
            heads = hidden // 64
            repo = f"google/bert_uncased_L-{layers}_H-{hidden}_A-{heads}"
            table[f"bert_l{layers}_h{hidden}_uncased"] = _entry(layers, hidden, heads, 30522, True, repo)
    # Whole-word masking (google-research/bert, May 2019): BERT-Large only, cased and uncased; no base
    # release. tokenizer_config.json: {"do_lower_case": true} / {"do_lower_case": false, ...}.
    for casing, vocab in _VOCABULARY_SIZES.items():
        repo = f"google-bert/bert-large-{casing}-whole-word-masking"
        table[f"bert_large_wwm_{casing}"] = _entry(24, 1024, 16, vocab, casing == "uncased", repo)
    # Chinese (simplified and traditional, character vocabulary). Its tokenizer_config.json is
    # {"do_lower_case": false}, so HF keeps case (Latin words outside the vocabulary's lowercase
    # pieces become [UNK]); Google's own run_*.py lowercase it. We follow the repo, as HF does.
    table["bert_base_chinese"] = _entry(12, 768, 12, 21128, False, "google-bert/bert-base-chinese")
    # Multilingual, 104 languages: tokenizer_config.json {"do_lower_case": false, "model_max_length": 512}.
    table["bert_base_multilingual_cased"] = _entry(
        12, 768, 12, 119547, False, "google-bert/bert-base-multilingual-cased"
    )
    # Multilingual, 102 languages, lowercased and accent-stripped: {"do_lower_case": true, "model_max_length": 512}.
    table["bert_base_multilingual_uncased"] = _entry(
        12, 768, 12, 105879, True, "google-bert/bert-base-multilingual-uncased"
    )
    return table


BACKBONE_PRESETS = _build_table()

# The official checkpoint of each preset on the Hugging Face Hub, or None where Google released
# none (the small cased sizes exist as architectures only).
PRETRAINED_REPOS = {name: entry["repo"] for name, entry in BACKBONE_PRESETS.items()}


def pretrained_repo(name):
    """The Hub repo id of a preset's official checkpoint, or None when Google released none.

    Examples:
    >>> from keras_bert_zoo.models.presets import pretrained_repo
    >>> pretrained_repo("bert_base_uncased"), pretrained_repo("bert_tiny_cased")
    ('google-bert/bert-base-uncased', None)
    """
    backbone_config(name)  # unknown names: the error listing the known ones
    return PRETRAINED_REPOS[name]


# Keys of a preset entry that describe the tokenizer or the source, not the backbone.
_TOKENIZER_KEYS = ("lowercase", "strip_accents", "tokenize_chinese_chars", "repo")


def tokenizer_settings(name):
    """The `BertTokenizer` options HF reads from a preset's repo (`lowercase`, `strip_accents`,
    `tokenize_chinese_chars`).

    Examples:
    >>> from keras_bert_zoo.models.presets import tokenizer_settings
    >>> tokenizer_settings("bert_base_multilingual_uncased")
    {'lowercase': True, 'strip_accents': None, 'tokenize_chinese_chars': True}
    """
    backbone_config(name)
    return {k: BACKBONE_PRESETS[name][k] for k in _TOKENIZER_KEYS if k != "repo"}


def known_presets_hint(name):
    """The sentence an error about an unknown name ends with: the closest preset names first, then them all.

    Examples:
    >>> from keras_bert_zoo.models.presets import known_presets_hint
    >>> known_presets_hint("bert_base_chinse").split(". ")[0]
    'Closest preset names: bert_base_chinese, bert_base_cased, bert_base_uncased'
    """
    import difflib

    close = difflib.get_close_matches(str(name), BACKBONE_PRESETS, n=3, cutoff=0.75)
    closest = f"Closest preset names: {', '.join(close)}. " if close else ""
    return f"{closest}Known presets: {', '.join(sorted(BACKBONE_PRESETS))}."


def backbone_config(name):
    """The `BertBackbone` constructor arguments for a preset name."""
    if name not in BACKBONE_PRESETS:
        raise UsageError(f"Unknown preset {name!r}; pass a local checkpoint directory. {known_presets_hint(name)}")
    return {k: v for k, v in BACKBONE_PRESETS[name].items() if k not in _TOKENIZER_KEYS}


# Bounds that catch a corrupt config before it allocates: BERT-large is 24 x 1024 x 16.
_ARCHITECTURE_LIMITS = {
    "vocabulary_size": 10**7,
    "num_layers": 1000,
    "num_heads": 1024,
    "hidden_dim": 65_536,
    "intermediate_dim": 10**6,
    "max_sequence_length": 10**6,
    "num_segments": 10**4,
}


def check_architecture(kwargs, source):
    """Raises a `CheckpointError` naming `source` when `BertBackbone` arguments read from a
    checkpoint's config are impossible (every reader checks before building a model)."""
    for key, high in _ARCHITECTURE_LIMITS.items():
        value = kwargs[key]
        if not 1 <= value <= high:
            raise CheckpointError(
                f"{source}: {key} = {value} is impossible (must be 1 to {high:,}); "
                "the config is damaged or not a BERT config."
            )
    if kwargs["hidden_dim"] % kwargs["num_heads"]:
        raise CheckpointError(
            f"{source}: hidden_size {kwargs['hidden_dim']} is not divisible by "
            f"num_attention_heads {kwargs['num_heads']}; fix the config (they come as a pair)."
        )
    if not 0.0 <= kwargs["dropout"] < 1.0 or not kwargs["layer_norm_epsilon"] > 0:
        raise CheckpointError(f"{source}: hidden_dropout_prob must be in [0, 1) and layer_norm_eps positive.")
