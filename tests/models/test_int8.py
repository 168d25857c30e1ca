"""int8 inference (`model.quantize("int8")`, `models.layers.int8`).

References nobody here wrote: Keras' own `Dense` quantized to int8 (its variables and its
int8 call) for the arithmetic of `Int8Dense`, and each model's float32 forward for the
quantized one. The traced `predict` of a quantized model must equal its eager forward:
before, the shared block trace (`block_trace`) captured layer 0's int8 kernels and ran every
layer with them (SST-2 dev accuracy 0.80 -> 0.52).
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSentenceEmbedder,
    BertSpanQA,
    BertTagger,
)
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.layers import block_trace, int8
from keras_bert_zoo.models.layers.int8 import Int8Dense, host_has_vnni, onednn_int8_exact
from tests.helpers import REPO_ROOT

# oneDNN's int8 kernel runs here: a CPU with VNNI, and TensorFlow running oneDNN (its default there).
ONEDNN = host_has_vnni() and onednn_int8_exact()

# int8 outputs against float32 ones, relative to the float outputs' largest magnitude. Per-row
# int8 inputs and per-channel int8 weights (Keras' scheme) keep each matmul within ~1 % (2^-7);
# over three layers and the heads the tiny models below stay under 3 %.
REL_TOLERANCE = 0.03

TOKENS = np.array([[2, 17, 9, 33, 41, 3, 0, 0], [2, 5, 3, 12, 50, 7, 3, 0], [2, 8, 3, 0, 0, 0, 0, 0]], "int32")
INPUTS = {"token_ids": TOKENS, "segment_ids": np.zeros_like(TOKENS), "padding_mask": (TOKENS > 0).astype("int32")}


def _backbone(seed=0):
    keras.utils.set_random_seed(seed)
    # initializer_range 0.2: weights and activations of a trained model's size, not 0.02's near-zero outputs.
    # Three layers: the classifier's last block has its own [CLS]-only path, two others share a trace.
    return BertBackbone(
        vocabulary_size=60,
        num_layers=3,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        initializer_range=0.2,
        dropout=0.0,
    )


def _choice_inputs():
    return {k: np.stack([v[:2], v[1:]]) for k, v in INPUTS.items()}  # [2 questions, 2 choices, seq]


TASKS = {
    "classifier": (lambda b: BertClassifier(b, num_classes=3, dropout=0.0), INPUTS),
    "tagger": (lambda b: BertTagger(b, num_labels=5, dropout=0.0), INPUTS),
    "span_qa": (lambda b: BertSpanQA(b), INPUTS),
    "multiple_choice": (lambda b: BertMultipleChoice(b, dropout=0.0), _choice_inputs()),
    "embedder": (lambda b: BertSentenceEmbedder(b), INPUTS),
    "pretrainer": (lambda b: BertPretrainer(b), {**INPUTS, "mask_positions": np.array([[1, 3], [2, 4], [1, 0]])}),
}


def _flat(outputs):
    return np.concatenate([np.asarray(t, "float64").ravel() for t in tf.nest.flatten(outputs)])


def _relative_gap(a, b):
    a, b = _flat(a), _flat(b)
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.fixture(params=["onednn", "float32"])
def kernel_path(request, monkeypatch):
    """Each int8 kernel path of `Int8Dense`: oneDNN's u8 x s8 product (a CPU with VNNI only) and
    the float32 matmul of the same integers (a CPU without; forced here on any CPU)."""
    if request.param == "onednn" and not ONEDNN:
        pytest.skip("oneDNN's int8 kernel runs on VNNI hosts with oneDNN on only")
    monkeypatch.setattr(int8, "host_has_vnni", lambda: request.param == "onednn")
    return request.param


def test_int8_dense_equals_keras_int8_dense(kernel_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 7, 24)).astype("float32") * np.array([1.0] * 23 + [40.0], "float32")  # one outlier feature
    ours, keras_dense = Int8Dense(12, activation="gelu"), keras.layers.Dense(12, activation="gelu")
    ours.build(x.shape), keras_dense.build(x.shape)
    keras_dense.set_weights([rng.normal(size=(24, 12)).astype("float32") * 0.1, rng.normal(size=12).astype("float32")])
    ours.set_weights(keras_dense.get_weights())
    float_out = np.asarray(keras_dense(x))
    for layer in (ours, keras_dense):
        layer.quantize("int8")
    reference = np.asarray(keras_dense(x))
    assert np.abs(reference - float_out).max() > 1e-4  # quantization changed something: the check below can fail
    for got in (np.asarray(ours(x)), np.asarray(tf.function(ours)(x))):
        np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6)


def test_without_vnni_the_integers_go_through_the_float32_matmul(monkeypatch):
    """No VNNI: neither oneDNN's u8 x s8 product (it may saturate there) nor TensorFlow's int8
    `MatMul` (Keras' path, 0.3x float32): one float32 MatMul of the quantized integers."""
    monkeypatch.setattr(int8, "host_has_vnni", lambda: False)
    layer = Int8Dense(8)
    layer.build((None, 16))
    layer.quantize("int8")
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([None, 16], tf.float32)).graph
    matmuls = [op for op in graph.get_operations() if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")]
    assert "QuantizedMatMulWithBiasAndDequantize" not in {op.type for op in graph.get_operations()}
    assert [op.inputs[0].dtype for op in matmuls] == [tf.float32]
    # Widths past 1,040 at full scale leave float32's exact integers (2^24): still Keras' numbers, to rounding.
    rng = np.random.default_rng(1)
    wide, reference = Int8Dense(4), keras.layers.Dense(4)
    x = rng.uniform(0.5, 1.0, size=(3, 4096)).astype("float32")  # sums of ~127 x 95 x 4096, past 2^24
    for layer in (wide, reference):
        layer.build(x.shape)
    reference.set_weights([rng.uniform(0.5, 1.0, size=(4096, 4)).astype("float32"), np.zeros(4, "float32")])
    wide.set_weights(reference.get_weights())
    for layer in (wide, reference):
        layer.quantize("int8")
    np.testing.assert_allclose(np.asarray(wide(x)), np.asarray(reference(x)), rtol=1e-6, atol=1e-5)


def _all_ops(graph):
    """The ops of a graph and of every function it calls (the shared block trace)."""
    ops = list(graph.get_operations())
    for function in graph._functions.values():
        ops += list(function.graph.get_operations())
    return ops


@pytest.mark.skipif(not ONEDNN, reason="oneDNN's int8 kernel runs on VNNI hosts with oneDNN on only")
def test_int8_dense_runs_onednn_int8_kernel():
    layer = Int8Dense(8)
    layer.build((None, 16))
    layer.quantize("int8")
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([None, 16], tf.float32)).graph
    ops = {op.type for op in _all_ops(graph)}
    assert "QuantizedMatMulWithBiasAndDequantize" in ops
    assert "BatchMatMulV3" not in ops and "MatMul" not in ops  # neither Keras' int8 MatMul nor the float32 one


def test_onednn_int8_exact_only_where_oneDNN_runs_without_saturating():
    """oneDNN's int8 kernel is taken only where it computes exact sums: not with TensorFlow's
    oneDNN off (the op then has no output), and with it forced on, exactly on CPUs with VNNI (on
    AVX2 it saturates 16-bit pair sums: the path would give wrong numbers)."""
    import subprocess
    import sys

    script = "from keras_bert_zoo.models.layers.int8 import onednn_int8_exact; print(onednn_int8_exact())"
    seen = {}
    for setting in ("0", "1"):
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT
        )
        assert done.returncode == 0, done.stderr[-2000:]
        seen[setting] = done.stdout.strip().splitlines()[-1]
    assert seen == {"0": "False", "1": str(host_has_vnni())}


def _kernel_sums(graph):
    """The ops of a graph and of the functions it calls (the shared block trace) that sum an
    int8 tensor cast to float: the per-call correction the old call computed."""
    return [
        op
        for op in _all_ops(graph)
        if op.type == "Sum" and op.inputs[0].op.type == "Cast" and op.inputs[0].op.inputs[0].dtype == tf.int8
    ]


@pytest.mark.skipif(not ONEDNN, reason="oneDNN's int8 kernel runs on VNNI hosts with oneDNN on only")
def test_zero_point_bias_is_read_not_recomputed_per_call():
    """The +128 shift's correction (-128 x the int8 kernel's column sums) is a weight computed at
    `quantize`: the traced call sums no int8 kernel. Before, every call summed the kernel (one `Sum` per int8 layer per call)."""
    layer = Int8Dense(8)
    layer.build((None, 16))
    layer.quantize("int8")
    np.testing.assert_array_equal(
        layer.zero_point_bias.numpy(), -128.0 * np.asarray(layer.kernel, "float32").sum(axis=0)
    )
    assert not layer.zero_point_bias.trainable
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([None, 16], tf.float32)).graph
    assert "QuantizedMatMulWithBiasAndDequantize" in {op.type for op in graph.get_operations()}
    assert not _kernel_sums(graph)
    # A whole classifier's predict graph: no reduction of any kernel either.
    model = BertClassifier(_backbone(), num_classes=3, dropout=0.0)
    model.quantize("int8")
    block_trace.clear_shared_block_traces()
    forward = (
        tf.function(lambda x: model(x, training=False))
        .get_concrete_function({k: tf.TensorSpec([None, 8], tf.int32) for k in INPUTS})
        .graph
    )
    assert not _kernel_sums(forward)


def _quantized_classifier(seed):
    model = BertClassifier(_backbone(seed), num_classes=3, dropout=0.0)
    model.quantize("int8")
    return model


@pytest.mark.parametrize("how", ["keras_file", "weights_file", "preset", "set_weights"])
def test_zero_point_bias_follows_loaded_kernels(how, tmp_path):
    """A quantized model given another model's int8 kernels (each way weights arrive) computes
    that model's outputs: the cached correction is recomputed (or copied) with the kernels,
    not left as the first kernels' (it is not in the files: Keras saves the named int8 variables)."""
    source, target = _quantized_classifier(0), _quantized_classifier(1)
    expected = source.predict(INPUTS, verbose=0)
    if how == "keras_file":
        source.save(tmp_path / "m.keras")
        target = keras.saving.load_model(tmp_path / "m.keras")
    elif how == "weights_file":
        source.save_weights(tmp_path / "m.weights.h5")
        target.load_weights(tmp_path / "m.weights.h5")
    elif how == "preset":
        source.save_to_preset(str(tmp_path / "preset"))
        target = BertClassifier.from_preset(str(tmp_path / "preset"))
    else:
        target.set_weights(source.get_weights())
    for layer in target._flatten_layers():
        if isinstance(layer, Int8Dense) and layer.quantization_mode == "int8":
            np.testing.assert_array_equal(
                layer.zero_point_bias.numpy(),
                -128.0 * np.asarray(layer.kernel, "float32").sum(axis=0),
                err_msg=layer.path,
            )
    block_trace.clear_shared_block_traces()
    np.testing.assert_allclose(target.predict(INPUTS, verbose=0), expected, rtol=1e-5, atol=1e-5)


def test_a_weights_file_of_another_layout_is_one_clear_error(tmp_path):
    from keras_bert_zoo.errors import CheckpointError

    source = Int8Dense(4)
    source.build((None, 8))
    source.quantize("int8")
    store = {"0": np.zeros((8, 4), "int8")}  # kernel only: no bias, no scale
    with pytest.raises(
        CheckpointError,
        match=r"int8-quantized and expects 3 saved tensors \(kernel, bias, "
        r"kernel_scale\); the file has 1",
    ):
        source.load_own_variables(store)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_task_int8_close_to_float32_and_predict_equals_eager(task):
    make, inputs = TASKS[task]
    model = make(_backbone())
    float_out = model(inputs, training=False)
    model.quantize("int8")
    quantized = [layer for layer in model._flatten_layers() if layer.quantization_mode == "int8"]
    assert len(quantized) >= 3 * 6 + 1 + 3  # every Dense of the blocks, the pooler, the three embeddings
    eager = model(inputs, training=False)
    gap = _relative_gap(eager, float_out)
    assert 0 < gap <= REL_TOLERANCE, gap
    # The traced forward (`predict`: the shared block trace) equals the eager one.
    block_trace.clear_shared_block_traces()
    predicted = model.predict(inputs, verbose=0)
    np.testing.assert_allclose(_flat(predicted), _flat(eager), rtol=1e-5, atol=1e-5)


def test_quantize_warns_not_for_layers_without_quantized_form():
    import warnings

    model = BertClassifier(_backbone(), num_classes=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.quantize("int8")
    assert not [w for w in caught if "quantize" in str(w.message)]
    assert model.backbone.encoder_layers[0].attention_layer_norm.quantization_mode is None


def test_quantized_keras_file_round_trip(tmp_path):
    model = BertClassifier(_backbone(), num_classes=3, dropout=0.0)
    model.quantize("int8")
    expected = model.predict(INPUTS, verbose=0)
    model.save(tmp_path / "q.keras")
    loaded = keras.saving.load_model(tmp_path / "q.keras")
    assert loaded.backbone.encoder_layers[1].intermediate.quantization_mode == "int8"
    assert loaded.classifier.quantization_mode == "int8"
    np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), expected, rtol=1e-6, atol=1e-6)


def test_filters_keep_their_keras_meaning_and_survive_reload(tmp_path):
    model = BertTagger(_backbone(), num_labels=3, dropout=0.0)
    model.quantize("int8", filters=["intermediate", "output_dense"])  # the feed-forward only
    modes = {layer.name: layer.quantization_mode for layer in model._flatten_layers()}
    assert modes["intermediate"] == modes["output_dense"] == "int8" and modes["query"] is None
    expected = model.predict(INPUTS, verbose=0)
    model.save(tmp_path / "ffn.keras")
    loaded = keras.saving.load_model(tmp_path / "ffn.keras")
    assert loaded.backbone.encoder_layers[0].query.quantization_mode is None
    np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("task", ["classifier", "pretrainer"])
def test_quantized_preset_round_trip(task, tmp_path):
    make, inputs = TASKS[task]
    model = make(_backbone())
    model.quantize("int8")
    expected = model.predict(inputs, verbose=0)
    model.save_to_preset(str(tmp_path / "preset"))
    loaded = type(model).from_preset(str(tmp_path / "preset"))
    assert loaded.backbone.encoder_layers[0].query.quantization_mode == "int8"
    # Dequantized weights quantize back to the same int8 weights and scales.
    np.testing.assert_array_equal(
        np.asarray(loaded.backbone.encoder_layers[0].intermediate.kernel),
        np.asarray(model.backbone.encoder_layers[0].intermediate.kernel),
    )
    np.testing.assert_allclose(_flat(loaded.predict(inputs, verbose=0)), _flat(expected), rtol=1e-5, atol=1e-5)
    with pytest.raises(UsageError, match="quantized; a KerasHub preset holds float weights"):
        model.save_to_preset(str(tmp_path / "hub"), format="keras_hub")


def test_quantized_preset_loads_in_hf_close_to_float(tmp_path):
    """The preset's weights are the dequantized int8 ones: HF's BertModel reads them as floats."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    backbone = _backbone()
    float_out = np.asarray(backbone(INPUTS)["sequence_output"])
    backbone.quantize("int8")
    backbone.save_to_preset(str(tmp_path / "preset"))
    hf = transformers.BertModel.from_pretrained(str(tmp_path / "preset")).eval()
    with torch.no_grad():
        got = hf(
            input_ids=torch.tensor(TOKENS, dtype=torch.long),
            attention_mask=torch.tensor(INPUTS["padding_mask"], dtype=torch.long),
        ).last_hidden_state.numpy()
    mask = INPUTS["padding_mask"].astype(bool)
    assert _relative_gap(got[mask], float_out[mask]) <= REL_TOLERANCE


def test_a_quantized_policy_in_the_constructor_is_a_clear_error():
    with pytest.raises(UsageError, match=r"quantized policy; build the model in float32.*model.quantize\('int8'\)"):
        BertBackbone(
            vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, dtype="int8_from_float32"
        )
