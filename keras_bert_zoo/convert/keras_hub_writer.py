"""Writes our models as KerasHub presets (`save_to_preset(DIR, format="keras_hub")`), without KerasHub.

The files are those `keras_bert_zoo.convert.keras_hub_format` reads (see its docstring),
laid out as KerasHub 0.32 writes them: `config.json` / `task.json` / `tokenizer.json` /
`preprocessor.json` with `keras_hub>` registered names, and `.weights.h5` files in Keras
3's layout (class-numbered keys, each `vars` group naming its layer), written with h5py.
`tests/convert/test_keras_hub_presets.py` loads the result into KerasHub with warnings
recorded, and compares its outputs with ours.

What a KerasHub preset cannot hold is said, not hidden: a task with no KerasHub
counterpart is refused before anything is written; KerasHub's encoder always computes the
tanh GELU, so a model with the exact GELU is written with a note that KerasHub's outputs
will differ slightly; KerasHub has no NSP head, so a pretrainer's is not written.
"""

import datetime
import os

import numpy as np

from keras_bert_zoo.convert.keras_hub_format import (
    _SUFFIX,
    CONFIG_FILE,
    KERAS_HUB_TASKS,
    KERAS_HUB_VERSION,
    METADATA_FILE,
    PREPROCESSOR_FILE,
    TASK_FILE,
    TASK_WEIGHTS_FILE,
    TOKENIZER_FILE,
    VOCABULARY_ASSET,
    WEIGHTS_FILE,
    is_keras_hub_preset,
)
from keras_bert_zoo.convert.keras_hub_names import backbone_layer_order, backbone_table, snake_numbered
from keras_bert_zoo.errors import CheckpointError, OutputError
from keras_bert_zoo.files import write_json, write_text
from keras_bert_zoo.models import loading

__all__ = ["check_writable", "write_keras_hub_preset", "write_keras_hub_files"]


def _group(parent, key, name, values=()):
    group = parent.create_group(key)
    vars_group = group.create_group("vars")
    vars_group.attrs["name"] = name
    for i, value in enumerate(values):
        vars_group.create_dataset(str(i), data=value)
    return group


def _backbone_tensors(backbone):
    from keras_bert_zoo.models.weight_names import backbone_weight_specs, spec_value

    # LoRA adapters merged into their kernels, as KerasHub's own preset saving does.
    return {s.name: spec_value(s, merged=True) for s in backbone_weight_specs(backbone)}


def _einsum(value, sub, heads):
    """A [hidden, hidden] kernel / [hidden] bias back into KerasHub's EinsumDense layout."""
    if sub.endswith(("query_dense", "key_dense", "value_dense")):
        return value.reshape(value.shape[0], heads, -1) if value.ndim == 2 else value.reshape(heads, -1)
    if sub.endswith("output_dense") and value.ndim == 2:
        return value.reshape(heads, -1, value.shape[-1])
    return value


def _write_backbone_h5(path, backbone):
    import h5py

    tensors = _backbone_tensors(backbone)
    table = backbone_table(backbone.num_layers)
    by_layer = {}
    for name, (layer, sub), _, _ in table:
        by_layer.setdefault((layer, sub), []).append(name)
    heads = backbone.num_heads
    order = backbone_layer_order(backbone.num_layers)
    keys = snake_numbered([cls for cls, _ in order])
    with h5py.File(path, "w") as h5:
        layers = h5.create_group("layers")
        for key, (_, name) in zip(keys, order, strict=True):
            if name.startswith("transformer_layer_"):
                group = _group(layers, key, name)
                for sub, sub_name in (
                    ("_feedforward_dropout", "feedforward_dropout"),
                    ("_feedforward_intermediate_dense", "feedforward_intermediate_dense"),
                    ("_feedforward_layer_norm", "feedforward_layer_norm"),
                    ("_feedforward_output_dense", "feedforward_output_dense"),
                    ("_self_attention_dropout", "self_attention_dropout"),
                    ("_self_attention_layer_norm", "self_attention_layer_norm"),
                ):
                    _group(group, sub, sub_name, [tensors[n] for n in by_layer.get((name, sub), [])])
                attention = _group(group, "_self_attention_layer", "self_attention_layer")
                _group(attention, "_dropout_layer", "dropout")
                _group(attention, "_softmax", "softmax")
                for sub, sub_name in (
                    ("query_dense", "query"),
                    ("key_dense", "key"),
                    ("value_dense", "value"),
                    ("output_dense", "attention_output"),
                ):
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
            _group(
                head,
                "_intermediate_dense",
                "intermediate_dense",
                [specs["cls.predictions.transform.dense.weight"], specs["cls.predictions.transform.dense.bias"]],
            )
            _group(
                head,
                "_intermediate_layer_norm",
                "intermediate_layer_norm",
                [
                    specs["cls.predictions.transform.LayerNorm.weight"],
                    specs["cls.predictions.transform.LayerNorm.bias"],
                ],
            )
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
            "name": "bert_backbone",
            "trainable": True,
            "dtype": _dtype("float32"),
            "vocabulary_size": backbone.vocabulary_size,
            "num_layers": backbone.num_layers,
            "num_heads": backbone.num_heads,
            "hidden_dim": backbone.hidden_dim,
            "intermediate_dim": backbone.intermediate_dim,
            "dropout": backbone.dropout,
            "max_sequence_length": backbone.max_sequence_length,
            "num_segments": backbone.num_segments,
        },
        "registered_name": "keras_hub>BertBackbone",
    }


def _tokenizer_config(tokenizer):
    strip = tokenizer.lowercase if tokenizer.strip_accents is None else tokenizer.strip_accents  # HF's rule
    return {
        "module": "keras_hub.src.models.bert.bert_tokenizer",
        "class_name": "BertTokenizer",
        "config": {
            "name": "bert_tokenizer",
            "trainable": True,
            "dtype": _dtype("int32"),
            "config_file": TOKENIZER_FILE,
            "vocabulary": None,
            "sequence_length": None,
            "lowercase": tokenizer.lowercase,
            "strip_accents": bool(strip),
            "split": True,
            "suffix_indicator": _SUFFIX,
            "oov_token": "[UNK]",
            "special_tokens": None,
            "special_tokens_in_strings": tokenizer.keep_special_tokens,
        },
        "registered_name": "keras_hub>BertTokenizer",
    }


def _preprocessor_config(tokenizer, sequence_length, truncate, kind):
    cls = {"BertTextClassifier": "BertTextClassifierPreprocessor", "BertMaskedLM": "BertMaskedLMPreprocessor"}.get(
        kind, "BertTextClassifierPreprocessor"
    )
    module = {
        "BertTextClassifierPreprocessor": "bert_text_classifier_preprocessor",
        "BertMaskedLMPreprocessor": "bert_masked_lm_preprocessor",
    }[cls]
    config = {
        "name": module,
        "trainable": True,
        "dtype": _dtype("float32"),
        "tokenizer": _tokenizer_config(tokenizer),
        "config_file": PREPROCESSOR_FILE,
        "sequence_length": int(sequence_length),
        # KerasHub truncates round_robin or waterfall; longest_first has no counterpart
        # there and round_robin is the closest (both shorten the longer segment first).
        "truncate": truncate if truncate in ("round_robin", "waterfall") else "round_robin",
    }
    if cls == "BertMaskedLMPreprocessor":
        config.update(mask_selection_rate=0.15, mask_selection_length=96, mask_token_rate=0.8, random_token_rate=0.1)
    return {
        "module": f"keras_hub.src.models.bert.{module}",
        "class_name": cls,
        "config": config,
        "registered_name": f"keras_hub>{cls}",
    }


def check_writable(model):
    """Raises `CheckpointError` for what a KerasHub preset cannot hold; notes what changes."""
    from keras_bert_zoo.models.backbone import BertBackbone

    kind = None if isinstance(model, BertBackbone) else KERAS_HUB_TASKS.get(type(model).__name__)
    if not isinstance(model, BertBackbone) and kind is None:
        raise CheckpointError(
            f"{type(model).__name__} has no KerasHub counterpart; KerasHub presets hold a "
            f"BertBackbone, {' or '.join(KERAS_HUB_TASKS)}. Save its backbone instead "
            "(model.backbone.save_to_preset(path, format='keras_hub'))."
        )
    backbone = model if kind is None else model.backbone
    if backbone.activation != "gelu_approximate" or backbone.layer_norm_epsilon != 1e-12:
        loading.note(
            f"note: KerasHub's BertBackbone always uses the tanh GELU and epsilon 1e-12; this model uses "
            f"{backbone.activation!r} / {backbone.layer_norm_epsilon}, so KerasHub's outputs will differ "
            "slightly from ours"
        )
    if kind == "BertMaskedLM" and (model.mlm_activation or backbone.activation) != "gelu":
        loading.note(
            "note: KerasHub's BertMaskedLM head uses the exact GELU and epsilon 1e-5; this MLM head "
            "differs, so KerasHub's MLM logits will differ slightly from ours (the NSP head is not kept)"
        )
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
        raise OutputError(
            f"{path} holds other files ({', '.join(sorted(os.listdir(path))[:4])}); a KerasHub "
            "preset replaces its directory whole: give a new or empty directory."
        )
    with output_dir(path, overwrite=True, flag=None) as staging:
        write_keras_hub_files(staging, model, tokenizer)


def write_keras_hub_files(directory, model, tokenizer=None):
    """The files of `write_keras_hub_preset`, written into the existing empty `directory`."""
    import keras

    kind = KERAS_HUB_TASKS.get(type(model).__name__)  # None: a backbone (check_writable ran)
    backbone = model.backbone if kind else model
    write_json(os.path.join(directory, CONFIG_FILE), _backbone_config(backbone))
    _write_backbone_h5(os.path.join(directory, WEIGHTS_FILE), backbone)
    write_json(
        os.path.join(directory, METADATA_FILE),
        {
            "keras_version": keras.__version__,
            "keras_hub_version": KERAS_HUB_VERSION,
            "parameter_count": int(backbone.count_params()),
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"],
        },
    )
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
        preprocessor_config = _preprocessor_config(
            tokenizer, length, getattr(preprocessor, "truncate", "round_robin"), kind
        )
        write_json(os.path.join(directory, PREPROCESSOR_FILE), preprocessor_config)
    module = "bert_text_classifier" if kind == "BertTextClassifier" else "bert_masked_lm"
    task_config = {"backbone": _backbone_config(backbone), "preprocessor": preprocessor_config, "name": module}
    if kind == "BertTextClassifier":
        task_config.update(num_classes=int(model.num_classes), activation="linear", dropout=float(model.dropout))
    write_json(
        os.path.join(directory, TASK_FILE),
        {
            "module": f"keras_hub.src.models.bert.{module}",
            "class_name": kind,
            "config": task_config,
            "registered_name": f"keras_hub>{kind}",
        },
    )
    _write_task_h5(os.path.join(directory, TASK_WEIGHTS_FILE), model, kind, with_preprocessor=tokenizer is not None)


loading.register_keras_hub_writer(write_keras_hub_preset)
