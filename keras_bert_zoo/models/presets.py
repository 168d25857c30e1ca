"""The architecture table: every BERT size this package knows by name.

Sizes follow google-research/bert's released models (Turc et al. 2019 for the small
ones). A preset name builds the architecture with random weights; real weights come
from a local checkpoint directory (see `BertBackbone.from_preset`).
"""

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

# Keys of a preset entry that describe the tokenizer, not the backbone.
TOKENIZER_KEYS = ("lowercase",)


def backbone_config(name):
    """The `BertBackbone` constructor arguments for a preset name."""
    if name not in BACKBONE_PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}. Known presets: {', '.join(sorted(BACKBONE_PRESETS))}; "
            "or pass a local checkpoint directory."
        )
    return {k: v for k, v in BACKBONE_PRESETS[name].items() if k not in TOKENIZER_KEYS}
