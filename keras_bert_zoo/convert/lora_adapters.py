"""LoRA adapters in a preset directory, in HF PEFT's files.

A preset of a model with LoRA (`BertBackbone.enable_lora`) holds the frozen weights in
`model.safetensors` (the HF layout, as every preset) and beside them what PEFT's
`save_pretrained` writes: `adapter_config.json` (`peft_type` LORA, `r`, `lora_alpha`,
`target_modules`, `bias` "lora_only") and `adapter_model.safetensors` with
`base_model.model.[bert.]encoder.layer.N.attention.self.query.lora_A.weight` `[r, in]`,
`...lora_B.weight` `[out, r]` and the targeted layers' trained biases
(`...query.base_layer.bias`). So `PeftModel.from_pretrained(BertFor...from_pretrained(dir),
dir)` computes what our model computes, and `from_preset(dir)` reads a directory where
PEFT saved its adapter beside the base model's files.

What is read: LoRA adapters with one rank and scale in every layer, on the encoder
layers' Dense sub-layers; DoRA, rsLoRA, per-layer ranks or a subset of the layers are
refused with a message naming the setting. Other tensors of the adapter file (a task
head PEFT trained as a `modules_to_save` copy, the biases) replace the model file's.
"""

import os
import re

from keras_bert_zoo.convert.safetensors_io import read_safetensors, write_safetensors
from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.files import read_json, write_json
from keras_bert_zoo.models.weight_names import BLOCK_DENSE_NAMES, lora_weight_specs

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "write_adapter", "read_adapter"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PEFT_PREFIX = "base_model.model."
# PEFT's task types of the HF classes our task models save as (its model class wraps the head).
_TASK_TYPES = {
    "BertModel": "FEATURE_EXTRACTION",
    "BertForSequenceClassification": "SEQ_CLS",
    "BertForTokenClassification": "TOKEN_CLS",
    "BertForQuestionAnswering": "QUESTION_ANS",
}
_ADAPTER_NAME = re.compile(r"^(?:bert\.)?encoder\.layer\.(\d+)\.(.+)\.lora_A\.weight$")


def write_adapter(path, backbone, settings, architecture, prefix, head_specs=()):
    """Writes the adapter files of `backbone` (LoRA `settings`, see `models.lora.lora_settings`)
    into `path`, or removes stale ones when `settings` is None. A task head PEFT wraps for
    the architecture (`classifier`, `qa_outputs`) is written too, as PEFT's `modules_to_save`."""
    if settings is None:
        for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
            if os.path.exists(os.path.join(path, name)):
                os.remove(os.path.join(path, name))
        return
    from keras_bert_zoo.models.weight_names import spec_value

    tensors = {}
    for spec in lora_weight_specs(backbone):
        tensors[_PEFT_PREFIX + prefix + spec.name] = spec_value(spec).T  # kernels stored [out, in]
    for i, block in enumerate(backbone.encoder_layers):  # bias "lora_only": the targeted layers' biases
        for name in settings["target_layer_names"]:
            bias = _numpy(getattr(block, name).bias)
            tensors[f"{_PEFT_PREFIX}{prefix}encoder.layer.{i}.{BLOCK_DENSE_NAMES[name]}.base_layer.bias"] = bias
    task_type = _TASK_TYPES.get(architecture)
    head_specs = list(head_specs) if task_type not in (None, "FEATURE_EXTRACTION") else []
    for spec in head_specs:  # PEFT trains (and saves, and loads) a copy of the head
        value = spec_value(spec)
        tensors[_PEFT_PREFIX + spec.name] = value.T if spec.kind == "kernel" else value
    modules = sorted({spec.name.rsplit(".", 1)[0] for spec in head_specs}) or None
    targets = [BLOCK_DENSE_NAMES[n].split(".")[-1] for n in settings["target_layer_names"]]
    if len(set(targets)) < len(targets) or any("dense" in t for t in targets):  # "dense" names 4 layers
        targets = (
            r".*encoder\.layer\.\d+\.("
            + "|".join(re.escape(BLOCK_DENSE_NAMES[n]) for n in settings["target_layer_names"])
            + ")"
        )
    config = {
        "peft_type": "LORA",
        "task_type": task_type,
        "r": settings["rank"],
        "lora_alpha": settings["alpha"],
        "target_modules": targets,
        "bias": "lora_only",
        "lora_dropout": 0.0,
        "fan_in_fan_out": False,
        "use_dora": False,
        "use_rslora": False,
        "modules_to_save": modules,
        "inference_mode": True,
        "base_model_name_or_path": None,
        "rank_pattern": {},
        "alpha_pattern": {},
        "layers_to_transform": None,
        "init_lora_weights": True,
    }
    write_safetensors(tensors, os.path.join(path, ADAPTER_WEIGHTS))
    write_json(os.path.join(path, ADAPTER_CONFIG), config)


def _numpy(variable):
    import numpy as np
    from keras import ops

    return np.asarray(ops.convert_to_numpy(variable), dtype=np.float32)


def read_adapter(path, num_layers):
    """`(settings, tensors)` of the adapter files in `path` (None when it has none).

    `settings` is `{"rank", "alpha", "target_layer_names"}` for `BertBackbone.enable_lora`;
    `tensors` maps the names without PEFT's prefix (`bert.encoder.layer.0.attention.self.query.lora_A.weight`,
    `bert.encoder...query.bias`, `classifier.weight`: the model file's names) to arrays, which
    replace the model file's.
    """
    config_path = os.path.join(path, ADAPTER_CONFIG)
    if not os.path.isfile(config_path):
        return None
    config = read_json(config_path, what="LoRA adapter config")
    weights = os.path.join(path, ADAPTER_WEIGHTS)
    if not os.path.isfile(weights):
        raise CheckpointError(
            f"{path} has {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS}; restore the adapter file "
            f"or remove {ADAPTER_CONFIG} to load the model without its adapters."
        )
    _check_config(config, config_path)
    tensors = {}
    for name, value in read_safetensors(weights).items():
        name = name[len(_PEFT_PREFIX) :] if name.startswith(_PEFT_PREFIX) else name
        tensors[name.replace(".base_layer.", ".")] = value
    layers = {}
    for name in tensors:
        match = _ADAPTER_NAME.match(name)
        if match:
            layers.setdefault(match.group(2), set()).add(int(match.group(1)))
    by_hf = {hf: ours for ours, hf in BLOCK_DENSE_NAMES.items()}
    unknown = [hf for hf in layers if hf not in by_hf]
    partial = [hf for hf, found in layers.items() if found != set(range(num_layers))]
    if not layers or unknown or partial:
        raise CheckpointError(
            f"{weights}: LoRA adapters are read for the encoder layers' Dense sub-layers "
            f"({', '.join(by_hf)}) in every layer; this file has "
            f"{'none' if not layers else 'them on ' + ', '.join(unknown or partial)}"
            f"{' in only some layers' if partial and not unknown else ''}."
        )
    names = [by_hf[hf] for hf in BLOCK_DENSE_NAMES.values() if hf in layers]
    settings = {
        "rank": int(config["r"]),
        "alpha": float(config.get("lora_alpha", config["r"])),
        "target_layer_names": names,
    }
    return settings, tensors


def _check_config(config, config_path):
    refused = [
        (key, value)
        for key, value in (
            ("peft_type", config.get("peft_type", "LORA")),
            ("use_dora", config.get("use_dora")),
            ("use_rslora", config.get("use_rslora")),
            ("rank_pattern", config.get("rank_pattern")),
            ("alpha_pattern", config.get("alpha_pattern")),
            ("layers_to_transform", config.get("layers_to_transform")),
            ("fan_in_fan_out", config.get("fan_in_fan_out")),
        )
        if value not in (None, False, {}, "LORA", [])
    ]
    if refused:
        key, value = refused[0]
        raise CheckpointError(
            f"{config_path}: {key}={value!r} is not supported; LoRA adapters with one rank and "
            "scale in every layer are (peft_type LORA, no DoRA or rsLoRA)."
        )
    if not isinstance(config.get("r"), int) or config["r"] < 1:
        raise CheckpointError(f"{config_path}: r={config.get('r')!r}; a LoRA rank is a positive integer.")
