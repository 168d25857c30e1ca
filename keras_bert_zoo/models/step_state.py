"""The variables a train or test step would create in its first trace, created before it.

Without a distribution strategy Keras leaves the optimizer's slots and the compiled
metrics' state (`compile(metrics=[...])`) to the first traced step, and a `tf.function`
whose first trace creates variables is traced a second time. `compile(metrics=["accuracy"])`
(a metric named, so Keras makes it in the first trace) did that to every train and test step;
a trace of MiniLM's train step is not cheap: `fit` of 320 SST-2 sentences took 11.9 s with the
second trace and 9.1 s without (the retired `first_call.py`, in git history). Creating that state first, from the dataset's
element spec and the model's symbolic outputs (no batch is run), leaves one trace per step.

Under a strategy Keras builds all of it in the strategy's scope itself (and the jobs' loop
calls Keras' symbolic build), so these do nothing there.

Examples:
>>> import keras, numpy as np, tensorflow as tf
>>> from keras_bert_zoo.models.step_state import build_step_state
>>> inputs = keras.Input((4,))
>>> model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
>>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
>>> ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), "float32"), np.zeros(8, "int32"))).batch(4)
>>> build_step_state(model, ds.element_spec)
>>> sorted(v.path for v in model.metrics_variables)
['accuracy/count', 'accuracy/total', 'loss/count', 'loss/total']
>>> model.optimizer.built
True
"""

import keras

__all__ = ["build_metrics", "build_optimizer", "build_step_state"]


def _has_strategy(model):
    from keras_bert_zoo.keras_compat import distribute_strategy

    return distribute_strategy(model) is not None


def build_optimizer(model):
    """Creates the optimizer's slot variables now (a built model, no strategy)."""
    optimizer = getattr(model, "optimizer", None)
    if not _has_strategy(model) and optimizer is not None and not optimizer.built and model.built:
        optimizer.build(model.trainable_variables)


def build_metrics(model, element_spec):
    """Creates the compiled metrics' variables for batches of `element_spec` (`(x, y)` or
    `(x, y, sample_weight)` specs, as a `tf.data.Dataset`'s) and the model's outputs.

    A no-op without labels in the spec, under a strategy, for a model that is not built
    or is not Functional (its outputs are not known without running it), and once built.
    """
    if _has_strategy(model) or not model.built:
        return
    unbuilt = [m for m in model.metrics if getattr(m, "built", True) is False and hasattr(m, "build")]
    if not unbuilt or not isinstance(element_spec, tuple):
        return
    _, y, _ = keras.utils.unpack_x_y_sample_weight(element_spec)
    try:
        y_pred = model.output
    except (AttributeError, ValueError):  # not Functional (a Sequential or subclassed model never called)
        return
    if y is None:
        return
    y_true = keras.tree.map_structure(lambda s: keras.KerasTensor(tuple(s.shape), s.dtype.name), y)
    for metric in unbuilt:
        metric.build(y_true, y_pred)


def build_step_state(model, element_spec=None):
    """`build_optimizer` and, with an `element_spec`, `build_metrics`."""
    build_optimizer(model)
    if element_spec is not None:
        build_metrics(model, element_spec)
