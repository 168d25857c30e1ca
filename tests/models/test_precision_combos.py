"""bf16 and int8 together, and `with_precision` from a model that is not float32.

References nobody here wrote: Keras' own mixed-precision machinery (`mixed_bfloat16`, its
autocasting) and Keras' own int8 `Dense` call, which a quantized layer runs where our oneDNN
path does not apply (`Int8Dense.int8_kernel_path` patched to None stands for it). Before, a
quantized model computing in bfloat16 (`with_precision`, a global `mixed_bfloat16` policy,
`export --precision bf16 --quantize int8`) left the oneDNN path for TensorFlow's int8 `MatMul`
(0.3x float32, docs/decisions.md "int8 inference"); and `with_precision` refused a mixed model.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertClassifier
from keras_bert_zoo.keras_compat import all_layers
from keras_bert_zoo.models.layers import block_trace, int8
from keras_bert_zoo.models.layers.int8 import Int8Dense, host_has_vnni
from keras_bert_zoo.models.precision import with_precision
from tests.models.test_int8 import INPUTS, _backbone

needs_vnni = pytest.mark.skipif(
    not (host_has_vnni() and int8.onednn_int8_exact()),
    reason="oneDNN's int8 kernel runs on VNNI hosts with oneDNN on only",
)


def _classifier():
    return BertClassifier(_backbone(), num_classes=3, dropout=0.0)


def _op_types(fn, *specs):
    graph = tf.function(fn).get_concrete_function(*specs).graph
    ops = [op for op in graph.get_operations()]
    for function in graph._functions.values():  # the shared block trace
        ops += list(function.graph.get_operations())
    return ops


def _int8_matmuls(model):
    specs = {k: tf.TensorSpec([None, 8], tf.int32) for k in INPUTS}
    ops = _op_types(lambda x: model(x, training=False), specs)
    onednn = [
        op for op in ops if op.type == "QuantizedMatMulWithBiasAndDequantize" and "onednn_int8_probe" not in op.name
    ]  # each layer's own product, not its run-time check
    tf_int8 = [op for op in ops if "MatMul" in op.type and op not in onednn and op.inputs[0].dtype == tf.int8]
    return len(onednn), len(tf_int8)


def test_with_precision_from_a_mixed_model():
    """A bf16 twin's float32 twin computes what the float32 model does (same weights, float32
    everywhere); asking for the precision it has returns it. Before: `UsageError` (float32 only)."""
    model = _classifier()
    expected = model.predict(INPUTS, verbose=0)
    half = with_precision(model, "bf16")
    assert with_precision(half, "bfloat16") is half
    back = with_precision(half, "float32")
    assert {layer.compute_dtype for layer in all_layers(back)} == {"float32"}
    np.testing.assert_allclose(back.predict(INPUTS, verbose=0), expected, rtol=1e-6, atol=1e-6)
    fp16 = with_precision(half, "fp16")
    assert fp16.backbone.get_layer("encoder_layer_0").compute_dtype == "float16"


@needs_vnni
def test_int8_dense_under_bfloat16_is_the_float32_result_rounded():
    """Under `mixed_bfloat16` the int8 layer runs the same float32 product (oneDNN's kernel) and
    casts its output: exactly the float32 layer's output on the same bfloat16 inputs, rounded.
    The shift correction is read in float32 (in bfloat16 its integers would lose bits)."""
    rng = np.random.default_rng(0)
    x = tf.cast(tf.constant(rng.normal(size=(6, 32)).astype("float32")), tf.bfloat16)
    full, half = Int8Dense(16, activation="gelu"), Int8Dense(16, activation="gelu", dtype="mixed_bfloat16")
    full.build((None, 32)), half.build((None, 32))
    full.set_weights([rng.normal(size=(32, 16)).astype("float32"), rng.normal(size=16).astype("float32")])
    half.set_weights(full.get_weights())
    full.quantize("int8"), half.quantize("int8")
    expected = tf.cast(full(tf.cast(x, tf.float32)), tf.bfloat16).numpy()
    for got in (half(x), tf.function(half)(x)):
        assert got.dtype == tf.bfloat16
        np.testing.assert_array_equal(got.numpy(), expected)
    ops = _op_types(half, tf.TensorSpec([None, 32], tf.bfloat16))
    assert "QuantizedMatMulWithBiasAndDequantize" in {op.type for op in ops}


def _keras_int8_path(monkeypatch, make):
    """What `make()` computes through Keras' own int8 call (our oneDNN path switched off)."""
    with monkeypatch.context() as patch:
        patch.setattr(Int8Dense, "int8_kernel_path", lambda self, inputs: None)
        block_trace.clear_shared_block_traces()
        model = make()
        assert _int8_matmuls(model) == (0, 2 * 6 + 1 + 1)  # the reference really is Keras' path
        out = model.predict(INPUTS, verbose=0)
    block_trace.clear_shared_block_traces()
    return out


@needs_vnni
def test_with_precision_of_a_quantized_model(monkeypatch):
    """A quantized model's bf16 twin keeps its int8 layers and weights, multiplies them with
    oneDNN's int8 kernel (before: TensorFlow's int8 `BatchMatMulV3`), as close to the float32
    int8 model as Keras' own int8 call under `mixed_bfloat16`."""
    model = _classifier()
    model.quantize("int8")
    quantized_float32 = model.predict(INPUTS, verbose=0)
    half = with_precision(model, "bf16")
    assert half.backbone.encoder_layers[0].query.quantization_mode == "int8"
    assert half.backbone.get_layer("encoder_layer_0").compute_dtype == "bfloat16"
    np.testing.assert_array_equal(
        np.asarray(half.backbone.encoder_layers[1].intermediate.kernel),
        np.asarray(model.backbone.encoder_layers[1].intermediate.kernel),
    )
    # As in float32: every backbone Dense on oneDNN (the shared block trace holds one block's
    # six), the task head (a plain Keras `Dense`) on Keras' int8 call.
    assert _int8_matmuls(half) == _int8_matmuls(model) == (2 * 6 + 1, 1)
    got = half.predict(INPUTS, verbose=0)
    reference = _keras_int8_path(monkeypatch, lambda: with_precision(model, "bf16"))
    # Keras' int8 call under bfloat16 quantizes bfloat16 inputs with bfloat16 scales; ours quantizes
    # in float32: both move from the float32 int8 model by bfloat16's rounding, by as much.
    ours, keras_path = np.abs(got - quantized_float32).max(), np.abs(reference - quantized_float32).max()
    print(f"from the float32 int8 model: ours {ours:.4g}, Keras' int8 call {keras_path:.4g}")
    assert 0 < ours <= 2 * keras_path and keras_path <= 0.1 * np.abs(quantized_float32).max()


@needs_vnni
def test_quantize_then_predict_under_a_global_mixed_bfloat16_policy(monkeypatch):
    """The script way: `set_dtype_policy("mixed_bfloat16")`, build, `quantize("int8")`,
    `predict`. It runs (before too), now on oneDNN's int8 kernel, as far from the float32
    model as Keras' own int8 call under the same policy (int8 and bfloat16 rounding)."""
    float_model = _classifier()
    expected_float = float_model.predict(INPUTS, verbose=0)
    weights = float_model.get_weights()

    def make():
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            model = _classifier()
        finally:
            keras.config.set_dtype_policy("float32")
        model.set_weights(weights)
        model.quantize("int8")
        return model

    model = make()
    assert model.backbone.encoder_layers[0].query.dtype_policy.name == "int8_from_mixed_bfloat16"
    assert _int8_matmuls(model) == (2 * 6 + 1, 1)  # as in float32 (see the test above)
    got = model.predict(INPUTS, verbose=0)
    ours, keras_path = (np.abs(out - expected_float).max() for out in (got, _keras_int8_path(monkeypatch, make)))
    print(f"from the float32 model: ours {ours:.4g}, Keras' int8 call {keras_path:.4g}")
    assert 0 < ours <= 2 * keras_path and keras_path <= 0.1 * np.abs(expected_float).max()
