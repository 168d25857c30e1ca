"""Loading against the literal variable list of google-research/bert's checkpoints.

The names below are copied from `tf.train.list_variables` of the published BERT-Base
uncased checkpoint (`uncased_L-12_H-768_A-12/bert_model.ckpt`), not produced by the code
under test, so a wrong naming rule cannot agree with itself here. Shapes are written
with BERT-Base's sizes as symbols: V = 30522 (vocabulary), H = 768 (hidden),
I = 3072 (intermediate), P = 512 (positions); the test builds a 2-layer, hidden-8
version of the same list.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertPretrainer
from keras_bert_zoo.errors import CheckpointError

# (name, shape, the same tensor's name in HF `BertForPreTraining`), as published. HF stores
# every `.../kernel` transposed (torch Linear weights are [out, in]); the rest identically.
EMBEDDING_VARIABLES = [
    ("bert/embeddings/word_embeddings", ("V", "H"), "bert.embeddings.word_embeddings.weight"),
    ("bert/embeddings/token_type_embeddings", (2, "H"), "bert.embeddings.token_type_embeddings.weight"),
    ("bert/embeddings/position_embeddings", ("P", "H"), "bert.embeddings.position_embeddings.weight"),
    ("bert/embeddings/LayerNorm/beta", ("H",), "bert.embeddings.LayerNorm.bias"),
    ("bert/embeddings/LayerNorm/gamma", ("H",), "bert.embeddings.LayerNorm.weight"),
]
# One encoder layer; "{i}" is the layer index (layer_0 ... layer_11 in BERT-Base).
LAYER_VARIABLES = [
    (
        "bert/encoder/layer_{i}/attention/self/query/kernel",
        ("H", "H"),
        "bert.encoder.layer.{i}.attention.self.query.weight",
    ),
    ("bert/encoder/layer_{i}/attention/self/query/bias", ("H",), "bert.encoder.layer.{i}.attention.self.query.bias"),
    (
        "bert/encoder/layer_{i}/attention/self/key/kernel",
        ("H", "H"),
        "bert.encoder.layer.{i}.attention.self.key.weight",
    ),
    ("bert/encoder/layer_{i}/attention/self/key/bias", ("H",), "bert.encoder.layer.{i}.attention.self.key.bias"),
    (
        "bert/encoder/layer_{i}/attention/self/value/kernel",
        ("H", "H"),
        "bert.encoder.layer.{i}.attention.self.value.weight",
    ),
    ("bert/encoder/layer_{i}/attention/self/value/bias", ("H",), "bert.encoder.layer.{i}.attention.self.value.bias"),
    (
        "bert/encoder/layer_{i}/attention/output/dense/kernel",
        ("H", "H"),
        "bert.encoder.layer.{i}.attention.output.dense.weight",
    ),
    (
        "bert/encoder/layer_{i}/attention/output/dense/bias",
        ("H",),
        "bert.encoder.layer.{i}.attention.output.dense.bias",
    ),
    (
        "bert/encoder/layer_{i}/attention/output/LayerNorm/beta",
        ("H",),
        "bert.encoder.layer.{i}.attention.output.LayerNorm.bias",
    ),
    (
        "bert/encoder/layer_{i}/attention/output/LayerNorm/gamma",
        ("H",),
        "bert.encoder.layer.{i}.attention.output.LayerNorm.weight",
    ),
    (
        "bert/encoder/layer_{i}/intermediate/dense/kernel",
        ("H", "I"),
        "bert.encoder.layer.{i}.intermediate.dense.weight",
    ),
    ("bert/encoder/layer_{i}/intermediate/dense/bias", ("I",), "bert.encoder.layer.{i}.intermediate.dense.bias"),
    ("bert/encoder/layer_{i}/output/dense/kernel", ("I", "H"), "bert.encoder.layer.{i}.output.dense.weight"),
    ("bert/encoder/layer_{i}/output/dense/bias", ("H",), "bert.encoder.layer.{i}.output.dense.bias"),
    ("bert/encoder/layer_{i}/output/LayerNorm/beta", ("H",), "bert.encoder.layer.{i}.output.LayerNorm.bias"),
    ("bert/encoder/layer_{i}/output/LayerNorm/gamma", ("H",), "bert.encoder.layer.{i}.output.LayerNorm.weight"),
]
# The pooler and the pretraining heads (run_pretraining.py's `cls/` scope).
TOP_VARIABLES = [
    ("bert/pooler/dense/kernel", ("H", "H"), "bert.pooler.dense.weight"),
    ("bert/pooler/dense/bias", ("H",), "bert.pooler.dense.bias"),
    ("cls/predictions/transform/dense/kernel", ("H", "H"), "cls.predictions.transform.dense.weight"),
    ("cls/predictions/transform/dense/bias", ("H",), "cls.predictions.transform.dense.bias"),
    ("cls/predictions/transform/LayerNorm/beta", ("H",), "cls.predictions.transform.LayerNorm.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", ("H",), "cls.predictions.transform.LayerNorm.weight"),
    ("cls/predictions/output_bias", ("V",), "cls.predictions.bias"),
    ("cls/seq_relationship/output_weights", (2, "H"), "cls.seq_relationship.weight"),
    ("cls/seq_relationship/output_bias", (2,), "cls.seq_relationship.bias"),
]
BERT_BASE = {"V": 30522, "H": 768, "I": 3072, "P": 512, "layers": 12}
SMALL = {"V": 40, "H": 8, "I": 16, "P": 12, "layers": 2}


def _listing(num_layers):
    listing = list(EMBEDDING_VARIABLES)
    for i in range(num_layers):
        listing += [(name.format(i=i), shape, hf.format(i=i)) for name, shape, hf in LAYER_VARIABLES]
    return listing + TOP_VARIABLES


def google_variables(sizes):
    """`{name: shape}` of a BERT pretraining checkpoint with these sizes, in published order."""
    return {
        name: tuple(sizes[d] if isinstance(d, str) else d for d in shape)
        for name, shape, _ in _listing(sizes["layers"])
    }


def google_tensors_from_hf(state_dict, num_layers, heads=True):
    """The TF1 checkpoint of an HF BERT model's weights, under the published names.

    `heads=False` keeps the `bert/` variables only (e.g. to add run_classifier.py's head).
    """
    tensors = {}
    for name, _, hf in _listing(num_layers):
        if not heads and not name.startswith("bert/"):
            continue
        value = state_dict[hf].detach().numpy().astype("float32")
        tensors[name] = value.T if name.endswith("/kernel") else value
    return tensors


def bert_config(sizes, **overrides):
    """A google-research/bert `bert_config.json` dict."""
    return {
        "vocab_size": sizes["V"],
        "hidden_size": sizes["H"],
        "num_hidden_layers": sizes["layers"],
        "num_attention_heads": 2,
        "intermediate_size": sizes["I"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": sizes["P"],
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        **overrides,
    }


def write_google_checkpoint(path, tensors, config):
    """Writes `bert_model.ckpt.*` (TF1 name-based, as the original Saver) and `bert_config.json`."""
    os.makedirs(path, exist_ok=True)
    names = list(tensors)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(path, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    with open(os.path.join(path, "bert_config.json"), "w") as f:
        json.dump(config, f)


def distinct_tensors(variables):
    """Tensor k holds 1000*(k+1) + its flat index: each value says which tensor, which cell."""
    return {
        name: (1000.0 * (k + 1) + np.arange(int(np.prod(shape)))).reshape(shape).astype("float32")
        for k, (name, shape) in enumerate(variables.items())
    }


def expected_variables(model):
    """Where each published variable must land in our model, and whether it is stored
    transposed (`output_weights` is [num_labels, hidden], a Keras kernel [hidden, 2]).
    Written against our layer attributes, independently of the loader's name table."""
    b = model.backbone
    e = b.embeddings
    where = {
        "bert/embeddings/word_embeddings": e.word_embeddings.embeddings,
        "bert/embeddings/token_type_embeddings": e.token_type_embeddings.embeddings,
        "bert/embeddings/position_embeddings": e.position_embeddings.embeddings,
        "bert/embeddings/LayerNorm/beta": e.layer_norm.beta,
        "bert/embeddings/LayerNorm/gamma": e.layer_norm.gamma,
        "bert/pooler/dense/kernel": b.pooler.kernel,
        "bert/pooler/dense/bias": b.pooler.bias,
        "cls/predictions/transform/dense/kernel": model.mlm_head.dense.kernel,
        "cls/predictions/transform/dense/bias": model.mlm_head.dense.bias,
        "cls/predictions/transform/LayerNorm/beta": model.mlm_head.layer_norm.beta,
        "cls/predictions/transform/LayerNorm/gamma": model.mlm_head.layer_norm.gamma,
        "cls/predictions/output_bias": model.mlm_head.bias,
        "cls/seq_relationship/output_weights": model.nsp_head.dense.kernel,
        "cls/seq_relationship/output_bias": model.nsp_head.dense.bias,
    }
    for i, block in enumerate(b.encoder_layers):
        p = f"bert/encoder/layer_{i}/"
        for part, layer in (
            ("attention/self/query", block.query),
            ("attention/self/key", block.key),
            ("attention/self/value", block.value),
            ("attention/output/dense", block.attention_output),
            ("intermediate/dense", block.intermediate),
            ("output/dense", block.output_dense),
        ):
            where[f"{p}{part}/kernel"] = layer.kernel
            where[f"{p}{part}/bias"] = layer.bias
        for part, norm in (
            ("attention/output/LayerNorm", block.attention_layer_norm),
            ("output/LayerNorm", block.output_layer_norm),
        ):
            where[f"{p}{part}/beta"] = norm.beta
            where[f"{p}{part}/gamma"] = norm.gamma
    transposed = {"cls/seq_relationship/output_weights"}
    return where, transposed


def test_literal_list_has_bert_base_sizes():
    """The literal shapes add up to HF BertModel's 109,482,240 parameters at BERT-Base sizes."""
    variables = google_variables(BERT_BASE)
    assert len(variables) == 5 + 12 * 16 + 2 + 7
    backbone = sum(int(np.prod(s)) for n, s in variables.items() if n.startswith("bert/"))
    assert backbone == 109_482_240
    assert variables["cls/seq_relationship/output_weights"] == (2, 768)
    assert variables["cls/predictions/output_bias"] == (30522,)
    assert variables["bert/encoder/layer_11/intermediate/dense/kernel"] == (768, 3072)


def test_every_published_variable_fills_the_right_weight(tmp_path, capsys):
    variables = google_variables(SMALL)
    tensors = distinct_tensors(variables)
    write_google_checkpoint(tmp_path / "google", tensors, bert_config(SMALL))
    model = BertPretrainer.from_preset(str(tmp_path / "google"), preprocessor=None)
    where, transposed = expected_variables(model)
    assert set(where) == set(variables)
    # Every weight of the model is one of them (the MLM decoder is the word-embedding table).
    assert {id(v) for v in model.weights} == {id(v) for v in where.values()}
    for name, variable in where.items():
        stored = tensors[name].T if name in transposed else tensors[name]
        np.testing.assert_array_equal(variable.numpy(), stored, err_msg=name)
    out = capsys.readouterr()
    assert "initialised randomly" not in out.out + out.err
    assert "not used" not in out.err and "pooler" not in out.err


def test_our_names_are_the_published_names():
    """The loader's name table spells exactly the published variable list."""
    from keras_bert_zoo.models.weight_names import backbone_weight_specs, google_name

    model = BertPretrainer(backbone=_small_backbone())
    ours = [google_name(s) for s in backbone_weight_specs(model.backbone) + model.head_weight_specs()]
    assert sorted(ours) == sorted(google_variables(SMALL))


def _small_backbone():
    from keras_bert_zoo import BertBackbone

    return BertBackbone(
        vocabulary_size=SMALL["V"],
        num_layers=SMALL["layers"],
        num_heads=2,
        hidden_dim=SMALL["H"],
        intermediate_dim=SMALL["I"],
        max_sequence_length=SMALL["P"],
    )


def test_missing_variable_is_named_in_the_google_layout(tmp_path):
    variables = google_variables(SMALL)
    tensors = distinct_tensors(variables)
    del tensors["bert/encoder/layer_1/output/LayerNorm/gamma"]
    write_google_checkpoint(tmp_path / "google", tensors, bert_config(SMALL))
    with pytest.raises(CheckpointError, match=r"missing.*bert/encoder/layer_1/output/LayerNorm/gamma"):
        BertPretrainer.from_preset(str(tmp_path / "google"), preprocessor=None)


def test_missing_head_variable_is_named(tmp_path, capsys):
    tensors = distinct_tensors(google_variables(SMALL))
    del tensors["cls/predictions/output_bias"]
    write_google_checkpoint(tmp_path / "google", tensors, bert_config(SMALL))
    BertPretrainer.from_preset(str(tmp_path / "google"), preprocessor=None)
    out = capsys.readouterr().out
    assert "head initialised randomly" in out and "cls/predictions/output_bias" in out


def test_extra_variables_are_reported_and_optimizer_state_is_not(tmp_path, capsys):
    variables = google_variables(SMALL)
    tensors = distinct_tensors(variables)
    # A third layer the config does not have, and a head no model reads ...
    tensors["bert/encoder/layer_2/attention/self/query/kernel"] = np.zeros((8, 8), "float32")
    tensors["cls/squad/output_weights"] = np.zeros((2, 8), "float32")
    # ... and what a fine-tuned checkpoint also stores: Adam slots and the step.
    tensors["bert/embeddings/word_embeddings/adam_m"] = np.zeros((40, 8), "float32")
    tensors["bert/embeddings/word_embeddings/adam_v"] = np.zeros((40, 8), "float32")
    tensors["global_step"] = np.array(7, "int64")
    write_google_checkpoint(tmp_path / "google", tensors, bert_config(SMALL))
    BertPretrainer.from_preset(str(tmp_path / "google"), preprocessor=None)
    lines = [line for line in capsys.readouterr().err.splitlines() if "not used" in line]
    assert len(lines) == 1, lines
    assert "2 checkpoint tensor(s) not used by BertPretrainer" in lines[0]
    assert "bert/encoder/layer_2/attention/self/query/kernel" in lines[0]
    assert "cls/squad/output_weights" in lines[0]
    assert "adam" not in lines[0] and "global_step" not in lines[0]
