"""The encoder's activations: a 16-bit tensor in training takes the float32 erf form of GELU.

Reference: GELU computed in float64 with `math.erf` (HF's `gelu` formula).
"""

import math

import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.layers.activations import get_activation


def _reference(x):
    return np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.ravel()]).reshape(x.shape)


def test_bf16_gelu_in_training_is_the_float32_erf_form_rounded_once():
    x = np.random.default_rng(0).normal(scale=3.0, size=(64, 48)).astype("float32")
    gelu = get_activation("gelu")
    half = tf.constant(x, tf.bfloat16)
    got = gelu(half, training=True)
    assert got.dtype == tf.bfloat16
    wide = np.asarray(tf.cast(half, tf.float32), "float64")
    # one rounding of the float64 value: every element is the bf16 nearest (or next) to the exact GELU
    want = np.asarray(tf.cast(tf.constant(_reference(wide), tf.float32), tf.bfloat16), "float32")
    np.testing.assert_allclose(np.asarray(got, "float32"), want, rtol=2**-7, atol=1e-6)
    # inference keeps Keras' form (which TF fuses into the matmul); float32 is unchanged in training
    assert gelu(half, training=False).dtype == tf.bfloat16
    np.testing.assert_allclose(np.asarray(gelu(tf.constant(x), training=True)), _reference(x), rtol=1e-5, atol=1e-6)
