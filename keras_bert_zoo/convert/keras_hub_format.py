"""KerasHub / keras-nlp BERT presets, read and written without importing KerasHub.

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
>>> import tempfile, keras_bert_zoo
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

import datetime
import json
import os

import numpy as np

from keras_bert_zoo.errors import CheckpointError, MissingPathError, OutputError
from keras_bert_zoo.files import write_json, write_text
from keras_bert_zoo.models import loading

PREFIXES = ("keras_hub>", "keras_nlp>")  # keras-nlp was renamed KerasHub in 2024
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.weights.h5"
TASK_FILE, TASK_WEIGHTS_FILE = "task.json", "task.weights.h5"
TOKENIZER_FILE, PREPROCESSOR_FILE, METADATA_FILE = "tokenizer.json", "preprocessor.json", "metadata.json"
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
# KerasHub task class -> ours. Its MaskedLM head is our pretrainer's MLM head (NSP stays random).
TASKS = {"BertTextClassifier": "BertClassifier", "BertMaskedLM": "BertPretrainer"}
KERAS_HUB_TASKS = {ours: theirs for theirs, ours in TASKS.items()}
# KerasHub's MaskedLMHead as BertMaskedLM builds it (intermediate_activation="gelu", default epsilon).
MASKED_LM_HEAD = {"mlm_activation": "gelu", "mlm_layer_norm_epsilon": 1e-5}
_SUFFIX = "##"
# Recorded in metadata.json: the KerasHub release whose file layout this writes (tested against it).
KERAS_HUB_VERSION = "0.32.0"


def registered_class(config, path):
    """`"BertBackbone"` from `{"registered_name": "keras_hub>BertBackbone"}` (or keras_nlp>)."""
    name = config.get("registered_name") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name.startswith(PREFIXES):
        return None
    return name.split(">", 1)[1]


def is_keras_hub_preset(path):
    """Whether directory `path` holds a KerasHub / keras-nlp preset (by its config.json)."""
    config = loading.read_config(path) if os.path.isdir(os.fspath(path)) else None
    return registered_class(config, path) is not None


# --- the name table: our checkpoint names <-> KerasHub layer paths ---------------------------
def _dense(path, name):
    return [(f"{name}.weight", path, 0, "kernel"), (f"{name}.bias", path, 1, "vector")]


def _norm(path, name):
    return [(f"{name}.weight", path, 0, "vector"), (f"{name}.bias", path, 1, "vector")]


def backbone_table(num_layers):
    """`(our name, (layer name, sub-path), var index, kind)` for every backbone weight."""
    table = [
        ("embeddings.word_embeddings.weight", ("token_embedding", ""), 0, "embedding"),
        ("embeddings.position_embeddings.weight", ("position_embedding", ""), 0, "embedding"),
        ("embeddings.token_type_embeddings.weight", ("segment_embedding", ""), 0, "embedding"),
        *_norm(("embeddings_layer_norm", ""), "embeddings.LayerNorm"),
    ]
    for i in range(num_layers):
        layer, p = f"transformer_layer_{i}", f"encoder.layer.{i}"
        attention = "_self_attention_layer/"
        table += [
            *_dense((layer, attention + "query_dense"), f"{p}.attention.self.query"),
            *_dense((layer, attention + "key_dense"), f"{p}.attention.self.key"),
            *_dense((layer, attention + "value_dense"), f"{p}.attention.self.value"),
            *_dense((layer, attention + "output_dense"), f"{p}.attention.output.dense"),
            *_norm((layer, "_self_attention_layer_norm"), f"{p}.attention.output.LayerNorm"),
            *_dense((layer, "_feedforward_intermediate_dense"), f"{p}.intermediate.dense"),
            *_dense((layer, "_feedforward_output_dense"), f"{p}.output.dense"),
            *_norm((layer, "_feedforward_layer_norm"), f"{p}.output.LayerNorm"),
        ]
    return table + _dense(("pooled_dense", ""), "pooler.dense")


HEAD_TABLES = {
    "BertTextClassifier": _dense(("logits", ""), "classifier"),
    "BertMaskedLM": [
        *_dense(("mlm_head", "_intermediate_dense"), "cls.predictions.transform.dense"),
        *_norm(("mlm_head", "_intermediate_layer_norm"), "cls.predictions.transform.LayerNorm"),
        ("cls.predictions.bias", ("mlm_head", ""), 0, "vector"),
    ],
}


# --- reading ---------------------------------------------------------------------------------
def _open_h5(path):
    import h5py

    if not os.path.isfile(path):
        raise MissingPathError(f"{path} is missing; a KerasHub preset keeps its weights there. "
                               "Copy the whole preset directory again.")
    try:
        return h5py.File(path, "r")
    except OSError as e:  # truncated, not HDF5, ...
        raise CheckpointError(f"{path} cannot be read as a Keras weights file ({' '.join(str(e).split())[:160]}); "
                              "it is damaged or incomplete: copy or save the preset again.") from None


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
                raise CheckpointError(f"{path} has no weight {where} (layer {layer!r}); the file does not "
                                      "belong to this config.json or is incomplete: save the preset again.")
            try:
                value = np.asarray(dataset[()], dtype=np.float32)
            except (OSError, ValueError, TypeError) as e:
                raise CheckpointError(f"{path}: weight {where} cannot be read ({' '.join(str(e).split())[:120]}); "
                                      "the file is damaged: save or copy the preset again.") from None
            if kind == "kernel" and value.ndim == 3:
                # EinsumDense: query/key/value [hidden, heads, head_dim]; output [heads, head_dim, hidden].
                value = value.reshape(value.shape[0], -1) if sub.endswith(("query_dense", "key_dense", "value_dense")) \
                    else value.reshape(-1, value.shape[-1])
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
        from keras_bert_zoo.convert.checkpoint import _check_architecture

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
            raise CheckpointError(f"{config_path} has no {e.args[0]!r} in its config; it is not a "
                                  "BertBackbone config.") from None
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{config_path} has a size of the wrong type ({e}); sizes are integers.") from None
        _check_architecture(self.backbone_kwargs, config_path)
        layers = self.backbone_kwargs["num_layers"]
        self._tensors, self._sources = _read_table(os.path.join(path, WEIGHTS_FILE), backbone_table(layers),
                                                   backbone_keys(layers))
        self.task_class, self.task_config = self._read_task()
        self.extra = {"task": TASKS[self.task_class], "task_config": self._our_task_config()} \
            if self.task_class in TASKS else {}
        self.tokenizer_config, self.preprocessor_config = self._read_tokenizer()
        self._used = set()

    def _read_task(self):
        task_path = os.path.join(self.path, TASK_FILE)
        if not os.path.isfile(task_path):
            return None, {}
        task = _read_json_file(task_path)
        kind = registered_class(task, self.path)
        if kind not in HEAD_TABLES:
            loading.note(f"{task_path}: KerasHub task {kind or task.get('class_name')!r} has no counterpart here; "
                         "its head is dropped and the backbone kept")
            return None, {}
        head, sources = _read_table(os.path.join(self.path, TASK_WEIGHTS_FILE), HEAD_TABLES[kind], HEAD_KEYS)
        self._tensors.update(head)
        self._sources.update(sources)
        return kind, task.get("config") or {}

    def _our_task_config(self):
        if self.task_class == "BertTextClassifier":
            activation = self.task_config.get("activation")
            if activation not in (None, "linear"):
                loading.note(f"{os.path.join(self.path, TASK_FILE)}: the classifier applied {activation!r} to its "
                             "outputs; BertClassifier returns the logits before it")
            return {"num_classes": int(self.task_config["num_classes"]),
                    "dropout": float(self.task_config.get("dropout", 0.1))}
        return dict(MASKED_LM_HEAD)

    def _read_tokenizer(self):
        tokenizer_path = os.path.join(self.path, TOKENIZER_FILE)
        if not os.path.isfile(tokenizer_path):
            return None, None
        config = (_read_json_file(tokenizer_path).get("config") or {})
        vocabulary = os.path.join(self.path, VOCABULARY_ASSET)
        if not os.path.isfile(vocabulary):
            raise CheckpointError(f"{vocabulary} is missing: {tokenizer_path} needs its vocabulary asset; copy "
                                  "the preset's assets/ directory too (or remove tokenizer.json to load the "
                                  "weights alone).")
        if config.get("suffix_indicator", _SUFFIX) != _SUFFIX or config.get("split", True) is False:
            raise CheckpointError(f"{tokenizer_path}: suffix_indicator {config.get('suffix_indicator')!r} / split="
                                  f"{config.get('split')} differ from BERT's WordPiece ('##', split on spaces and "
                                  "punctuation); this tokenizer cannot be reproduced here.")
        preprocessor_path = os.path.join(self.path, PREPROCESSOR_FILE)
        preprocessor = (_read_json_file(preprocessor_path).get("config") or {}) \
            if os.path.isfile(preprocessor_path) else {}
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
        return BertPreprocessor(tokenizer, sequence_length=int(settings.get("sequence_length", 512)),
                                truncate=settings.get("truncate", "round_robin"))


# --- writing ---------------------------------------------------------------------------------
def _snake_numbered(classes):
    """Keras 3's h5 keys for a list of layer classes: snake case, `_1`, `_2`... per class."""
    seen, keys = {}, []
    for cls in classes:
        n = seen.get(cls, 0)
        keys.append(cls if n == 0 else f"{cls}_{n}")
        seen[cls] = n + 1
    return keys


def _group(parent, key, name, values=()):
    group = parent.create_group(key)
    vars_group = group.create_group("vars")
    vars_group.attrs["name"] = name
    for i, value in enumerate(values):
        vars_group.create_dataset(str(i), data=value)
    return group


def _backbone_tensors(backbone):
    from keras_bert_zoo.models.weight_names import backbone_weight_specs

    return {s.name: np.asarray(s.variable.numpy(), dtype=np.float32) for s in backbone_weight_specs(backbone)}


def _einsum(value, sub, heads):
    """A [hidden, hidden] kernel / [hidden] bias back into KerasHub's EinsumDense layout."""
    if sub.endswith(("query_dense", "key_dense", "value_dense")):
        return value.reshape(value.shape[0], heads, -1) if value.ndim == 2 else value.reshape(heads, -1)
    if sub.endswith("output_dense") and value.ndim == 2:
        return value.reshape(heads, -1, value.shape[-1])
    return value


def backbone_layer_order(num_layers):
    """KerasHub `BertBackbone`'s layers in Keras' order: `(snake-case class, layer name)`."""
    order = [("input_layer", "token_ids"), ("input_layer", "segment_ids"), ("input_layer", "padding_mask"),
             ("reversible_embedding", "token_embedding"), ("position_embedding", "position_embedding"),
             ("embedding", "segment_embedding"), ("add", "embeddings_add"),
             ("layer_normalization", "embeddings_layer_norm"), ("dropout", "embeddings_dropout")]
    order += [("transformer_encoder", f"transformer_layer_{i}") for i in range(num_layers)]
    return order + [("dense", "pooled_dense")]


def backbone_keys(num_layers):
    """`{layer name: h5 key}` of a KerasHub backbone's weights file (`transformer_layer_1` -> `transformer_encoder_1`)."""
    order = backbone_layer_order(num_layers)
    return {name: key for key, (_, name) in zip(_snake_numbered([cls for cls, _ in order]), order)}


# The task layers' keys in task.weights.h5 (after the backbone's inputs, which count).
HEAD_KEYS = {"logits": "dense", "mlm_head": "masked_lm_head"}


def _write_backbone_h5(path, backbone):
    import h5py

    tensors = _backbone_tensors(backbone)
    table = backbone_table(backbone.num_layers)
    by_layer = {}
    for name, (layer, sub), index, _ in table:
        by_layer.setdefault((layer, sub), []).append(name)
    heads = backbone.num_heads
    order = backbone_layer_order(backbone.num_layers)
    keys = _snake_numbered([cls for cls, _ in order])
    with h5py.File(path, "w") as h5:
        layers = h5.create_group("layers")
        for key, (_, name) in zip(keys, order):
            if name.startswith("transformer_layer_"):
                group = _group(layers, key, name)
                for sub, sub_name in (("_feedforward_dropout", "feedforward_dropout"),
                                      ("_feedforward_intermediate_dense", "feedforward_intermediate_dense"),
                                      ("_feedforward_layer_norm", "feedforward_layer_norm"),
                                      ("_feedforward_output_dense", "feedforward_output_dense"),
                                      ("_self_attention_dropout", "self_attention_dropout"),
                                      ("_self_attention_layer_norm", "self_attention_layer_norm")):
                    _group(group, sub, sub_name, [tensors[n] for n in by_layer.get((name, sub), [])])
                attention = _group(group, "_self_attention_layer", "self_attention_layer")
                _group(attention, "_dropout_layer", "dropout")
                _group(attention, "_softmax", "softmax")
                for sub, sub_name in (("query_dense", "query"), ("key_dense", "key"), ("value_dense", "value"),
                                      ("output_dense", "attention_output")):
                    names = by_layer[(name, "_self_attention_layer/" + sub)]
                    _group(attention, sub, sub_name, [_einsum(tensors[n], sub, heads) for n in names])
            else:
                _group(layers, key, name, [tensors[n] for n in by_layer.get((name, ""), [])])
        h5.create_group("vars").attrs["name"] = "bert_backbone"


def _write_task_h5(path, model, kind, with_preprocessor):
    import h5py

    specs = {s.name: np.asarray(s.variable.numpy(), dtype=np.float32) for s in model.head_weight_specs()}
    with h5py.File(path, "w") as h5:
        layers = h5.create_group("layers")
        if kind == "BertTextClassifier":
            # Task layers after the 3 backbone inputs and the backbone: dropout, dense.
            _group(layers, "dropout", "classifier_dropout")
            _group(layers, "dense", "logits", [specs["classifier.weight"], specs["classifier.bias"]])
            task_name = "bert_text_classifier"
        else:
            _group(layers, "input_layer_3", "mask_positions")
            head = _group(layers, "masked_lm_head", "mlm_head")
            head["vars"].create_dataset("0", data=specs["cls.predictions.bias"])
            _group(head, "_intermediate_dense", "intermediate_dense",
                   [specs["cls.predictions.transform.dense.weight"], specs["cls.predictions.transform.dense.bias"]])
            _group(head, "_intermediate_layer_norm", "intermediate_layer_norm",
                   [specs["cls.predictions.transform.LayerNorm.weight"],
                    specs["cls.predictions.transform.LayerNorm.bias"]])
            task_name = "bert_masked_lm"
        # The compiled default optimizer's two variables (iterations, learning rate), unbuilt.
        optimizer = _group(h5, "optimizer", "adam")
        optimizer["vars"].create_dataset("0", data=np.int64(0))
        optimizer["vars"].create_dataset("1", data=np.float32(5e-5))
        if with_preprocessor:
            preprocessor = _group(h5, "preprocessor", f"{task_name}_preprocessor")
            _group(preprocessor, "tokenizer", "bert_tokenizer")
        h5.create_group("vars").attrs["name"] = task_name


def _dtype(name):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name}, "registered_name": None}


def _backbone_config(backbone):
    return {
        "module": "keras_hub.src.models.bert.bert_backbone",
        "class_name": "BertBackbone",
        "config": {
            "name": "bert_backbone", "trainable": True, "dtype": _dtype("float32"),
            "vocabulary_size": backbone.vocabulary_size, "num_layers": backbone.num_layers,
            "num_heads": backbone.num_heads, "hidden_dim": backbone.hidden_dim,
            "intermediate_dim": backbone.intermediate_dim, "dropout": backbone.dropout,
            "max_sequence_length": backbone.max_sequence_length, "num_segments": backbone.num_segments,
        },
        "registered_name": "keras_hub>BertBackbone",
    }


def _tokenizer_config(tokenizer):
    strip = tokenizer.lowercase if tokenizer.strip_accents is None else tokenizer.strip_accents  # HF's rule
    return {
        "module": "keras_hub.src.models.bert.bert_tokenizer",
        "class_name": "BertTokenizer",
        "config": {
            "name": "bert_tokenizer", "trainable": True, "dtype": _dtype("int32"),
            "config_file": TOKENIZER_FILE, "vocabulary": None, "sequence_length": None,
            "lowercase": tokenizer.lowercase, "strip_accents": bool(strip), "split": True,
            "suffix_indicator": _SUFFIX, "oov_token": "[UNK]", "special_tokens": None,
            "special_tokens_in_strings": tokenizer.keep_special_tokens,
        },
        "registered_name": "keras_hub>BertTokenizer",
    }


def _preprocessor_config(tokenizer, sequence_length, truncate, kind):
    cls = {"BertTextClassifier": "BertTextClassifierPreprocessor",
           "BertMaskedLM": "BertMaskedLMPreprocessor"}.get(kind, "BertTextClassifierPreprocessor")
    module = {"BertTextClassifierPreprocessor": "bert_text_classifier_preprocessor",
              "BertMaskedLMPreprocessor": "bert_masked_lm_preprocessor"}[cls]
    config = {"name": module, "trainable": True, "dtype": _dtype("float32"),
              "tokenizer": _tokenizer_config(tokenizer), "config_file": PREPROCESSOR_FILE,
              "sequence_length": int(sequence_length),
              # KerasHub truncates round_robin or waterfall; longest_first has no counterpart
              # there and round_robin is the closest (both shorten the longer segment first).
              "truncate": truncate if truncate in ("round_robin", "waterfall") else "round_robin"}
    if cls == "BertMaskedLMPreprocessor":
        config.update(mask_selection_rate=0.15, mask_selection_length=96, mask_token_rate=0.8, random_token_rate=0.1)
    return {"module": f"keras_hub.src.models.bert.{module}", "class_name": cls, "config": config,
            "registered_name": f"keras_hub>{cls}"}


def check_writable(model):
    """Raises `CheckpointError` for what a KerasHub preset cannot hold; notes what changes."""
    from keras_bert_zoo.models.backbone import BertBackbone

    kind = None if isinstance(model, BertBackbone) else KERAS_HUB_TASKS.get(type(model).__name__)
    if not isinstance(model, BertBackbone) and kind is None:
        raise CheckpointError(f"{type(model).__name__} has no KerasHub counterpart; KerasHub presets hold a "
                              f"BertBackbone, {' or '.join(KERAS_HUB_TASKS)}. Save its backbone instead "
                              "(model.backbone.save_to_preset(path, format='keras_hub')).")
    backbone = model if kind is None else model.backbone
    if backbone.activation != "gelu_approximate" or backbone.layer_norm_epsilon != 1e-12:
        loading.note(f"note: KerasHub's BertBackbone always uses the tanh GELU and epsilon 1e-12; this model uses "
                     f"{backbone.activation!r} / {backbone.layer_norm_epsilon}, so KerasHub's outputs will differ "
                     "slightly from ours")
    if kind == "BertMaskedLM" and (model.mlm_activation or backbone.activation) != "gelu":
        loading.note("note: KerasHub's BertMaskedLM head uses the exact GELU and epsilon 1e-5; this MLM head "
                     "differs, so KerasHub's MLM logits will differ slightly from ours (the NSP head is not kept)")
    return kind


def write_keras_hub_preset(path, model, tokenizer=None):
    """Writes `model` (a `BertBackbone`, `BertClassifier` or `BertPretrainer`) as a KerasHub preset.

    Args:
        path: the directory (new, empty, or an earlier KerasHub preset, which is replaced).
        model: the model.
        tokenizer: a `BertTokenizer` to save with it (default: the model's preprocessor's);
            without one the preset holds weights only (KerasHub's backbone needs none).

    Every file is written into a fresh staging directory beside `path` and renamed into
    place, so a failure leaves nothing half-written.
    """
    from keras_bert_zoo.files import output_dir

    check_writable(model)
    path = os.fspath(path)
    if os.path.isdir(path) and os.listdir(path) and not is_keras_hub_preset(path):
        raise OutputError(f"{path} holds other files ({', '.join(sorted(os.listdir(path))[:4])}); a KerasHub "
                          "preset replaces its directory whole: give a new or empty directory.")
    with output_dir(path, overwrite=True, flag=None) as staging:
        write_keras_hub_files(staging, model, tokenizer)


def write_keras_hub_files(directory, model, tokenizer=None):
    """The files of `write_keras_hub_preset`, written into the existing empty `directory`."""
    import keras

    kind = KERAS_HUB_TASKS.get(type(model).__name__)  # None: a backbone (check_writable ran)
    backbone = model.backbone if kind else model
    write_json(os.path.join(directory, CONFIG_FILE), _backbone_config(backbone))
    _write_backbone_h5(os.path.join(directory, WEIGHTS_FILE), backbone)
    write_json(os.path.join(directory, METADATA_FILE), {
        "keras_version": keras.__version__, "keras_hub_version": KERAS_HUB_VERSION,
        "parameter_count": int(backbone.count_params()),
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"],
    })
    preprocessor = getattr(model, "preprocessor", None)
    tokenizer = tokenizer or getattr(preprocessor, "tokenizer", None)
    if tokenizer is not None:
        write_json(os.path.join(directory, TOKENIZER_FILE), _tokenizer_config(tokenizer))
        os.makedirs(os.path.dirname(os.path.join(directory, VOCABULARY_ASSET)))
        write_text(os.path.join(directory, VOCABULARY_ASSET), "".join(t + "\n" for t in tokenizer.vocabulary))
    if kind is None:
        return
    preprocessor_config = None
    if tokenizer is not None:
        # Without a preprocessor: KerasHub's default length, within the position table.
        length = getattr(preprocessor, "sequence_length", None) or min(512, backbone.max_sequence_length)
        preprocessor_config = _preprocessor_config(tokenizer, length,
                                                   getattr(preprocessor, "truncate", "round_robin"), kind)
        write_json(os.path.join(directory, PREPROCESSOR_FILE), preprocessor_config)
    module = "bert_text_classifier" if kind == "BertTextClassifier" else "bert_masked_lm"
    task_config = {"backbone": _backbone_config(backbone), "preprocessor": preprocessor_config, "name": module}
    if kind == "BertTextClassifier":
        task_config.update(num_classes=int(model.num_classes), activation="linear", dropout=float(model.dropout))
    write_json(os.path.join(directory, TASK_FILE), {"module": f"keras_hub.src.models.bert.{module}",
                                                    "class_name": kind, "config": task_config,
                                                    "registered_name": f"keras_hub>{kind}"})
    _write_task_h5(os.path.join(directory, TASK_WEIGHTS_FILE), model, kind, with_preprocessor=tokenizer is not None)


loading.register_keras_hub_writer(write_keras_hub_preset)
