"""The architecture table: every BERT size this package knows by name.

Sizes follow google-research/bert's released models (Turc et al. 2019 for the small
ones). A preset name loads the official pretrained checkpoint of that size from the
Hugging Face Hub (`PRETRAINED_REPOS`, resolved by `keras_bert_zoo.convert.hub` through
`huggingface_hub`'s cache); `load_weights=False` builds the architecture alone, randomly
initialised, with nothing fetched.
"""

from keras_bert_zoo.errors import CheckpointError, UsageError

__all__ = ["BACKBONE_PRESETS", "PRETRAINED_REPOS", "pretrained_repo", "backbone_config", "check_architecture"]

_SIZES = {
    # name: (num_layers, hidden_dim, num_heads)
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}
_VOCABULARY_SIZES = {"uncased": 30522, "cased": 28996}


def _build_table():
    table = {}
    for size, (layers, hidden, heads) in _SIZES.items():
        for casing, vocab in _VOCABULARY_SIZES.items():
            table[f"bert_{size}_{casing}"] = {
                "vocabulary_size": vocab,
                "num_layers": layers,
                "num_heads": heads,
                "hidden_dim": hidden,
                "intermediate_dim": 4 * hidden,
                "max_sequence_length": 512,
                "num_segments": 2,
                "lowercase": casing == "uncased",
            }
    return table


BACKBONE_PRESETS = _build_table()

# The official checkpoint of each preset on the Hugging Face Hub. Base and large are
# Google's original release (moved to the `google-bert` org); tiny/mini/small/medium are
# Turc et al.'s "Well-Read Students Learn Better" miniatures, released uncased only,
# so the small cased presets have no checkpoint (None): they exist as architectures.
PRETRAINED_REPOS = {
    "bert_tiny_uncased": "google/bert_uncased_L-2_H-128_A-2",
    "bert_mini_uncased": "google/bert_uncased_L-4_H-256_A-4",
    "bert_small_uncased": "google/bert_uncased_L-4_H-512_A-8",
    "bert_medium_uncased": "google/bert_uncased_L-8_H-512_A-8",
    "bert_base_uncased": "google-bert/bert-base-uncased",
    "bert_large_uncased": "google-bert/bert-large-uncased",
    "bert_base_cased": "google-bert/bert-base-cased",
    "bert_large_cased": "google-bert/bert-large-cased",
    "bert_tiny_cased": None,
    "bert_mini_cased": None,
    "bert_small_cased": None,
    "bert_medium_cased": None,
}


def pretrained_repo(name):
    """The Hub repo id of a preset's official checkpoint, or None when Google released none.

    Examples:
    >>> from keras_bert_zoo.models.presets import pretrained_repo
    >>> pretrained_repo("bert_base_uncased"), pretrained_repo("bert_tiny_cased")
    ('google-bert/bert-base-uncased', None)
    """
    backbone_config(name)  # unknown names: the error listing the known ones
    return PRETRAINED_REPOS[name]


# Keys of a preset entry that describe the tokenizer, not the backbone.
_TOKENIZER_KEYS = ("lowercase",)


def backbone_config(name):
    """The `BertBackbone` constructor arguments for a preset name."""
    if name not in BACKBONE_PRESETS:
        raise UsageError(
            f"Unknown preset {name!r}. Known presets: {', '.join(sorted(BACKBONE_PRESETS))}; "
            "or pass a local checkpoint directory."
        )
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
