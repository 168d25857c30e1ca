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
LoRA setting (`lora_state`: the adapters are weights passed in like the others), and not the
`[CLS]`-only path of the last block (`query_index`). Training calls trace as before (their
dropout has random state to carry). JAX and eager calls never come here.

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

import json

import keras
import tensorflow as tf

from keras_bert_zoo.keras_compat import autocast_scope, sublayers

__all__ = ["inference_call", "shared_block_traces", "clear_shared_block_traces"]

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
    return (block.built and keras.backend.backend() == "tensorflow" and tf.inside_function()
            and not tf.distribute.has_strategy()
            and isinstance(x, tf.Tensor) and isinstance(attention_bias, tf.Tensor)
            and x.dtype.is_floating and attention_bias.dtype.is_floating and x.shape.rank is not None
            and attention_bias.shape.rank is not None
            and policy.quantization_mode is None and policy.variable_dtype == "float32"
            and policy.compute_dtype in ("float32", "bfloat16", "float16")
            # `quantize("int8")` changes the sub-layers, not the block's policy: their int8
            # kernels are passed in as the float weights (`_weights`); other modes go through Keras.
            and all(layer.quantization_mode in (None, "int8") for layer in sublayers(block)))


def inference_call(block, x, attention_bias):
    """`block(x, attention_bias, training=False)` through the shared trace of its
    configuration; None where that does not apply (the caller calls the block itself)."""
    if not _applies(block, x, attention_bias):
        return None
    # What Keras' `__call__` does before `call`: float inputs cast to the compute dtype, and under a
    # mixed policy (float32 variables, bfloat16 compute) an autocast scope that casts each variable
    # read to the compute dtype.
    compute_dtype = block.compute_dtype
    x, attention_bias = (tf.cast(t, compute_dtype) if block.autocast and t.dtype != compute_dtype else t
                         for t in (x, attention_bias))
    config = {k: v for k, v in block.get_config().items() if k not in ("name", "trainable")}
    # Batch and width left open: one graph for every batch.
    weight_specs = [tf.TensorSpec(v.shape, v.dtype) for v in _weights(block)]
    x_spec = tf.TensorSpec([None] * (x.shape.rank - 1) + [x.shape[-1]], x.dtype)
    bias_spec = tf.TensorSpec([None] * attention_bias.shape.rank, attention_bias.dtype)
    # The class too: a subclass may compute something else from the same configuration.
    cls = f"{type(block).__module__}.{type(block).__qualname__}"
    # LoRA too: which sub-layers add `alpha / rank * a @ b` to their kernel is Python state
    # read while tracing, and two blocks with adapters of one shape may scale them differently.
    lora = block.lora_state() if hasattr(block, "lora_state") else ()
    key = json.dumps([cls, config, lora, repr(weight_specs), repr(x_spec), repr(bias_spec)], sort_keys=True,
                     default=str)
    if key not in _TRACES:
        template = _weights(block)
        mixed = compute_dtype != block.variable_dtype

        def forward(values, x, attention_bias):
            with keras.StatelessScope(state_mapping=list(zip(template, values))):
                if not mixed:
                    return block.call(x, attention_bias, training=False)
                with autocast_scope(compute_dtype):
                    return block.call(x, attention_bias, training=False)

        function = tf.function(forward, autograph=False).get_concrete_function(weight_specs, x_spec, bias_spec)
        _TRACES[key] = function
    return _TRACES[key]([v.value for v in _weights(block)], x, attention_bias)


def _weights(block):
    """The variables an inference call reads: the float ones, trainable or frozen, and the
    int8 kernels of quantized layers (the dropout layers' seed states, other integers, are
    read only in training; a serving SavedModel must not capture them). A variable left out
    would be captured by the trace from the first block traced and read by every block of
    its configuration: with int8 kernels left out, every layer of a quantized model
    computed with layer 0's kernels (SST-2 dev accuracy 0.80 -> 0.52)."""
    return [v for v in block.variables if "float" in str(v.dtype) or str(v.dtype) == "int8"]
