"""int8 export: a quantized model's SavedModel takes raw strings and answers as the model does.

References: the quantized Keras model's own `predict` (its tf.data preprocessing), and the
float32 model's answers, which the int8 ones must differ from (or the check proves nothing)
yet stay close to.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, cli, export_saved_model
from keras_bert_zoo.errors import UsageError
from tests.helpers import minilm_path

TEXTS = ["is it raining?", "", "ça va très bien", "a good film, truly great " * 3, "bad and boring"]


def _classifier():
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=16)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
        initializer_range=0.2,
    )
    model = BertClassifier(backbone, num_classes=3, label_names=["a", "b", "c"], preprocessor=pre)
    model.classifier.kernel.assign(model.classifier.kernel * 20.0)  # spreads the probabilities
    return model


def _served(path):
    return tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))


def test_quantized_export_serves_raw_strings_as_the_model(tmp_path):
    model = _classifier()
    float_probs = model.logits_to_probabilities(model.predict(TEXTS, verbose=0))
    model.quantize("int8")
    expected = model.logits_to_probabilities(model.predict(TEXTS, verbose=0))
    assert np.abs(expected - float_probs).max() > 1e-4  # quantized: the answers moved
    assert np.abs(expected - float_probs).max() < 0.05
    got = _served(export_saved_model(model, str(tmp_path / "served")))
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)
    assert [s.decode() for s in got["labels"].numpy()] == [["a", "b", "c"][i] for i in expected.argmax(-1)]


def _ops_in(path):
    graph = tf.saved_model.load(path).signatures["serving_default"].graph.as_graph_def()
    return {node.op for node in graph.node} | {node.op for f in graph.library.function for node in f.node_def}


def test_portable_int8_export_runs_no_onednn_kernel_and_serves_the_same(tmp_path, monkeypatch):
    """`int8_kernel="portable"`: no oneDNN int8 op in the graph (it has no output where TensorFlow
    runs without oneDNN, as on AVX2 hosts by default), the same answers as the quantized model, and
    `export_info.json` says which kernel each export holds. The exports are traced as on a VNNI host
    with oneDNN on, whatever this host is: `"auto"` then holds oneDNN's op (loaded, not run: it may
    have no output here), and the portable graph must not, even after the model ran that path (its
    shared block traces are keyed by the int8 path, not reused)."""
    import json
    import os

    from keras_bert_zoo.models.layers import block_trace, int8

    model = _classifier()
    model.quantize("int8")
    expected = model.logits_to_probabilities(model.predict(TEXTS, verbose=0))
    monkeypatch.setattr(int8, "host_has_vnni", lambda: True)
    monkeypatch.setattr(int8, "onednn_int8_exact", lambda: True)
    block_trace.clear_shared_block_traces()  # the predict above traced this host's path: start from none
    paths = {
        kernel: export_saved_model(model, str(tmp_path / kernel), int8_kernel=kernel) for kernel in ("auto", "portable")
    }  # auto first: its traces must not serve the portable export
    assert "QuantizedMatMulWithBiasAndDequantize" in _ops_in(paths["auto"])
    assert "QuantizedMatMulWithBiasAndDequantize" not in _ops_in(paths["portable"])
    np.testing.assert_allclose(_served(paths["portable"])["probabilities"].numpy(), expected, atol=1e-5)
    info = {k: json.load(open(os.path.join(p, "assets", "export_info.json")))["int8_kernel"] for k, p in paths.items()}
    assert info == {"portable": "float32", "auto": "onednn"}
    with pytest.raises(UsageError, match="int8_kernel='fast' is not one of"):
        export_saved_model(model, str(tmp_path / "bad"), int8_kernel="fast")


def test_export_command_quantizes(tmp_path, capsys):
    model = _classifier()
    model.save_to_preset(str(tmp_path / "model"))
    model.quantize("int8")
    expected = model.logits_to_probabilities(model.predict(TEXTS, verbose=0))
    assert (
        cli.main(
            ["export", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "served"), "--quantize", "int8"]
        )
        == 0
    )
    np.testing.assert_allclose(_served(str(tmp_path / "served"))["probabilities"].numpy(), expected, atol=1e-5)


def test_export_command_bf16_and_int8_together(tmp_path):
    """`--precision bf16 --quantize int8`: the served graph is the quantized model's bfloat16 twin
    (`with_precision`: int8 layers on oneDNN's kernel, the rest in bfloat16) and answers as that
    twin does in memory; the flags were not tested together before."""
    import json
    import os

    from keras_bert_zoo.models.precision import with_precision

    model = _classifier()
    model.save_to_preset(str(tmp_path / "model"))
    model.quantize("int8")
    twin = with_precision(model, "bf16")
    assert twin.backbone.encoder_layers[0].query.quantization_mode == "int8"
    expected = twin.logits_to_probabilities(twin.predict(TEXTS, verbose=0))
    float32_int8 = model.logits_to_probabilities(model.predict(TEXTS, verbose=0))
    assert (
        cli.main(
            [
                "export",
                "--model",
                str(tmp_path / "model"),
                "--out",
                str(tmp_path / "served"),
                "--precision",
                "bf16",
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    got = _served(str(tmp_path / "served"))["probabilities"].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-2)  # bf16: the served batch pads otherwise
    assert 0 < np.abs(got - float32_int8).max() < 5e-2  # bfloat16 moved it, not far
    info = json.load(open(os.path.join(tmp_path, "served", "assets", "export_info.json")))
    assert info["precision"] == "bfloat16"
    from keras_bert_zoo.models.layers.int8 import host_has_vnni, onednn_int8_exact

    if host_has_vnni() and onednn_int8_exact():  # the SavedModel multiplies the int8 layers with oneDNN's kernel
        assert "QuantizedMatMulWithBiasAndDequantize" in _ops_in(str(tmp_path / "served"))
