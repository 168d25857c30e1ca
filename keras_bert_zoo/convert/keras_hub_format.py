"""KerasHub / keras-nlp BERT presets, read without importing KerasHub (written by `keras_hub_writer`).

A KerasHub preset directory (what `keras_hub.models.BertBackbone.save_to_preset` and
the tasks' `save_to_preset` write; keras-nlp wrote the same with `keras_nlp>` names):

    config.json                   {"registered_name": "keras_hub>BertBackbone", "config": {sizes}}
    model.weights.h5              the backbone's variables, Keras 3's weights layout
    tokenizer.json                {"registered_name": "keras_hub>BertTokenizer", "config": {lowercase, ...}}
    assets/tokenizer/vocabulary.txt
    task.json, task.weights.h5    a task (BertTextClassifier, BertMaskedLM): its config, its head
    preprocessor.json             the task's preprocessor (sequence_length, truncate)

The `.weights.h5` files are HDF5, read and written with h5py (it comes with Keras): data
only, nothing in them can run code. Keras 3 lays a model's variables out as
`layers/<class name in snake case, numbered in layer order>/.../vars/<index>`, each
`vars` group naming its layer in an attribute; layers are found here by that name
(`token_embedding`, `transformer_layer_3`, ...), so the file's numbering does not matter
when reading, and is reproduced exactly when writing.

What KerasHub's BERT computes, carried over so the outputs agree:
- the encoder's GELU is the tanh form (`gelu_approximate`), LayerNorm epsilon 1e-12;
- `BertMaskedLM`'s transform uses the exact erf GELU and LayerNorm epsilon 1e-5
  (KerasHub's `MaskedLMHead` defaults), kept as `BertPretrainer(mlm_activation=...,
  mlm_layer_norm_epsilon=...)`;
- its uncased tokenizer lowercases (case folding) *without* stripping accents
  (`strip_accents: false`), unlike HF's `do_lower_case`; the saved option is used as is;
- attention kernels are `EinsumDense` `[hidden, heads, head_dim]` (output
  `[heads, head_dim, hidden]`): the same numbers as our `[hidden, hidden]` Dense, reshaped.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo import BertBackbone
>>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4,
...                         intermediate_dim=8, activation="gelu_approximate")
>>> path = tempfile.mkdtemp()
>>> backbone.save_to_preset(path, format="keras_hub")
>>> sorted(os.listdir(path))
['config.json', 'metadata.json', 'model.weights.h5']
>>> BertBackbone.from_preset(path).count_params() == backbone.count_params()
True
"""

import json
import os

import numpy as np

from keras_bert_zoo.convert.keras_hub_names import (
    HEAD_KEYS,
    HEAD_TABLES,
    backbone_keys,
    backbone_layer_order,
    backbone_table,
)
from keras_bert_zoo.errors import CheckpointError, MissingPathError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.presets import check_architecture

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "TASK_FILE",
    "TASK_WEIGHTS_FILE",
    "TOKENIZER_FILE",
    "PREPROCESSOR_FILE",
    "METADATA_FILE",
    "VOCABULARY_ASSET",
    "TASKS",
    "KERAS_HUB_TASKS",
    "KERAS_HUB_VERSION",
    "registered_class",
    "is_keras_hub_preset",
    "backbone_table",
    "backbone_layer_order",
    "backbone_keys",
    "KerasHubCheckpoint",
]

_PREFIXES = ("keras_hub>", "keras_nlp>")  # keras-nlp was renamed KerasHub in 2024
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.weights.h5"
TASK_FILE, TASK_WEIGHTS_FILE = "task.json", "task.weights.h5"
TOKENIZER_FILE, PREPROCESSOR_FILE, METADATA_FILE = "tokenizer.json", "preprocessor.json", "metadata.json"
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
# KerasHub task class -> ours. Its MaskedLM head is our pretrainer's MLM head (NSP stays random).
TASKS = {"BertTextClassifier": "BertClassifier", "BertMaskedLM": "BertPretrainer"}
KERAS_HUB_TASKS = {ours: theirs for theirs, ours in TASKS.items()}
# KerasHub's MaskedLMHead as BertMaskedLM builds it (intermediate_activation="gelu", default epsilon).
_MASKED_LM_HEAD = {"mlm_activation": "gelu", "mlm_layer_norm_epsilon": 1e-5}
_SUFFIX = "##"
# Recorded in metadata.json: the KerasHub release whose file layout this writes (tested against it).
KERAS_HUB_VERSION = "0.32.0"


def registered_class(config, path):
    """`"BertBackbone"` from `{"registered_name": "keras_hub>BertBackbone"}` (or keras_nlp>)."""
    name = config.get("registered_name") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name.startswith(_PREFIXES):
        return None
    return name.split(">", 1)[1]


def is_keras_hub_preset(path):
    """Whether directory `path` holds a KerasHub / keras-nlp preset (by its config.json)."""
    config = loading.read_config(path) if os.path.isdir(os.fspath(path)) else None
    return registered_class(config, path) is not None


# --- reading ---------------------------------------------------------------------------------
def _open_h5(path):
    import h5py

    if not os.path.isfile(path):
        raise MissingPathError(
            f"{path} is missing; a KerasHub preset keeps its weights there. Copy the whole preset directory again."
        )
    try:
        return h5py.File(path, "r")
    except OSError as e:  # truncated, not HDF5, ...
        raise CheckpointError(
            f"{path} cannot be read as a Keras weights file ({' '.join(str(e).split())[:160]}); "
            "it is damaged or incomplete: copy or save the preset again."
        ) from None


def _layers_by_name(h5, path):
    """`{layer name: h5 group}` of the top-level layers, by their `vars` groups' `name`."""
    found = {}
    layers = h5.get("layers")
    if layers is None:
        raise CheckpointError(f"{path} has no 'layers' group; it is not a Keras 3 weights file.")
    for key, group in layers.items():
        vars_group = group.get("vars")
        name = vars_group.attrs.get("name") if vars_group is not None else None
        found[name.decode() if isinstance(name, bytes) else (name or key)] = group
    return found


def _read_table(path, table, keys=None):
    """Our name -> array (Keras layout, 2-D kernels) for every entry of `table` in file `path`.

    `keys` maps a layer name to its class-numbered h5 key, for files whose `vars` groups
    carry no name (then the layer is looked up by where Keras puts it).
    """
    tensors, sources = {}, {}
    with _open_h5(path) as h5:
        layers = _layers_by_name(h5, path)
        for name, (layer, sub), index, kind in table:
            where = f"layers/{layer}" + (f"/{sub}" if sub else "") + f"/vars/{index}"
            group = layers.get(layer, layers.get((keys or {}).get(layer)))
            dataset = None
            if group is not None:
                dataset = group.get(f"{sub}/vars/{index}" if sub else f"vars/{index}")
            if dataset is None:
                raise CheckpointError(
                    f"{path} has no weight {where} (layer {layer!r}); the file does not "
                    "belong to this config.json or is incomplete: save the preset again."
                )
            try:
                value = np.asarray(dataset[()], dtype=np.float32)
            except (OSError, ValueError, TypeError) as e:
                raise CheckpointError(
                    f"{path}: weight {where} cannot be read ({' '.join(str(e).split())[:120]}); "
                    "the file is damaged: save or copy the preset again."
                ) from None
            if kind == "kernel" and value.ndim == 3:
                # EinsumDense: query/key/value [hidden, heads, head_dim]; output [heads, head_dim, hidden].
                value = (
                    value.reshape(value.shape[0], -1)
                    if sub.endswith(("query_dense", "key_dense", "value_dense"))
                    else value.reshape(-1, value.shape[-1])
                )
            elif kind == "vector":
                value = value.reshape(-1)
            tensors[name], sources[name] = value, where
    return tensors, sources


def _read_json_file(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); restore it from the preset's source.") from None


class KerasHubCheckpoint:
    """A KerasHub / keras-nlp BERT preset directory opened for reading (the checkpoint
    protocol of `keras_bert_zoo.models.loading`: `get(spec)`, `tensor_names()`, ...).

    Every file is read and checked here, before any model exists, so a bad preset
    fails with one line naming the file and a model is never half loaded.
    """

    format = "keras_hub"

    def __init__(self, path):
        self.path = path = os.fspath(path)
        config_path = os.path.join(path, CONFIG_FILE)
        self.config = _read_json_file(config_path)
        kind = registered_class(self.config, path)
        if kind != "BertBackbone":
            raise CheckpointError(
                f"{config_path}: registered_name {self.config.get('registered_name')!r} is not a BERT; only "
                "keras_hub>BertBackbone (or keras_nlp>BertBackbone) presets load here."
            )
        sizes = self.config.get("config") or {}
        try:
            self.backbone_kwargs = {
                "vocabulary_size": int(sizes["vocabulary_size"]),
                "num_layers": int(sizes["num_layers"]),
                "num_heads": int(sizes["num_heads"]),
                "hidden_dim": int(sizes["hidden_dim"]),
                "intermediate_dim": int(sizes["intermediate_dim"]),
                "max_sequence_length": int(sizes.get("max_sequence_length", 512)),
                "num_segments": int(sizes.get("num_segments", 2)),
                "dropout": float(sizes.get("dropout", 0.1)),
                # KerasHub's BertBackbone: tanh GELU and epsilon 1e-12, fixed in its code.
                "activation": "gelu_approximate",
                "layer_norm_epsilon": 1e-12,
            }
        except KeyError as e:
            raise CheckpointError(
                f"{config_path} has no {e.args[0]!r} in its config; it is not a BertBackbone config."
            ) from None
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{config_path} has a size of the wrong type ({e}); sizes are integers.") from None
        check_architecture(self.backbone_kwargs, config_path)
        layers = self.backbone_kwargs["num_layers"]
        self._tensors, self._sources = _read_table(
            os.path.join(path, WEIGHTS_FILE), backbone_table(layers), backbone_keys(layers)
        )
        self.task_class, self.task_config = self._read_task()
        self.extra = (
            {"task": TASKS[self.task_class], "task_config": self._our_task_config()} if self.task_class in TASKS else {}
        )
        self.tokenizer_config, self.preprocessor_config = self._read_tokenizer()
        self._used = set()

    def _read_task(self):
        task_path = os.path.join(self.path, TASK_FILE)
        if not os.path.isfile(task_path):
            return None, {}
        task = _read_json_file(task_path)
        kind = registered_class(task, self.path)
        if kind not in HEAD_TABLES:
            loading.note(
                f"{task_path}: KerasHub task {kind or task.get('class_name')!r} has no counterpart here; "
                "its head is dropped and the backbone kept"
            )
            return None, {}
        head, sources = _read_table(os.path.join(self.path, TASK_WEIGHTS_FILE), HEAD_TABLES[kind], HEAD_KEYS)
        self._tensors.update(head)
        self._sources.update(sources)
        return kind, task.get("config") or {}

    def _our_task_config(self):
        if self.task_class == "BertTextClassifier":
            activation = self.task_config.get("activation")
            if activation not in (None, "linear"):
                loading.note(
                    f"{os.path.join(self.path, TASK_FILE)}: the classifier applied {activation!r} to its "
                    "outputs; BertClassifier returns the logits before it"
                )
            return {
                "num_classes": int(self.task_config["num_classes"]),
                "dropout": float(self.task_config.get("dropout", 0.1)),
            }
        return dict(_MASKED_LM_HEAD)

    def _read_tokenizer(self):
        tokenizer_path = os.path.join(self.path, TOKENIZER_FILE)
        if not os.path.isfile(tokenizer_path):
            return None, None
        config = _read_json_file(tokenizer_path).get("config") or {}
        vocabulary = os.path.join(self.path, VOCABULARY_ASSET)
        if not os.path.isfile(vocabulary):
            raise CheckpointError(
                f"{vocabulary} is missing: {tokenizer_path} needs its vocabulary asset; copy "
                "the preset's assets/ directory too (or remove tokenizer.json to load the "
                "weights alone)."
            )
        if config.get("suffix_indicator", _SUFFIX) != _SUFFIX or config.get("split", True) is False:
            raise CheckpointError(
                f"{tokenizer_path}: suffix_indicator {config.get('suffix_indicator')!r} / split="
                f"{config.get('split')} differ from BERT's WordPiece ('##', split on spaces and "
                "punctuation); this tokenizer cannot be reproduced here."
            )
        preprocessor_path = os.path.join(self.path, PREPROCESSOR_FILE)
        preprocessor = (
            (_read_json_file(preprocessor_path).get("config") or {}) if os.path.isfile(preprocessor_path) else {}
        )
        return config, preprocessor

    # --- the checkpoint protocol ------------------------------------------------------
    def tensor_names(self):
        return sorted(self._tensors)

    def tensor_shape(self, name):
        return tuple(self._tensors[name].shape)

    def name_of(self, spec):
        return f"{WEIGHTS_FILE}:{self._sources.get(spec.name, spec.name)}"

    def get(self, spec):
        value = self._tensors.get(spec.name)
        if value is not None:
            self._used.add(spec.name)
        return value

    def unused_tensors(self, backbone_only=False):
        names = [n for n in self.tensor_names() if n not in self._used]
        return [n for n in names if n.startswith(("embeddings.", "encoder.", "pooler."))] if backbone_only else names

    def head_tensor_names(self):
        return [n for n in self.tensor_names() if not n.startswith(("embeddings.", "encoder.", "pooler."))]

    def file(self, name):
        path = os.path.join(self.path, name)
        return path if os.path.exists(path) else None

    def make_tokenizer(self):
        """Our `BertTokenizer` with the KerasHub tokenizer's own options, or None without one."""
        if self.tokenizer_config is None:
            return None
        from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

        config = self.tokenizer_config
        lowercase = bool(config.get("lowercase", False))
        return BertTokenizer(
            vocabulary=os.path.join(self.path, VOCABULARY_ASSET),
            lowercase=lowercase,
            # KerasHub: strip_accents is its own switch (False in its uncased presets), never implied.
            strip_accents=bool(config.get("strip_accents", False)),
            # KerasHub splits CJK ideographs (split_on_cjk, on by default).
            tokenize_chinese_chars=bool(config.get("split_on_cjk", True)),
            keep_special_tokens=bool(config.get("special_tokens_in_strings", False)),
        )

    def make_preprocessor(self):
        """Our `BertPreprocessor` on `make_tokenizer()`, at the saved sequence length, or None."""
        tokenizer = self.make_tokenizer()
        if tokenizer is None:
            return None
        from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

        settings = self.preprocessor_config or {}
        return BertPreprocessor(
            tokenizer,
            sequence_length=int(settings.get("sequence_length", 512)),
            truncate=settings.get("truncate", "round_robin"),
        )
