"""int8 inference: Keras' `quantize("int8")` arithmetic, run by oneDNN's u8s8 kernel on TensorFlow.

`model.quantize("int8")` turns every `Dense` into int8 weights with one scale per output
channel (abs-max) and quantizes each input row on the fly (abs-max over the features,
[-127, 127]); the matmul is int8 x int8 -> int32, then divided by both scales. On
TensorFlow Keras runs that matmul as `MatMul(int8, int8, output_type=int32)`, which is
not a oneDNN kernel: it ran at 0.3x the float32 matmul here (docs/decisions.md, "int8
inference"). `Int8Dense` keeps Keras' variables, quantizer and numbers and runs the same
integer product through `QuantizedMatMulWithBiasAndDequantize`, oneDNN's u8 x s8 inner
product (VNNI): the int8 rows shifted by +128 to uint8, the shift taken back by a bias of
-128 x each column's sum of the int8 kernel (a weight, `zero_point_bias`, computed when the
kernel is set: at `quantize` and when weights load), scales of 1 so the kernel sees plain
integers. The sums are exact integers, so the outputs equal Keras' own int8 path
(tests/models/test_int8.py); a MiniLM layer's matmuls run 1.5-5x faster than float32.
Under a mixed bfloat16 policy (`with_precision(model, "bf16")`, a global `mixed_bfloat16`)
the same float32 product runs and its output is cast to bfloat16; Keras' own int8 call
would run TensorFlow's int8 `MatMul` instead, the slow one.

The fast path applies on the TensorFlow backend, float32 variables computing in float32 or
bfloat16, outside XLA, with Keras' default activation quantizer and no LoRA, on a CPU with
VNNI where TensorFlow runs oneDNN exactly (`onednn_int8_exact`: its default on such CPUs;
`TF_ENABLE_ONEDNN_OPTS=0` turns it off, and without oneDNN the op has no output). A graph
holding the op serves only where it runs so: `export_saved_model(..., int8_kernel="portable")`
traces the float32 product below instead, for other CPUs. Without VNNI (an AVX2-only CPU) oneDNN's u8 x s8 product may saturate 16-bit pair sums
(the shift puts uint8 values up to 255), and TensorFlow's int8 `MatMul` is the slow one: the
same integers, quantized the same way, go through the float32 matmul instead (`q @ kernel`
in float32: each product and partial sum is an integer, exact below 2^24, so for inputs up to
1,040 features wide at any values, and within float32 rounding beyond). The numbers are Keras'
int8 numbers, at 0.8x float32's speed (the per-row quantization is extra work): int8 gains
nothing on such a CPU (`keras_bert_zoo.hardware`, which warns once at `quantize`). Everywhere else `Int8Dense` is
Keras' `Dense`. Float layers are untouched: `Int8Dense` only adds an int8 call and lets
Keras' `quantize` accept the subclass.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.models.layers.int8 import Int8Dense
>>> layer = Int8Dense(4)
>>> x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
>>> before = np.asarray(layer(x))
>>> layer.quantize("int8")
>>> layer.quantization_mode
'int8'
>>> bool(np.abs(np.asarray(layer(x)) - before).max() < 0.05)
True
"""

import contextlib
import functools

import keras
from keras import ops

from keras_bert_zoo import hardware
from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.keras_compat import autocast_scope, dense_kernel_variable
from keras_bert_zoo.models.layers.lora_dense import LoraDense
from keras_bert_zoo.models.quantization import (  # the model-level half; this module keeps exporting it
    QUANTIZABLE,
    check_float_policy,
    one_garbage_collection,
    preset_extra,
    quantizable_filter,
    quantization_config,
    requantize,
)

__all__ = [
    "Int8Dense",
    "zero_point_bias",
    "embedding_matrix",
    "QUANTIZABLE",
    "host_has_vnni",
    "quantizable_filter",
    "quantization_config",
    "requantize",
    "dense_kernel",
    "preset_extra",
    "check_float_policy",
    "one_garbage_collection",
    "onednn_int8_exact",
    "onednn_int8_here",
    "portable_int8_product",
]


def host_has_vnni():
    """True where the CPU has 8-bit dot products without 16-bit saturation (AVX512-VNNI,
    AVX-VNNI or AMX-INT8): the oneDNN int8 path is exact there."""
    return hardware.native_int8_cpu()


def _in_xla(tf):
    try:
        from tensorflow.python.ops import control_flow_util

        return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    except (ImportError, AttributeError):  # pragma: no cover - private TF API moved
        return True


def _default_activation_quantizer(quantizer):
    return (
        isinstance(quantizer, keras.quantizers.AbsMaxQuantizer)
        and tuple(quantizer.value_range) == (-127, 127)
        and quantizer.output_dtype == "int8"
        and getattr(quantizer, "axis", None) in (None, (-1,))
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class Int8Dense(LoraDense):
    """`keras.layers.Dense` whose int8 mode runs oneDNN's int8 kernel on TensorFlow.

    The same constructor, variables, float call and `quantize("int8")` as `Dense` (Keras'
    own `quantize` refuses subclasses of `Dense` unless told; this one accepts). Quantized,
    its call computes Keras' int8 result through `QuantizedMatMulWithBiasAndDequantize`
    where that applies (see the module docstring), Keras' own int8 call elsewhere.
    """

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras' `Dense.quantize` skips subclasses with `type_check`; the variables and
        # the arithmetic here are its own, so the check does not concern this class.
        super().quantize(mode, type_check=False, config=config)
        self.refresh_zero_point_bias()

    def quantized_build(self, kernel_shape, mode, config=None):
        super().quantized_build(kernel_shape, mode, config)
        if mode == "int8":
            # The +128 shift's correction depends on the int8 kernel only: held beside it,
            # computed when the kernel changes (quantize, load), not in every call. A Keras
            # weight, so the shared block trace passes each block's own in, `get_weights` /
            # `set_weights` carry it with the kernel, and SavedModels capture it. Keras'
            # `save_own_variables` writes the named int8 variables only: files do not hold it.
            # Never autocast: its values reach 128 x 127 x the input width, beyond bfloat16's 8 bits.
            self.zero_point_bias = self.add_weight(
                name="zero_point_bias",
                shape=(self.units,),
                initializer="zeros",
                dtype="float32",
                trainable=False,
                autocast=False,
            )

    def refresh_zero_point_bias(self):
        """Recomputes the cached shift correction from the int8 kernel (a no-op unless int8):
        call it after assigning the int8 kernel directly (Keras' `quantize` and weight
        loading do it themselves)."""
        if self.quantization_mode == "int8" and getattr(self, "zero_point_bias", None) is not None:
            self.zero_point_bias.assign(zero_point_bias(dense_kernel_variable(self)))

    def load_own_variables(self, store):
        if self.quantization_mode != "int8" or self.lora_enabled:
            return super().load_own_variables(store)
        # Keras' `Dense.load_own_variables` expects one stored tensor per variable; the
        # cached correction has none (see `quantized_build`): the same loading, then it.
        names = [n for n in self.variable_serialization_spec["int8"] if n != "bias" or self.bias is not None]
        if len(store.keys()) != len(names):
            raise CheckpointError(
                f"layer {self.path!r} is int8-quantized and expects {len(names)} saved tensors "
                f"({', '.join(names)}); the file has {len(store.keys())}: it was saved from "
                "another model. Load it into a model built and quantized the same way."
            )
        for i, name in enumerate(names):
            (dense_kernel_variable(self) if name == "kernel" else getattr(self, name)).assign(store[str(i)])
        self.refresh_zero_point_bias()

    def _int8_call(self, inputs, training=None):
        kernel_path = self.int8_kernel_path(inputs)
        if kernel_path is None:
            return super()._int8_call(inputs, training=training)
        import tensorflow as tf

        # Under a mixed policy (bfloat16 compute) the int8 product runs in float32 around the
        # kernel and only its output is cast to bfloat16. The reads are float32 (the shared
        # block trace passes the scale and bias in already cast to bfloat16: cast back; the
        # shift is never autocast, its integers need float32).
        with autocast_scope(None):
            kernel = tf.convert_to_tensor(dense_kernel_variable(self))
            kernel_scale = tf.cast(self.kernel_scale, tf.float32)
            shift = tf.convert_to_tensor(self.zero_point_bias)
            bias = None if self.bias is None else tf.cast(self.bias, tf.float32)

        @tf.custom_gradient
        def product(x):
            rows = tf.reshape(x, [-1, x.shape[-1]])
            # Keras' AbsMaxQuantizer: scale = 127 / (max|row| + eps), round half to even.
            scale = 127.0 / (tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) + keras.backend.epsilon())
            q = tf.clip_by_value(tf.round(rows * scale), -127.0, 127.0)
            if kernel_path == "onednn":
                out = _onednn_product(q, kernel, shift)
            else:  # "float32": the same integer products through the float32 matmul (see the module)
                out = tf.matmul(q, tf.cast(kernel, tf.float32))
            out = tf.reshape(out / (kernel_scale * scale), tf.concat([tf.shape(x)[:-1], [self.units]], 0))

            def grad(upstream):  # as Keras' int8 call: through the dequantized kernel
                return tf.matmul(upstream, tf.cast(kernel, upstream.dtype) / kernel_scale, transpose_b=True)

            return out, grad

        x = product(ops.cast(inputs, "float32"))
        if bias is not None:
            x = ops.add(x, bias)
        if self.activation is not None:
            x = self.activation(x)
        return ops.cast(x, self.compute_dtype)

    def int8_kernel_path(self, inputs):
        """Which product this layer's int8 call runs on `inputs`: `"onednn"` (oneDNN's u8 x s8
        kernel, where it runs exactly: a CPU with VNNI), `"float32"` (the same integers through the
        float32 matmul: other CPUs, or inside `portable_int8_product`), or None (Keras' own call)."""
        if keras.backend.backend() != "tensorflow" or self.lora_enabled:
            return None
        import tensorflow as tf

        if not (
            self.compute_dtype in ("float32", "bfloat16")
            and self.variable_dtype == "float32"
            and _default_activation_quantizer(self.inputs_quantizer)
            and getattr(self, "zero_point_bias", None) is not None
            and getattr(inputs, "shape", None) is not None
            and inputs.shape.rank is not None
            and not _in_xla(tf)
        ):
            return None
        return "onednn" if onednn_int8_here() else "float32"


def _onednn_product(q, kernel, shift):
    """`q @ kernel` of float integers in [-127, 127] and an int8 kernel, by oneDNN's u8 x s8 kernel:
    q + 128 as uint8, scales of 1 (min/max 0..255 and -127..127, so the kernel multiplies the
    integers as they are), and the bias `shift` (`zero_point_bias`) takes the +128 back out, exactly."""
    import tensorflow as tf

    return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=tf.bitcast(tf.cast(q + 128.0, tf.uint8), tf.quint8),
        b=tf.bitcast(kernel, tf.qint8),
        bias=shift,
        min_a=0.0,
        max_a=255.0,
        min_b=-127.0,
        max_b=127.0,
        min_freezed_output=0.0,
        max_freezed_output=1.0,
        Toutput=tf.float32,
        input_quant_mode="SCALED",
    )


# The check's product: 8 rows of 64 values at the top of the range, against a kernel of 127s.
# Exact, each output is 64 x 127 x 127; where oneDNN's u8 x s8 kernel saturates 16-bit pair sums
# (a CPU without VNNI: (127 + 128) x 127 x 2 > 32767) it is far less, and without oneDNN the op
# returns an empty tensor (eagerly; in a graph it fails: "Missing 0-th output").
_PROBE_ROWS, _PROBE_WIDTH = 8, 64


@functools.lru_cache(maxsize=1)
def onednn_int8_exact():
    """True when TensorFlow runs oneDNN's quantized matmul in this process and its sums are exact.
    TensorFlow turns oneDNN on by default only on CPUs with AVX-512 VNNI / BF16 or AMX features
    (`TF_ENABLE_ONEDNN_OPTS=0` turns it off), and on a CPU without VNNI
    (`TF_ENABLE_ONEDNN_OPTS=1` on AVX2) its 16-bit pair sums saturate."""
    import tensorflow as tf

    with tf.init_scope():  # eager, even when asked while a graph is traced
        kernel = tf.fill([_PROBE_WIDTH, 1], tf.constant(127, tf.int8))
        out = _onednn_product(
            tf.fill([_PROBE_ROWS, _PROBE_WIDTH], 127.0), kernel, tf.constant([-128.0 * 127 * _PROBE_WIDTH])
        )
        return out.shape.num_elements() == _PROBE_ROWS and bool(tf.reduce_all(out == _PROBE_WIDTH * 127 * 127))


_PORTABLE = [False]  # set by `portable_int8_product`


def onednn_int8_here():
    """True when int8 layers traced now take oneDNN's kernel: a CPU with VNNI where it runs exactly,
    outside `portable_int8_product`. The one rule `Int8Dense` and the SavedModel export both read,
    and part of the shared block traces' key (`block_trace`), so a trace of one kind is not reused
    for the other."""
    return not _PORTABLE[0] and host_has_vnni() and onednn_int8_exact()


@contextlib.contextmanager
def portable_int8_product():
    """Within it, int8 layers traced (or called) take the float32 product, never oneDNN's
    kernel: a graph that runs on any CPU (`export_saved_model(..., int8_kernel="portable")`)."""
    _PORTABLE[0] = True
    try:
        yield
    finally:
        _PORTABLE[0] = False


def zero_point_bias(kernel):
    """-128 x each column's sum of an int8 `[in, out]` kernel: the bias that takes the +128
    shift of the uint8 inputs back out (integers below 2^24, exact in float32)."""
    return ops.multiply(-128.0, ops.sum(ops.cast(kernel, "float32"), axis=0))


def dense_kernel(layer):
    """The float `[in, out]` kernel of a `keras.layers.Dense`, quantized or not (`Dense.kernel`
    is the raw int8 kernel once quantized; each output channel carries a scale). The
    variable itself when not quantized (checkpoint loading assigns to it)."""
    if layer.quantization_mode is None:
        return layer.kernel
    if layer.quantization_mode != "int8":
        from keras_bert_zoo.errors import UsageError

        raise UsageError(
            f"layer {layer.name!r} is quantized as {layer.quantization_mode!r}; presets hold "
            'float weights of int8 models only: quantize with mode="int8" or save with model.save().'
        )
    return ops.divide(ops.cast(layer.kernel, "float32"), ops.cast(layer.kernel_scale, "float32"))


def embedding_matrix(layer):
    """The float `[input_dim, output_dim]` matrix of a `keras.layers.Embedding`, quantized
    or not (`Embedding.embeddings` is the raw int8 table once quantized; its rows carry
    one scale each, `embeddings_scale`). Readers of the whole table (the tied MLM decoder,
    the position slice) call this."""
    mode = layer.quantization_mode
    if mode is None:
        return layer.embeddings
    if mode in ("int8", "int4") and len(layer.embeddings_scale.shape) == 1:
        return ops.divide(
            ops.cast(layer.embeddings, layer.compute_dtype),
            ops.expand_dims(ops.cast(layer.embeddings_scale, layer.compute_dtype), -1),
        )
    from keras_bert_zoo.errors import UsageError

    raise UsageError(
        f"embedding {layer.name!r} is quantized as {mode!r}, which BERT's tied decoder cannot read; "
        'quantize with mode="int8".'
    )
