"""Every read of Keras' private API in the package, in one place.

Keras does not promise private names across releases, so
no other module touches them: each has one function here, and
`tests/test_keras_compat.py` calls each against the installed Keras, so an upgrade that
renames one fails that test, naming it, rather than a user's run. Each function says
which private it stands for and why the public API is not enough.

`BertAdamW` (training/optimizer.py) also overrides three Keras optimizer hooks
(`_backend_update_step`, `_clip_gradients`, `_apply_weight_decay`): a subclass can
change a step no other way. `OPTIMIZER_HOOKS` lists them; the test checks Keras'
`AdamW` still has each, with the arguments the subclass expects, and still calls them.

Examples:
>>> import keras
>>> from keras_bert_zoo.keras_compat import distribute_strategy
>>> inputs = keras.Input((2,))
>>> distribute_strategy(keras.Model(inputs, keras.layers.Dense(1)(inputs))) is None  # no strategy given
True
"""

__all__ = [
    "OPTIMIZER_HOOKS",
    "distribute_strategy",
    "symbolic_build",
    "predict_function",
    "metrics_result",
    "sublayers",
    "learning_rate_value",
    "adam_moments",
    "decays",
    "autocast_scope",
    "dense_kernel_variable",
    "forget_steps",
    "all_layers",
]

# Keras optimizer methods `BertAdamW` overrides -> their arguments (after self).
OPTIMIZER_HOOKS = {
    "_backend_update_step": ("grads", "trainable_variables", "learning_rate"),
    "_clip_gradients": ("grads",),
    "_apply_weight_decay": ("variables",),
}


def distribute_strategy(model):
    """The strategy `model` was compiled under, or None when none was given.

    Keras' public `model.distribute_strategy` returns the default strategy when there is
    none, so "built in a strategy's scope" can only be told from `_distribute_strategy`.
    """
    return getattr(model, "_distribute_strategy", None)


def symbolic_build(model, data_batch):
    """Creates the model's, its compiled metrics' and its optimizer's variables for
    batches like `data_batch` (a batch or an element spec) without running a step:
    Keras' `_symbolic_build`, what its own `fit` calls under a strategy."""
    model._symbolic_build(data_batch=data_batch)


def predict_function(model):
    """Keras' traced predict step of `model` (made first if needed): the
    `tf.function` that `predict` calls on each batch, for loops that feed batches one
    at a time (`make_predict_function` creates it; only the attribute holds it)."""
    model.make_predict_function()
    return model.predict_function


def metrics_result(model, logs):
    """The epoch's logs as Keras' `fit` reports them: the compiled metrics' results when
    they have the keys of the last step's `logs`, else `logs` (`_get_metrics_result_or_logs`),
    for a custom loop."""
    return dict(model._get_metrics_result_or_logs(logs))


def sublayers(layer):
    """Every layer inside `layer`, at any depth, without `layer` itself
    (`_flatten_layers(include_self=False)`; the public `layers` lists only the first level)."""
    return list(layer._flatten_layers(include_self=False))


def learning_rate_value(optimizer):
    """The optimizer's learning rate as given: the schedule object, or the rate variable
    (`_learning_rate`; the public `learning_rate` returns the schedule's current value)."""
    return optimizer._learning_rate


def adam_moments(optimizer, variable):
    """`(m, v)`: the first and second moment slots of `variable` in a built Keras
    `Adam`/`AdamW` (`_momentums`, `_velocities`, `_get_variable_index`), for an update
    step written in place of Keras' own."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def decays(optimizer, variable):
    """Whether weight decay applies to `variable` (Keras' `exclude_from_weight_decay`
    rules; `_use_weight_decay`)."""
    return optimizer._use_weight_decay(variable)


def autocast_scope(dtype):
    """The scope Keras' `Layer.__call__` opens under a mixed policy: inside it, reads of float
    variables are cast to `dtype` (`keras.src.backend.AutocastScope`, which has no public name).
    `block_trace` calls a block's `call` directly and so opens it itself."""
    from keras.src.backend import AutocastScope

    return AutocastScope(dtype)


def dense_kernel_variable(layer):
    """A `keras.layers.Dense`'s own kernel variable (`_kernel`): under LoRA the public `kernel`
    is the merged tensor, and quantized it is the int8 table; saving adapters apart and the
    int8 matmul need the variable itself."""
    return layer._kernel


def forget_steps(model):
    """Drops `model`'s traced train / test / predict steps, so the next call traces them anew
    (after a change Python state decides while tracing, e.g. LoRA). Keras has no public reset:
    setting the attributes to None is what its own `compile` does."""
    model.train_function = model.test_function = model.predict_function = None


def all_layers(model):
    """`model` and every layer inside it, at any depth (`_flatten_layers()`)."""
    return list(model._flatten_layers())
