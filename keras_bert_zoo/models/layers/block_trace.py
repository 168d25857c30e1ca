"""One traced inference graph for all encoder blocks of one shape (TensorFlow backend).

Tracing a forward costs TF ~0.3 ms of Python per graph op, and the first run of a new
graph adds its optimisation; `evaluate` and `predict` pay both once per process before
their first batch (docs/decisions.md, "One traced inference graph per encoder-block
shape"). A model's encoder blocks are the same graph with different weights, so inside a
`tf.function` an inference call of a `BertEncoderBlock` (`training=False`) calls one
concrete function, traced once per block configuration and input dtypes, with the block's
weights passed in (`keras.StatelessScope`). MiniLM's traced inference forward goes from
1,063 to 573 ops; the outputs are the same.

It applies only where nothing else differs: the TensorFlow backend, inside a traced
function, built blocks, float inputs of known rank, outside distribution strategies,
float32 variables computing in float32 or (mixed precision) bfloat16 / float16 (sub-layers
float32 or `quantize("int8")`-ed: their int8 kernels are weights passed in like the others), one
trace per block class (a subclass may compute something else from the same configuration) and
LoRA setting (`lora_state`: the adapters are weights passed in like the others). The `[CLS]`-only
inference path of the last block (`query_index`) has a trace of its own per configuration, so a
`predict` after an `evaluate` (or another model of the shape) traces no encoder block. Training calls (`training_call`) share a
trace of their own, with the dropout layers' seed states passed in and their next values
assigned back; the tape differentiates the call, so the forward and its gradient are traced once
for all blocks (the first `fit` step of MiniLM: docs/decisions.md). They apply where every float
variable of the block trains and nothing is quantized. JAX and eager calls never come here.

Examples:
>>> import numpy as np, tensorflow as tf
>>> from keras_bert_zoo.models.layers.encoder_block import BertEncoderBlock
>>> from keras_bert_zoo.models.layers.block_trace import clear_shared_block_traces, shared_block_traces
>>> clear_shared_block_traces()
>>> blocks = [BertEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=16) for _ in range(3)]
>>> x, bias = np.ones((2, 5, 8), "float32"), np.zeros((2, 1, 5, 5), "float32")
>>> eager = [block(x, bias, training=False) for block in blocks]  # builds them
>>> @tf.function
... def forward(x, bias):
...     for block in blocks:
...         x = block(x, bias, training=False)
...     return x
>>> forward(x, bias).shape
TensorShape([2, 5, 8])
>>> len(shared_block_traces())  # three blocks, one trace
1
"""

import contextlib
import json

import keras
import tensorflow as tf

from keras_bert_zoo.keras_compat import autocast_scope, sublayers
from keras_bert_zoo.models.layers import int8

__all__ = ["inference_call", "training_call", "shared_block_traces", "clear_shared_block_traces"]

# (configuration, input specs) -> concrete function. It ran one block's `call` with that block's
# weights mapped to the values passed in and captures none of them, so every block of the
# configuration (of any model) can call it, and the block traced is not kept alive by it.
_TRACES = {}


def shared_block_traces():
    """The concrete functions traced so far, one per block configuration and input signature."""
    return dict(_TRACES)


def clear_shared_block_traces():
    """Forgets the traces; the next inference trace of each configuration traces its block again."""
    _TRACES.clear()


def _applies(block, x, attention_bias):
    policy = block.dtype_policy
    # Inputs of unknown rank, or integer ones, go through Keras' `__call__`.
    return (
        block.built
        and keras.backend.backend() == "tensorflow"
        and tf.inside_function()
        and not tf.distribute.has_strategy()
        and isinstance(x, tf.Tensor)
        and isinstance(attention_bias, tf.Tensor)
        and x.dtype.is_floating
        and attention_bias.dtype.is_floating
        and x.shape.rank is not None
        and attention_bias.shape.rank is not None
        and policy.quantization_mode is None
        and policy.variable_dtype == "float32"
        and policy.compute_dtype in ("float32", "bfloat16", "float16")
        # `quantize("int8")` changes the sub-layers, not the block's policy: their int8
        # kernels are passed in as the float weights (`_weights`); other modes go through Keras.
        and all(layer.quantization_mode in (None, "int8") for layer in sublayers(block))
    )


def inference_call(block, x, attention_bias, query_index=None):
    """`block(x, attention_bias, query_index=query_index, training=False)` through the shared trace
    of its configuration; None where that does not apply (the caller calls the block itself)."""
    if not _applies(block, x, attention_bias):
        return None
    if query_index is not None and not (
        isinstance(query_index, tf.Tensor) and query_index.dtype.is_integer and query_index.shape.rank == 2
    ):
        return None
    return _shared_call(block, x, attention_bias, training=False, query_index=query_index)


def training_call(block, x, attention_bias):
    """`block(x, attention_bias, training=True)` through the shared training trace of its
    configuration, its dropout seeds passed in and their next values assigned back; None where
    that does not apply (the caller calls the block itself).

    A `GradientTape` differentiates the call of the concrete function, so the forward and its
    gradient are traced once for all blocks of a configuration instead of once per block: the
    first `fit` step of MiniLM traces 6 blocks' forward and backward once. Only where every
    float variable of the block trains (a frozen kernel, as under LoRA, would still get its
    gradient computed inside the shared backward) and nothing is quantized.
    """
    if not (
        _applies(block, x, attention_bias)
        and all(v.trainable for v in _weights(block))
        and all(layer.quantization_mode is None for layer in sublayers(block))
    ):
        return None
    return _shared_call(block, x, attention_bias, training=True)


def _shared_call(block, x, attention_bias, training, query_index=None):
    # What Keras' `__call__` does before `call`: float inputs cast to the compute dtype, and under a
    # mixed policy (float32 variables, bfloat16 compute) an autocast scope that casts each variable
    # read to the compute dtype.
    compute_dtype = block.compute_dtype
    x, attention_bias = (
        tf.cast(t, compute_dtype) if block.autocast and t.dtype != compute_dtype else t for t in (x, attention_bias)
    )
    config = {k: v for k, v in block.get_config().items() if k not in ("name", "trainable")}
    # Batch and width left open: one graph for every batch.
    weights, seeds = _weights(block), (_seed_states(block) if training else [])
    weight_specs = [tf.TensorSpec(v.shape, v.dtype) for v in weights]
    seed_specs = [tf.TensorSpec(v.shape, v.dtype) for v in seeds]
    x_spec = tf.TensorSpec([None] * (x.shape.rank - 1) + [x.shape[-1]], x.dtype)
    bias_spec = tf.TensorSpec([None] * attention_bias.shape.rank, attention_bias.dtype)
    # The [CLS]-only path (`query_index` `[n, 2]`) is another graph: its spec is part of the key.
    extra_specs = [] if query_index is None else [tf.TensorSpec([None, 2], query_index.dtype)]
    # The class too: a subclass may compute something else from the same configuration.
    cls = f"{type(block).__module__}.{type(block).__qualname__}"
    # LoRA too: which sub-layers add `alpha / rank * a @ b` to their kernel is Python state
    # read while tracing, and two blocks with adapters of one shape may scale them differently.
    lora = block.lora_state() if hasattr(block, "lora_state") else ()
    # And which int8 product a quantized block's layers trace (oneDNN's kernel, or the portable one).
    int8_path = any(v.dtype == tf.int8 for v in weights) and int8.onednn_int8_here()
    key = json.dumps(
        [
            cls,
            config,
            lora,
            training,
            int8_path,
            repr(weight_specs),
            repr(seed_specs),
            repr(x_spec),
            repr(bias_spec),
            repr(extra_specs),
        ],
        sort_keys=True,
        default=str,
    )
    if key not in _TRACES:
        template, seed_template = list(weights), list(seeds)
        mixed = compute_dtype != block.variable_dtype

        def forward(values, seed_values, x, attention_bias, *query_index):
            mapping = list(zip(template, values, strict=True)) + list(zip(seed_template, seed_values, strict=True))
            with keras.StatelessScope(state_mapping=mapping) as scope:
                with autocast_scope(compute_dtype) if mixed else contextlib.nullcontext():
                    y = block.call(x, attention_bias, *query_index, training=training)
                # The seeds' next values (a dropout of rate 0 draws none: the same seeds).
                new_seeds = [scope.get_current_value(v) for v in seed_template]
            return y, [old if new is None else new for old, new in zip(seed_values, new_seeds, strict=True)]

        function = tf.function(forward, autograph=False).get_concrete_function(
            weight_specs, seed_specs, x_spec, bias_spec, *extra_specs
        )
        _TRACES[key] = function
    extra = [] if query_index is None else [query_index]
    y, new_seeds = _TRACES[key]([v.value for v in weights], [v.value for v in seeds], x, attention_bias, *extra)
    for variable, value in zip(seeds, new_seeds, strict=True):
        variable.assign(value)
    return y


def _weights(block):
    """The variables an inference call reads: the float ones, trainable or frozen, and the
    int8 kernels of quantized layers (the dropout layers' seed states, other integers, are
    read only in training; a serving SavedModel must not capture them). A variable left out
    would be captured by the trace from the first block traced and read by every block of
    its configuration: with int8 kernels left out, every layer of a quantized model
    computed with layer 0's kernels (SST-2 dev accuracy 0.80 -> 0.52)."""
    return [v for v in block.variables if "float" in str(v.dtype) or str(v.dtype) == "int8"]


def _seed_states(block):
    """The dropout layers' seed states (integer variables a training call reads and advances)."""
    return [v for v in block.non_trainable_variables if "int" in str(v.dtype) and str(v.dtype) != "int8"]
