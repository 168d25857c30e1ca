"""bf16 training on CPU: `jit_compile="auto"` leaves XLA out (its CPU backend has no bf16 matmul
kernels), the non-XLA step really multiplies in bfloat16, and its gradients stay near float32's.
No timing here: the speed figures are docs/decisions.md's ("bf16 training on CPU")."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.training import resolve_jit_compile

TINY = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=16,
    dropout=0.0,
)
CPU_ONLY = not (tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))


@pytest.mark.parametrize("gpus", [[], ["GPU:0"]])
def test_auto_jit_is_timed_except_bf16_without_accelerators(monkeypatch, gpus):
    devices = {"GPU": gpus, "TPU": []}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: devices.get(kind, []))
    assert resolve_jit_compile("auto", "none") == "auto"  # left to the start-up timing
    assert resolve_jit_compile("auto", "fp16") == "auto"
    # XLA's CPU backend has no bf16 matmuls: never XLA there; with a GPU it is timed.
    assert resolve_jit_compile("auto", "bf16") == ("auto" if gpus else False)
    assert resolve_jit_compile("auto", "bf16", strategy="tpu") is True  # a TPU always compiles
    assert resolve_jit_compile(False, "bf16", strategy="tpu") is True


def test_explicit_jit_is_kept_and_anything_else_refused():
    assert resolve_jit_compile(True, "bf16") is True
    assert resolve_jit_compile(False, "none") is False
    for bad in ("false", "true", 1, None):
        with pytest.raises(ValueError, match="use True, False or 'auto'"):
            resolve_jit_compile(bad, "none")


def test_pretrain_cli_defaults_to_auto():
    import argparse

    from keras_bert_zoo.commands import pretrain

    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    assert parser.get_default("jit_compile") == "auto"


def _model(policy):
    keras.config.set_dtype_policy(policy)
    try:
        backbone = BertBackbone(**TINY)
        inputs = {k: keras.Input((8,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
        logits = keras.layers.Dense(2, dtype="float32")(backbone(inputs)["pooled_output"])
        return keras.Model(inputs, logits)
    finally:
        keras.config.set_dtype_policy("float32")


def _batch():
    rng = np.random.default_rng(0)
    mask = np.ones((4, 8), "int32")
    mask[1, 5:] = 0
    return {
        "token_ids": rng.integers(1, 50, (4, 8)).astype("int32"),
        "segment_ids": np.zeros((4, 8), "int32"),
        "padding_mask": mask,
    }, np.array([0, 1, 1, 0])


def _grad_step(model):
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    return step


def test_bf16_step_multiplies_in_bfloat16_and_gradients_follow_float32():
    # Fixed initialisation (seeds 0-5 gave a relative gradient error of 0.006-0.011 and a
    # smallest per-variable cosine of 0.992-0.9997, well inside the bounds below).
    keras.utils.set_random_seed(0)
    full, mixed = _model("float32"), _model("mixed_bfloat16")
    mixed.set_weights(full.get_weights())
    x, y = _batch()
    step_full, step_mixed = _grad_step(full), _grad_step(mixed)
    loss_full, grads_full = step_full(x, y)
    loss_mixed, grads_mixed = step_mixed(x, y)

    # The graph TensorFlow runs without XLA: every matmul of the encoder is a bfloat16 MatMul
    # (oneDNN's bf16 kernels), forward and backward.
    # The blocks run through one shared trace (`block_trace`): their matmuls sit in its forward and
    # backward functions, in the graph's function library.
    graph = step_mixed.get_concrete_function(x, y).graph.as_graph_def()
    kinds = ("MatMul", "BatchMatMulV2", "BatchMatMulV3")
    encoder = [node for node in graph.node if node.op in kinds and "encoder_layer" in node.name]
    encoder += [node for function in graph.library.function for node in function.node_def if node.op in kinds]
    assert len(encoder) >= 2 * 8, [node.name for node in encoder]  # per block: 8 matmuls forward, more backward
    assert {tf.as_dtype(node.attr["T"].type) for node in encoder} == {tf.bfloat16}
    # Variables stay float32, so the optimizer updates float32 weights.
    assert all(v.dtype == "float32" for v in mixed.trainable_variables)
    assert all(g.dtype == tf.float32 for g in grads_mixed if g is not None)

    np.testing.assert_allclose(float(loss_mixed), float(loss_full), rtol=2e-2)
    flat = [
        np.concatenate([tf.reshape(tf.convert_to_tensor(g), [-1]).numpy() for g in grads])
        for grads in (grads_full, grads_mixed)
    ]
    # bf16 keeps 8 mantissa bits (relative step 2^-8 ~ 0.4%): the whole gradient agrees to a few
    # percent, and each variable's points the same way (the key bias, whose gradient is 0 in exact
    # arithmetic because softmax ignores a constant added to every score, is left out by the norm).
    assert np.linalg.norm(flat[1] - flat[0]) <= 0.05 * np.linalg.norm(flat[0])
    for v, a, b in zip(full.trainable_variables, grads_full, grads_mixed, strict=True):
        a, b = tf.convert_to_tensor(a).numpy().ravel(), tf.convert_to_tensor(b).numpy().ravel()
        if np.linalg.norm(a) > 1e-4 * np.linalg.norm(flat[0]):
            cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
            assert cosine > 0.97, (v.path, cosine)
