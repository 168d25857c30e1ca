"""`export_saved_model(..., precision="bfloat16")`: the served graph computes in bfloat16.

References: the same classifier built under Keras' own `mixed_bfloat16` policy (a second
model, same weights, Keras' autocasting) and its float32 `predict`.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertClassifier
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.export.saved_model import export_saved_model
from tests.export.test_saved_model import TEXTS, classifier  # noqa: F401  (fixture)


def _mixed_twin(model):
    """The model rebuilt under Keras' global mixed_bfloat16 policy, with its weights."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        config = model.get_config()
        config["backbone"]["config"].pop("dtype", None)
        config.pop("preprocessor", None)
        twin = BertClassifier.from_config(config)
        twin.preprocessor = model.preprocessor
    finally:
        keras.config.set_dtype_policy("float32")
    twin.set_weights(model.get_weights())
    return twin


def test_bf16_export_serves_the_mixed_bfloat16_model(classifier, tmp_path):  # noqa: F811
    path = export_saved_model(classifier, str(tmp_path / "bf16"), precision="bf16")
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    probabilities = served["probabilities"].numpy()
    twin = _mixed_twin(classifier)
    assert twin.backbone.get_layer("encoder_layer_0").compute_dtype == "bfloat16"
    want = keras.ops.softmax(twin.predict(TEXTS, verbose=0)).numpy()
    np.testing.assert_allclose(probabilities, want, atol=1e-2)
    full = keras.ops.softmax(classifier.predict(TEXTS, verbose=0)).numpy()
    assert 0 < np.abs(probabilities - full).max() < 5e-2  # bf16 rounding: close, not equal
    assert json.load(open(os.path.join(path, "assets", "export_info.json")))["precision"] == "bfloat16"
    # The model itself is float32 again, and its own predictions did not change.
    assert classifier.backbone.get_layer("encoder_layer_0").compute_dtype == "float32"
    np.testing.assert_array_equal(keras.ops.softmax(classifier.predict(TEXTS, verbose=0)).numpy(), full)


def test_the_graph_multiplies_in_bfloat16(classifier):  # noqa: F811
    from keras_bert_zoo.models.precision import with_precision

    x = classifier.preprocessor(tf.constant(TEXTS[:2]))
    twin = with_precision(classifier, "bfloat16")
    graph = tf.function(lambda x: twin(x, training=False)).get_concrete_function(x).graph
    matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
    # the shared block trace holds the encoder's matmuls: look into the functions it calls
    for function in graph._functions.values():
        matmuls += [op for op in function.graph.get_operations() if op.type == "MatMul"]
    assert matmuls and all(op.get_attr("T") == tf.bfloat16 for op in matmuls)


def test_unknown_precision_is_refused_before_any_work(classifier, tmp_path):  # noqa: F811
    with pytest.raises(UsageError, match="precision='int4' is not one of"):
        export_saved_model(classifier, str(tmp_path / "x"), precision="int4")
    assert not (tmp_path / "x").exists()
