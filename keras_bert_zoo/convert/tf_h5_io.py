"""Reads HF's TF2 weight files (`tf_model.h5`) with h5py, under the names HF's PyTorch files use.

`TFBertModel.save_pretrained` (and every `TFBert*` class) writes Keras' HDF5 weights format: a
root attribute `layer_names`, one group per top-level layer with an attribute `weight_names`,
and one dataset per weight under its TF variable name, e.g.
`tf_bert_model/bert/encoder/layer_._0/attention/self/query/kernel:0`. HDF5 is data: reading it
runs no code, unlike the pickled `pytorch_model.bin` this package never opens. Only those
datasets are read: a Keras model config (which can hold code) is never looked at, and links
that leave the file (soft, external, virtual or external-storage datasets) are refused.

Each TF name becomes the name HF's PyTorch checkpoints give the same weight, by the rule HF's
own TF<->PyTorch converter applies (`convert_tf_weight_name_to_pt_weight_name`): drop `:0`
and the model's scope, `mlm___cls` -> `cls` (`X___Y` -> `Y`), `layer_._0` -> `layer.0`,
`kernel`/`embeddings`/`gamma` -> `weight`, `beta` -> `bias`, `/` -> `.`. TF kernels are
`[in, out]`; they come back as `[out, in]`, as HF's safetensors store them, so
`keras_bert_zoo.convert.checkpoint` reads both files through the same name table.

Examples:
>>> from keras_bert_zoo.convert.tf_h5_io import hf_name
>>> hf_name("tf_bert_for_pre_training/mlm___cls/predictions/transform/LayerNorm/gamma:0")
'cls.predictions.transform.LayerNorm.weight'
>>> hf_name("tf_bert_model/bert/encoder/layer_._3/attention/self/query/kernel:0")
'bert.encoder.layer.3.attention.self.query.weight'
"""

import os
import re

import numpy as np

from keras_bert_zoo.errors import CheckpointError

__all__ = ["hf_name", "read_tf_h5"]

_LAST = {"kernel": "weight", "embeddings": "weight", "gamma": "weight", "beta": "bias"}


def hf_name(tf_name):
    """HF's PyTorch name of a weight from its TF2 variable name (see the module docstring)."""
    name = tf_name[: -len(":0")] if tf_name.endswith(":0") else tf_name
    name = re.sub(r"(^|/)[^/]*___([^/]*)(?=/)", r"\1\2", name)
    parts = [p for p in name.replace("_._", "/").split("/") if p]
    if len(parts) > 1:
        parts = parts[1:]  # the model's own scope: tf_bert_model, tf_bert_for_pre_training, ...
    parts[-1] = _LAST.get(parts[-1], parts[-1])
    return ".".join(parts)


def read_tf_h5(path):
    """`{HF name: np.ndarray}` of every weight in an HF `tf_model.h5`, kernels as `[out, in]`.

    A weight stored twice (`TFBertForPreTraining` stores the tied word embeddings under its
    MLM head as well) is read once.

    Raises:
        CheckpointError: naming the file and the fault: not HDF5, not a Keras weights file as
            `save_pretrained` writes one, a link or dataset that points outside the file, or a
            weight that is not a float array.
    """
    import h5py

    path = os.fspath(path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CheckpointError(
            f"{path} is not an HDF5 file ({' '.join(str(e).split())[:120]}); download it "
            "again, or write it again with transformers' save_pretrained."
        ) from None
    tensors = {}
    with f:
        for layer in _names(f, "layer_names", path):
            group = _child(f, layer, path)
            for weight in _names(group, "weight_names", path):
                name = hf_name(weight)
                if name not in tensors:
                    tensors[name] = _read(_child(group, weight, path), weight, path)
    return tensors


def _names(group, key, path):
    """A string-list attribute; Keras splits long ones into `key0`, `key1`, ... as HF reads them."""
    if key in group.attrs:
        values = list(group.attrs[key])
    elif f"{key}0" in group.attrs:
        values, i = [], 0
        while f"{key}{i}" in group.attrs:
            values += list(group.attrs[f"{key}{i}"])
            i += 1
    else:
        where = "the file's root" if group.name == "/" else f"group {group.name}"
        raise CheckpointError(
            f"{path}: {where} has no {key!r} attribute, so it is not a Keras weights file as "
            "HF's save_pretrained writes (a whole Keras model is not read); write it again with "
            "transformers' save_pretrained, or use model.safetensors."
        )
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def _child(group, name, path):
    """`group[name]`, following only hard links: nothing outside the file is opened."""
    import h5py

    node = group
    for part in (p for p in name.split("/") if p):
        link = node.get(part, getlink=True)
        if link is None:
            raise CheckpointError(
                f"{path}: {name!r} is listed but not stored under {group.name}; the file is "
                "damaged (download it again)."
            )
        if not isinstance(link, h5py.HardLink):
            raise CheckpointError(
                f"{path}: {name!r} is a link ({type(link).__name__}), not data stored here; "
                "only weights stored in the file itself are read."
            )
        node = node[part]
    return node


def _read(dataset, name, path):
    import h5py

    if not isinstance(dataset, h5py.Dataset) or dataset.is_virtual or dataset.external:
        raise CheckpointError(
            f"{path}: {name!r} is not an array stored in the file; only weights stored in the file itself are read."
        )
    if dataset.dtype.kind != "f":
        raise CheckpointError(
            f"{path}: weight {name!r} has dtype {dataset.dtype}, not a float array; the file is not BERT weights."
        )
    value = np.asarray(dataset[()])
    leaf = name.split("/")[-1].removesuffix(":0")
    return value.T if leaf == "kernel" and value.ndim == 2 else value
