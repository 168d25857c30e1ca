"""Finds, reads and writes BERT checkpoints in a local directory.

Three layouts are read:
- HF: `config.json` + `model.safetensors` (never `pytorch_model.bin`: it is a pickle).
- Google (google-research/bert): `bert_config.json` + `bert_model.ckpt.*`, read with
  `tf.train.load_checkpoint`.
- Ours, written by `save_to_preset`: the HF layout plus a `keras_bert_zoo` section
  in `config.json` (task, labels, preprocessing), so HF can load it too.
"""

import json
import os

import numpy as np

from keras_bert_zoo.convert.safetensors_io import read_safetensors, write_safetensors
from keras_bert_zoo.convert.weight_table import backbone_weight_specs, google_name
from keras_bert_zoo.files import write_json
from keras_bert_zoo.models.presets import BACKBONE_PRESETS, backbone_config

CONFIG_SECTION = "keras_bert_zoo"

# HF `hidden_act` -> ours. HF's "gelu" is the exact erf form; "gelu_new",
# "gelu_pytorch_tanh" and "gelu_fast" are the tanh approximation.
_HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "relu": "relu",
    "tanh": "tanh",
}


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be loaded as asked; the message says why."""


def _backbone_kwargs(config, fmt):
    """Our `BertBackbone` arguments from an HF or Google config dict."""
    pos_type = config.get("position_embedding_type", "absolute")
    if pos_type != "absolute":
        raise CheckpointError(
            f"position_embedding_type={pos_type!r} is not supported; only 'absolute' "
            "(learned positions, as in BERT) is."
        )
    act = config.get("hidden_act", "gelu")
    if fmt == "google" and act == "gelu":
        # modeling.py's gelu() in google-research/bert is the tanh approximation.
        act = "gelu_approximate"
    elif act in _HF_ACTIVATIONS:
        act = _HF_ACTIVATIONS[act]
    else:
        raise CheckpointError(f"hidden_act={act!r} is not supported; use one of {sorted(_HF_ACTIVATIONS)}.")
    try:
        return {
            "vocabulary_size": int(config["vocab_size"]),
            "num_layers": int(config["num_hidden_layers"]),
            "num_heads": int(config["num_attention_heads"]),
            "hidden_dim": int(config["hidden_size"]),
            "intermediate_dim": int(config["intermediate_size"]),
            "max_sequence_length": int(config.get("max_position_embeddings", 512)),
            "num_segments": int(config.get("type_vocab_size", 2)),
            "dropout": float(config.get("hidden_dropout_prob", 0.1)),
            "activation": act,
            "layer_norm_epsilon": float(config.get("layer_norm_eps", 1e-12)),
            "initializer_range": float(config.get("initializer_range", 0.02)),
        }
    except KeyError as e:
        raise CheckpointError(f"the checkpoint config has no {e.args[0]!r} entry.") from None


def _hf_config(backbone):
    act = {"gelu": "gelu", "gelu_approximate": "gelu_new"}.get(backbone.activation, backbone.activation)
    return {
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": act,
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": backbone.initializer_range,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
    }


class Checkpoint:
    """A checkpoint directory opened for reading.

    Attributes:
        path: the directory.
        format: `"hf"` or `"google"`.
        config: the raw config dict (`config.json` / `bert_config.json`).
        backbone_kwargs: `BertBackbone` arguments derived from it.
        extra: our `keras_bert_zoo` config section (empty for foreign checkpoints).
    """

    def __init__(self, path):
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise CheckpointError(
                f"{path!r} is neither a preset name nor a directory. Known presets: "
                f"{', '.join(sorted(BACKBONE_PRESETS))}."
            )
        self.path = path
        files = set(os.listdir(path))
        if "config.json" in files and "model.safetensors" in files:
            self.format = "hf"
            self.config = _read_json(os.path.join(path, "config.json"))
            self._tensors = read_safetensors(os.path.join(path, "model.safetensors"))
        elif "bert_config.json" in files:
            self.format = "google"
            self.config = _read_json(os.path.join(path, "bert_config.json"))
            self._reader = _open_tf_checkpoint(path, files)
        elif "pytorch_model.bin" in files or "tf_model.h5" in files:
            raise CheckpointError(
                f"{path} holds only a pickled or Keras-2 checkpoint (pytorch_model.bin / tf_model.h5). "
                "Pickles can run code when opened, so they are never loaded here. Convert it once "
                "with safetensors (e.g. `transformers` `save_pretrained(dir, safe_serialization=True)`) "
                "and load the directory with model.safetensors."
            )
        else:
            raise CheckpointError(
                f"{path} is not a BERT checkpoint: expected config.json + model.safetensors (HF) "
                f"or bert_config.json + bert_model.ckpt.* (Google); found {sorted(files)}."
            )
        self.backbone_kwargs = _backbone_kwargs(self.config, self.format)
        self.extra = self.config.get(CONFIG_SECTION, {})

    def file(self, name):
        """Path of a file in the directory, or None when it is absent."""
        path = os.path.join(self.path, name)
        return path if os.path.exists(path) else None

    def get(self, spec):
        """The tensor for a `WeightSpec` in Keras layout, or None when absent."""
        if self.format == "hf":
            value = self._get_hf(spec)
            if value is not None and spec.kind == "kernel":
                value = value.T
            return value
        name = google_name(spec)
        if not self._reader.has_tensor(name):
            return None
        value = self._reader.get_tensor(name)
        return value.T if spec.kind == "kernel" and spec.google_transposed else value

    def _get_hf(self, spec):
        candidates = [spec.name]
        if spec.name.endswith("LayerNorm.weight"):
            candidates.append(spec.name[: -len("weight")] + "gamma")
        if spec.name.endswith("LayerNorm.bias"):
            candidates.append(spec.name[: -len("bias")] + "beta")
        if spec.in_backbone:
            candidates += ["bert." + c for c in candidates]
        for key in candidates:
            if key in self._tensors:
                return np.asarray(self._tensors[key], dtype=np.float32)
        return None


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None


def _open_tf_checkpoint(path, files):
    import tensorflow as tf

    prefixes = sorted(f[: -len(".index")] for f in files if f.endswith(".index"))
    if not prefixes:
        raise CheckpointError(f"{path} has bert_config.json but no TF checkpoint (*.index) beside it.")
    prefix = "bert_model.ckpt" if "bert_model.ckpt" in prefixes else prefixes[-1]
    return tf.train.load_checkpoint(os.path.join(path, prefix))


def assign_weights(checkpoint, specs, required=True):
    """Copies checkpoint tensors into the variables of `specs`, all or nothing.

    Every tensor is read and shape-checked before any variable is written, so a
    checkpoint that does not fit leaves the model untouched.

    Returns:
        True when every spec was found and assigned; False when `required=False`
        and some are missing (then nothing is assigned).
    """
    values = []
    missing = []
    for spec in specs:
        value = checkpoint.get(spec)
        if value is None:
            missing.append(spec.name)
            continue
        expected = tuple(spec.variable.shape)
        if tuple(value.shape) != expected:
            raise CheckpointError(
                f"{checkpoint.path}: tensor {spec.name!r} has shape {tuple(value.shape)}, "
                f"the model expects {expected}. Check that the config matches the weights."
            )
        values.append((spec.variable, value))
    if missing:
        if not required:
            return False
        raise CheckpointError(
            f"{checkpoint.path}: {len(missing)} tensor(s) missing from the checkpoint, "
            f"first {missing[:3]}."
        )
    for variable, value in values:
        variable.assign(value)
    return True


def load_backbone(name_or_path, load_weights=True, **kwargs):
    """See `BertBackbone.from_preset`."""
    from keras_bert_zoo.models.backbone import BertBackbone

    if isinstance(name_or_path, str) and name_or_path in BACKBONE_PRESETS:
        return BertBackbone(**{**backbone_config(name_or_path), **kwargs})
    checkpoint = Checkpoint(name_or_path)
    return backbone_from_checkpoint(checkpoint, load_weights=load_weights, **kwargs)


def backbone_from_checkpoint(checkpoint, load_weights=True, **kwargs):
    from keras_bert_zoo.models.backbone import BertBackbone

    backbone = BertBackbone(**{**checkpoint.backbone_kwargs, **kwargs})
    if load_weights:
        specs = backbone_weight_specs(backbone)
        pooler = {"pooler.dense.weight", "pooler.dense.bias"}
        # Some checkpoints (e.g. sentence encoders saved without pooling layer) have no pooler: keep its init.
        core = [s for s in specs if s.name not in pooler]
        assign_weights(checkpoint, core)
        assign_weights(checkpoint, [s for s in specs if s.name in pooler], required=False)
    return backbone


def save_preset(path, backbone, head_specs=(), architecture="BertModel", extra=None, tied=()):
    """Writes an HF-layout preset: `config.json` + `model.safetensors`.

    Args:
        path: directory to write (created if needed).
        backbone: the `BertBackbone`.
        head_specs: `WeightSpec`s of a task head, written under their own names.
        architecture: HF class name recorded in `config.json` (`BertForSequenceClassification`, ...).
        extra: dict stored under `config.json["keras_bert_zoo"]` (task, labels, ...).
        tied: (name, array) pairs written as extra tensors HF expects, e.g. the MLM decoder.
    """
    os.makedirs(path, exist_ok=True)
    tensors = {}
    prefix = "" if architecture == "BertModel" else "bert."
    for spec in list(backbone_weight_specs(backbone)) + list(head_specs):
        value = np.asarray(spec.variable.numpy(), dtype=np.float32)
        if spec.kind == "kernel":
            value = value.T
        tensors[(prefix if spec.in_backbone else "") + spec.name] = value
    for name, value in tied:
        tensors[name] = np.asarray(value, dtype=np.float32)
    config = _hf_config(backbone)
    config["architectures"] = [architecture]
    config[CONFIG_SECTION] = dict(extra or {})
    write_safetensors(tensors, os.path.join(path, "model.safetensors"))
    write_json(os.path.join(path, "config.json"), config)
