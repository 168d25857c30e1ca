"""Finds, reads and writes BERT checkpoints in a local directory.

Three layouts are read:
- HF: `config.json` + the weights in `model.safetensors`, else in `tf_model.h5` (HF's TF2
  classes' file, HDF5 read with h5py: `tf_h5_io`); never `pytorch_model.bin`: it is a pickle.
- Google (google-research/bert): `bert_config.json` + `bert_model.ckpt.*`, read with
  `tf.train.load_checkpoint`.
- Ours, written by `save_to_preset`: the HF layout plus a `keras_bert_zoo` section
  in `config.json` (task, labels, preprocessing), so HF can load it too; with LoRA, HF
  PEFT's adapter files beside it (`lora_adapters`).
"""

import json
import os
import re

import numpy as np

from keras_bert_zoo.convert.lora_adapters import read_adapter, write_adapter
from keras_bert_zoo.convert.safetensors_io import SAFE_FILE_FIXES, read_safetensors, write_safetensors
from keras_bert_zoo.convert.tf_h5_io import read_tf_h5
from keras_bert_zoo.errors import CheckpointError, UnsafeFileError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.loading import CONFIG_SECTION
from keras_bert_zoo.models.lora import lora_settings
from keras_bert_zoo.models.presets import backbone_config, check_architecture, known_presets_hint
from keras_bert_zoo.models.weight_names import backbone_weight_specs, google_name, spec_value

__all__ = [
    "HF_WEIGHT_FILES",
    "hf_weights_file",
    "Checkpoint",
    "refuse_pickles",
    "open_checkpoint",
    "read_architecture",
    "load_backbone",
    "save_preset",
]

# The HF weight files read, in order of preference: both are data (no code runs when they are read).
HF_WEIGHT_FILES = ("model.safetensors", "tf_model.h5")
_READERS = {"model.safetensors": read_safetensors, "tf_model.h5": read_tf_h5}


def hf_weights_file(files):
    """The first of `HF_WEIGHT_FILES` among `files` (names), or None."""
    return next((name for name in HF_WEIGHT_FILES if name in files), None)


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


def _backbone_kwargs(config, fmt, source="the checkpoint config"):
    """Our `BertBackbone` arguments from an HF or Google config dict, checked to make a model."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{source} holds a JSON {type(config).__name__}, not an object of settings.")
    pos_type = config.get("position_embedding_type", "absolute")
    if pos_type != "absolute":
        raise CheckpointError(
            f"{source}: position_embedding_type={pos_type!r} is not supported; only 'absolute' "
            "(learned positions, as in BERT) is."
        )
    act = config.get("hidden_act", "gelu")
    if fmt == "google" and act == "gelu":
        # modeling.py's gelu() in google-research/bert is the tanh approximation.
        act = "gelu_approximate"
    elif act in _HF_ACTIVATIONS:
        act = _HF_ACTIVATIONS[act]
    else:
        raise CheckpointError(f"{source}: hidden_act={act!r} is not supported; use one of {sorted(_HF_ACTIVATIONS)}.")
    try:
        kwargs = {
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
        raise CheckpointError(f"{source} has no {e.args[0]!r} entry; it is not a BERT config.") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source} has a value of the wrong type ({e}); sizes are integers.") from None
    check_architecture(kwargs, source)
    return kwargs


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

    `get(spec)` remembers which tensors were read, so `unused_tensors()` can name the
    ones a model left behind (a dropped head, an extra layer the config does not have).
    """

    def __init__(self, path):
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise CheckpointError(f"{path!r} is neither a preset name nor a directory. {known_presets_hint(path)}")
        self.path = path
        files = set(os.listdir(path))
        refuse_pickles(path, files)
        weights = hf_weights_file(files)
        if "config.json" in files and weights:
            self.format = "hf"
            self.config = _read_json(os.path.join(path, "config.json"))
            self._tensors = _READERS[weights](os.path.join(path, weights))
        elif "bert_config.json" in files:
            self.format = "google"
            self.config = _read_json(os.path.join(path, "bert_config.json"))
            self._reader = _open_tf_checkpoint(path, files)
        elif any(_is_pickle_name(f) for f in files):
            found = sorted(f for f in files if _is_pickle_name(f))
            raise UnsafeFileError(
                f"{path} holds only a pickled checkpoint ({', '.join(found)}). "
                f"Pickles can run code when opened, so they are never loaded here. {SAFE_FILE_FIXES}"
            )
        else:
            raise CheckpointError(
                f"{path} is not a BERT checkpoint: expected config.json + model.safetensors or tf_model.h5 (HF) "
                f"or bert_config.json + bert_model.ckpt.* (Google); found {sorted(files)}."
            )
        config_name = "config.json" if self.format == "hf" else "bert_config.json"
        self.backbone_kwargs = _backbone_kwargs(self.config, self.format, os.path.join(path, config_name))
        self.extra = self.config.get(CONFIG_SECTION, {})
        self._used = set()
        # LoRA adapters in PEFT's files beside the weights: their tensors are read as the model file's.
        self.lora = None
        adapter = read_adapter(path, self.backbone_kwargs["num_layers"]) if self.format == "hf" else None
        if adapter is not None:
            self.lora, tensors = adapter
            self._tensors.update(tensors)

    def tensor_names(self):
        """Every tensor name stored in the checkpoint, sorted."""
        if self.format == "hf":
            return sorted(self._tensors)
        return sorted(self._reader.get_variable_to_shape_map())

    def tensor_shape(self, name):
        """The stored shape of tensor `name` (as stored: HF kernels are `[out, in]`)."""
        if self.format == "hf":
            return tuple(self._tensors[name].shape)
        return tuple(self._reader.get_variable_to_shape_map()[name])

    def unused_tensors(self, backbone_only=False):
        """Names of the stored tensors no `get` has read, except buffers and optimizer state.

        Args:
            backbone_only: keep only names of backbone weights (HF `embeddings.*`,
                `encoder.*`, `pooler.*`, with or without `bert.`; Google `bert/*`), e.g.
                the layers of a deeper model than the config says.
        """
        names = [n for n in self.tensor_names() if n not in self._used and not _IGNORED.search(n)]
        if backbone_only:
            names = [n for n in names if _BACKBONE_NAME[self.format].match(n)]
        return names

    def head_tensor_names(self):
        """Stored weights outside the backbone (task heads: `cls.*`, `classifier.*`, ...)."""
        return [n for n in self.tensor_names() if not _IGNORED.search(n) and not _BACKBONE_NAME[self.format].match(n)]

    def file(self, name):
        """Path of a file in the directory, or None when it is absent."""
        path = os.path.join(self.path, name)
        return path if os.path.exists(path) else None

    def name_of(self, spec):
        """The name `spec` has in this checkpoint's layout, for messages (HF names without `bert.`)."""
        return spec.name if self.format == "hf" else google_name(spec)

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
        self._used.add(name)
        import tensorflow as tf

        try:
            value = self._reader.get_tensor(name)
        except tf.errors.OpError as e:
            raise CheckpointError(
                f"{self.path}: tensor {name!r} cannot be read from the TF checkpoint "
                f"({' '.join(str(e).split())[:200]}); the .data file is damaged."
            ) from None
        return value.T if spec.kind == "kernel" and spec.google_transposed else value

    def _get_hf(self, spec):
        candidates = [spec.name]
        if spec.name.endswith("LayerNorm.weight"):
            candidates.append(spec.name[: -len("weight")] + "gamma")
        if spec.name.endswith("LayerNorm.bias"):
            candidates.append(spec.name[: -len("bias")] + "beta")
        if spec.in_backbone:
            candidates += ["bert." + c for c in candidates]
        candidates += _HF_ALIASES.get(spec.name, [])
        for key in candidates:
            if key in self._tensors:
                self._used.add(key)
                return np.asarray(self._tensors[key], dtype=np.float32)
        return None


# Stored tensors that are not weights of a model: HF buffers; TF1 optimizer slots,
# step counters and loss-scale state (fine-tuned Google checkpoints carry them).
_IGNORED = re.compile(
    r"(^|[./])position_ids$|/adam_[mv]$|/Adam(_\d+)?$|(^|/)global_step$|"
    r"^beta[12]_power$|loss_scale|good_steps"
)
_BACKBONE_NAME = {"hf": re.compile(r"^(bert\.)?(embeddings|encoder|pooler)\."), "google": re.compile(r"^bert/")}
# HF checkpoints that were saved with the tied MLM bias under the decoder's name only.
_HF_ALIASES = {"cls.predictions.bias": ["cls.predictions.decoder.bias"]}


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:  # UnicodeDecodeError too
        raise CheckpointError(
            f"{path} is not valid JSON ({e}); restore the file from the checkpoint's source."
        ) from None


# Pickle-based files (torch.save, joblib, pickle): opening them can run any code.
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".joblib", ".ckpt.pt")
# A pickle starts with the PROTO opcode (0x80) and a protocol number; torch.save's zip starts with "PK".
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")


def _is_pickle_name(name):
    return name.endswith(_PICKLE_SUFFIXES) and name != "vocab.bin"


def refuse_pickles(path, files=None):
    """Raises `UnsafeFileError` if the weights file the loader would read is a pickle in disguise.

    Pickles are recognised by their first bytes, never opened with `pickle`:
    `model.safetensors` that starts like a pickle or a torch zip is refused.
    """
    files = set(os.listdir(path)) if files is None else files
    if "model.safetensors" in files:
        weights = os.path.join(path, "model.safetensors")
        with open(weights, "rb") as f:
            head = f.read(4)
        if head.startswith(_PICKLE_MAGIC):
            raise UnsafeFileError(
                f"{weights} is a pickle (torch.save format), not safetensors; pickles can run code when "
                "opened, so it is never loaded. Convert the original with safetensors "
                "(`save_pretrained(dir, safe_serialization=True)`)."
            )


def _open_tf_checkpoint(path, files):
    import tensorflow as tf

    prefixes = sorted(f[: -len(".index")] for f in files if f.endswith(".index"))
    if not prefixes:
        raise CheckpointError(f"{path} has bert_config.json but no TF checkpoint (*.index) beside it.")
    prefix = "bert_model.ckpt" if "bert_model.ckpt" in prefixes else prefixes[-1]
    try:
        return tf.train.load_checkpoint(os.path.join(path, prefix))
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(
            f"{os.path.join(path, prefix)}: the TF checkpoint cannot be read "
            f"({' '.join(str(e).split())[:200]}); its .index and .data files are damaged or "
            "do not belong together."
        ) from None


def open_checkpoint(path):
    """The checkpoint in directory `path`: a KerasHub / keras-nlp preset (its config.json has
    a `registered_name`), else HF, Google or ours (`Checkpoint`)."""
    from keras_bert_zoo.convert.keras_hub_format import KerasHubCheckpoint, is_keras_hub_preset

    if is_keras_hub_preset(path):
        return KerasHubCheckpoint(path)
    return Checkpoint(path)


def read_architecture(name_or_path):
    """`BertBackbone` arguments of a preset name or checkpoint directory, from its config
    file only (no weights are read), so checks before training stay cheap."""
    if loading.is_preset_name(name_or_path):  # a directory of the same name is read instead
        return backbone_config(name_or_path)
    from keras_bert_zoo.convert.keras_hub_format import is_keras_hub_preset

    if is_keras_hub_preset(name_or_path):
        return open_checkpoint(name_or_path).backbone_kwargs
    for name, fmt in (("config.json", "hf"), ("bert_config.json", "google")):
        path = os.path.join(str(name_or_path), name)
        if os.path.isfile(path):
            return _backbone_kwargs(_read_json(path), fmt, path)
    return Checkpoint(name_or_path).backbone_kwargs  # raises the checkpoint's own clear error


def load_backbone(name_or_path, load_weights=True, **kwargs):
    """See `BertBackbone.from_preset`."""
    from keras_bert_zoo.models.backbone import BertBackbone

    return BertBackbone.from_preset(name_or_path, load_weights=load_weights, **kwargs)


def save_preset(path, backbone, head_specs=(), architecture="BertModel", extra=None, tied=(), include_pooler=True):
    """Writes an HF-layout preset: `config.json` + `model.safetensors`.

    Args:
        path: directory to write (created if needed).
        backbone: the `BertBackbone`.
        head_specs: `WeightSpec`s of a task head, written under their own names.
        architecture: HF class name recorded in `config.json` (`BertForSequenceClassification`, ...).
        extra: dict stored under `config.json["keras_bert_zoo"]` (task, labels, ...).
        tied: (name, array) pairs written as extra tensors HF expects, e.g. the MLM decoder.
        include_pooler: False leaves the pooler out, as HF's task models without one
            (`BertForTokenClassification`) expect.
    """
    os.makedirs(path, exist_ok=True)
    tensors = {}
    prefix = "" if architecture == "BertModel" else "bert."
    specs = [s for s in backbone_weight_specs(backbone) if include_pooler or not s.name.startswith("pooler.")]
    for spec in specs + list(head_specs):
        value = spec_value(spec)
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
    # With LoRA: the kernels above are the frozen ones, the adapters go to PEFT's files.
    write_adapter(path, backbone, lora_settings(backbone), architecture, prefix, head_specs)


# Models load and save through keras_bert_zoo.models.loading; these are its file formats.
loading.register_checkpoint_reader(open_checkpoint)
loading.register_preset_writer(save_preset)
