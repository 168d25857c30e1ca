"""LoRA on a `BertBackbone`, as KerasHub's `Backbone.enable_lora` does it.

`enable_lora(backbone, rank)` freezes every backbone weight, then gives the `query` and
`value` projections of every encoder layer (KerasHub's default targets) a trainable
low-rank update through Keras' own `Dense.enable_lora`: the layer computes
`x @ (kernel + alpha / rank * a @ b) + bias` with `a` `[in, rank]` (He-uniform) and `b`
`[rank, out]` (zeros, so the model starts where it was). As in KerasHub, a targeted layer
keeps its bias trainable (HF PEFT calls this `bias="lora_only"`); its kernel stays frozen.
A task head (the classifier of `BertClassifier`, ...) is not part of the backbone and
stays trainable.

The adapters go wherever the model goes (`LoraDense` keeps them apart from the kernel):
`.keras` and `save_weights` files, training checkpoints, and `save_to_preset`
directories, which hold the frozen model in `model.safetensors` and the adapters in HF
PEFT's files (`adapter_config.json`, `adapter_model.safetensors`: PEFT loads the
directory as it loads its own). `save_lora_weights` / `load_lora_weights` write and read
the adapters alone (KerasHub's `.lora.h5` files).

Examples:
>>> from keras_bert_zoo import BertBackbone
>>> backbone = BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)
>>> backbone.enable_lora(4)
>>> sorted({w.path.split("/", 1)[1] for w in backbone.trainable_weights})
['query/bias', 'query/lora_kernel_a', 'query/lora_kernel_b', 'value/bias', 'value/lora_kernel_a', 'value/lora_kernel_b']
"""

import os

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.keras_compat import forget_steps
from keras_bert_zoo.models.layers.encoder_block import DENSE_LAYERS
from keras_bert_zoo.models.weight_names import lora_weight_specs

__all__ = ["DEFAULT_TARGETS", "lora_settings", "enable_lora", "save_lora_weights", "load_lora_weights"]

DEFAULT_TARGETS = ("query", "value")  # KerasHub's `default_lora_layer_names()` for BERT


def lora_settings(backbone):
    """`{"rank", "alpha", "target_layer_names"}` of a backbone's LoRA, or None without it."""
    state = {s for block in backbone.encoder_layers for s in block.lora_state()}
    if not state:
        return None
    ((rank, alpha),) = {(r, a) for _, r, a in state}  # enable_lora sets one rank and alpha everywhere
    names = [name for name in DENSE_LAYERS if any(s[0] == name for s in state)]
    return {"rank": int(rank), "alpha": float(alpha), "target_layer_names": names}


def enable_lora(backbone, rank, target_layer_names=None, lora_alpha=None):
    """See `BertBackbone.enable_lora`."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise UsageError(f"LoRA rank={rank!r}; use a positive integer (4 to 16 is usual).")
    names = list(DEFAULT_TARGETS if target_layer_names is None else target_layer_names)
    unknown = [n for n in names if n not in DENSE_LAYERS]
    if unknown or not names:
        raise UsageError(
            f"target_layer_names={names!r}: LoRA targets the encoder layers' Dense sub-layers, "
            f"some of {list(DENSE_LAYERS)} (default {list(DEFAULT_TARGETS)})."
        )
    current = lora_settings(backbone)
    if current is not None:
        raise UsageError(
            f"LoRA is already enabled on this backbone (rank {current['rank']}, "
            f"{current['target_layer_names']}); it can be enabled once per model."
        )
    # Freeze everything, then thaw the targeted layers: their bias stays trainable, and
    # `Dense.enable_lora` freezes their kernel and adds the trainable adapters.
    backbone.trainable = True
    for layer in backbone.layers:
        layer.trainable = False
    for block in backbone.encoder_layers:
        for name in names:
            layer = getattr(block, name)
            layer.trainable = True
            layer.enable_lora(rank, lora_alpha=lora_alpha)
    # Steps traced before ran without the adapters (task models check this themselves).
    forget_steps(backbone)


def save_lora_weights(backbone, filepath):
    """See `BertBackbone.save_lora_weights`."""
    import h5py

    settings = _require_lora(backbone)
    filepath = os.fspath(filepath)
    if not filepath.endswith(".lora.h5"):
        raise UsageError(f"{filepath!r}: a LoRA weights file name ends in `.lora.h5` (KerasHub's rule).")
    tmp = f"{filepath}.tmp-{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        group = f.create_group("lora")
        group["rank"] = settings["rank"]
        group["alpha"] = settings["alpha"]
        group["target_layer_names"] = [n.encode() for n in settings["target_layer_names"]]
        for spec in lora_weight_specs(backbone):
            group[spec.name] = spec.variable.numpy()
    os.replace(tmp, filepath)  # a killed save leaves no half-written file under the name


def load_lora_weights(backbone, filepath):
    """See `BertBackbone.load_lora_weights`."""
    import h5py

    filepath = os.fspath(filepath)
    if not os.path.isfile(filepath):
        raise CheckpointError(f"{filepath!r} does not exist; give a file written by `save_lora_weights`.")
    with h5py.File(filepath, "r") as f:
        if "lora" not in f:
            raise CheckpointError(
                f"{filepath} holds no LoRA weights (no `lora` group); give a file written by `save_lora_weights`."
            )
        group = f["lora"]
        saved = {
            "rank": int(group["rank"][()]),
            "alpha": float(group["alpha"][()]),
            "target_layer_names": [n.decode() for n in group["target_layer_names"][()]],
        }
        current = lora_settings(backbone)
        if current is None:
            enable_lora(backbone, saved["rank"], saved["target_layer_names"], saved["alpha"])
        elif current != saved:
            raise UsageError(
                f"{filepath} holds LoRA weights of rank {saved['rank']} on "
                f"{saved['target_layer_names']}, but this model has rank {current['rank']} on "
                f"{current['target_layer_names']}; both must match (or load into a model without LoRA)."
            )
        specs = lora_weight_specs(backbone)
        missing = [s.name for s in specs if s.name not in group]
        if missing:
            raise CheckpointError(
                f"{filepath} lacks {len(missing)} adapter(s), first {missing[:2]}: it was saved "
                "from a model with fewer layers."
            )
        values = [group[s.name][()] for s in specs]
    for spec, value in zip(specs, values, strict=True):
        if tuple(value.shape) != tuple(spec.variable.shape):
            raise CheckpointError(
                f"{filepath}: adapter {spec.name!r} has shape {tuple(value.shape)}, the model "
                f"expects {tuple(spec.variable.shape)}; it was saved from another architecture."
            )
    for spec, value in zip(specs, values, strict=True):
        spec.variable.assign(value)


def _require_lora(backbone):
    settings = lora_settings(backbone)
    if settings is None:
        raise UsageError("this model has no LoRA layers; call `backbone.enable_lora(rank)` first.")
    return settings
