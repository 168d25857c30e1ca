"""One traced inference forward, shared by Keras' test step and predict step (TensorFlow).

Keras traces `test_step` (for `evaluate`) and `predict_step` (for `predict`) as two
functions, and each traces the model's forward anew. For MiniLM that forward is ~1,100
graph ops, ~0.3 s of Python per trace, a fixed cost of the first `evaluate` and of the
first `predict` of every process (docs/benchmarks.md, "First calls"). While Keras traces
either step, `Task.__call__(x, training=False)` calls a traced inference forward kept on
the model instead, traced once per input structure with every dimension left open (one
graph for every batch size and width): the second of `evaluate` / `predict` reuses the
first's trace. Graph optimisation inlines the call, so each step still runs as one graph.

Only on the TensorFlow backend, outside XLA (`jit_compile`) and distribution strategies
(a replica's trace would capture that replica's variables); elsewhere Keras' steps trace
the forward themselves, as before.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo import BertBackbone
>>> from keras_bert_zoo.models.classifier import BertClassifier
>>> from keras_bert_zoo.models.inference_forward import traced_forwards
>>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
>>> model = BertClassifier(backbone, num_classes=2)
>>> model.compile()
>>> x = {"token_ids": np.array([[2, 7, 3, 0]]), "segment_ids": np.zeros((1, 4), "int32"),
...      "padding_mask": np.array([[1, 1, 1, 0]])}
>>> _ = model.evaluate(x, np.array([1]), verbose=0)
>>> _ = model.predict(x, verbose=0)
>>> len(traced_forwards(model))  # evaluate traced it, predict reused it
1
"""

import contextlib

import keras
import tensorflow as tf

__all__ = ["sharing_forward", "shared_forward_call", "traced_forwards"]

_ACTIVE = "_sharing_inference_forward"
_TRACES = "_inference_forward_traces"


def _applies(model):
    return (keras.backend.backend() == "tensorflow" and not model.jit_compile
            and not tf.distribute.has_strategy() and getattr(model, "_distribute_strategy", None) is None)


@contextlib.contextmanager
def sharing_forward(model):
    """While Keras traces a test or predict step of `model`, `model(x, training=False)`
    calls the shared traced forward (`shared_forward_call`)."""
    if not _applies(model):
        yield
        return
    # object.__setattr__: plain Python state, outside Keras' and TF's attribute tracking.
    object.__setattr__(model, _ACTIVE, True)
    try:
        yield
    finally:
        object.__setattr__(model, _ACTIVE, False)


def traced_forwards(model):
    """The traced inference forwards kept on `model`: one per input structure and dtypes."""
    return model.__dict__.get(_TRACES, {})


def shared_forward_call(model, args, kwargs, call):
    """`call(*args, **kwargs)` (the model's own `__call__`), through the shared traced
    forward when a step is being traced and the call is the inference forward of one input;
    None when it does not apply (the caller then calls `call` itself)."""
    if not (model.__dict__.get(_ACTIVE) and len(args) == 1 and kwargs == {"training": False}
            and tf.inside_function()):
        return None
    x = args[0]
    leaves = tf.nest.flatten(x)
    if not leaves or not all(isinstance(t, tf.Tensor) for t in leaves):
        return None
    spec = tf.nest.map_structure(lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), x)
    key = repr(spec)  # the structure, names, ranks and dtypes
    traces = model.__dict__.get(_TRACES)
    if traces is None:
        traces = {}
        object.__setattr__(model, _TRACES, traces)
    if key not in traces:
        traces[key] = tf.function(lambda inputs: call(inputs, training=False)).get_concrete_function(spec)
    return traces[key](x)
