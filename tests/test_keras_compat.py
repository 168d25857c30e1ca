"""`keras_bert_zoo.keras_compat`: each read of a Keras private works on the installed Keras,
and no other module of the package reads one.

A Keras release that renames or changes one of these fails here, naming it.
"""

import ast
import inspect
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import keras_compat
from keras_bert_zoo.keras_compat import (
    OPTIMIZER_HOOKS,
    adam_moments,
    autocast_scope,
    decays,
    distribute_strategy,
    learning_rate_value,
    metrics_result,
    predict_function,
    sublayers,
    symbolic_build,
)
from tests.helpers import REPO_ROOT

PACKAGE = os.path.join(REPO_ROOT, "keras_bert_zoo")


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    inner = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="inner_dense")], name="inner")
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(inner(inputs)))


def _data():
    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype("int32"))).batch(4)


def _compile(model, optimizer="adam"):
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def test_distribute_strategy_is_none_without_one_and_the_strategy_with_one():
    assert distribute_strategy(_compile(_model())) is None
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _compile(_model())
    assert distribute_strategy(model) is strategy


def test_symbolic_build_creates_metric_and_optimizer_variables_without_a_step():
    model = _compile(_model())
    symbolic_build(model, _data().element_spec)
    assert model.optimizer.built and int(model.optimizer.iterations) == 0
    assert {"accuracy/total", "accuracy/count"} <= {v.path for v in model.metrics_variables}


def test_predict_function_is_the_step_predict_runs():
    model = _compile(_model())
    x = next(iter(_data()))[0]
    step = predict_function(model)
    np.testing.assert_allclose(np.asarray(step([x])), model.predict(x, verbose=0), atol=1e-6)


def test_metrics_result_is_what_fit_reports():
    model = _compile(_model())
    history = model.fit(_data(), epochs=1, verbose=0)
    placeholder = {"loss": -1.0, "accuracy": -1.0}  # the last step's logs, as a custom loop holds them
    result = metrics_result(model, placeholder)
    assert set(result) == {"loss", "accuracy"}
    assert metrics_result(model, {"other": 1.0}) == {"other": 1.0}  # other keys: the logs as given
    assert float(result["accuracy"]) == pytest.approx(history.history["accuracy"][-1])


def test_sublayers_reach_nested_layers_without_the_layer_itself():
    model = _model()
    names = [layer.name for layer in sublayers(model)]
    assert "inner_dense" in names and "head" in names and model.name not in names


def test_learning_rate_value_is_the_schedule_object():
    schedule = keras.optimizers.schedules.ExponentialDecay(1e-3, 10, 0.5)
    optimizer = keras.optimizers.AdamW(schedule)
    assert learning_rate_value(optimizer) is schedule
    assert float(learning_rate_value(keras.optimizers.Adam(0.25))) == 0.25


def test_adam_moments_and_decays_read_the_optimizer_state():
    model = _model()
    optimizer = keras.optimizers.AdamW(0.1, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    variables = model.trainable_variables
    optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables])
    for variable in variables:
        m, v = adam_moments(optimizer, variable)
        assert m.shape == variable.shape == v.shape
        np.testing.assert_allclose(m.numpy(), 0.1, rtol=1e-5)  # (1 - beta_1) * gradient after one step
        np.testing.assert_allclose(v.numpy(), 0.001, rtol=1e-3)  # (1 - beta_2) * gradient ** 2
        assert decays(optimizer, variable) == ("bias" not in variable.path)


def test_keras_adamw_still_has_and_calls_the_hooks_bert_adamw_overrides():
    calls = []

    class Recording(keras.optimizers.AdamW):
        pass

    for name, arguments in OPTIMIZER_HOOKS.items():
        hook = getattr(keras.optimizers.AdamW, name, None)
        assert hook is not None, f"Keras' AdamW has no {name} any more (BertAdamW overrides it)"
        assert tuple(inspect.signature(hook).parameters)[1:] == arguments, name

        def record(self, *args, _name=name, **kwargs):
            calls.append(_name)
            return getattr(keras.optimizers.AdamW, _name)(self, *args, **kwargs)

        setattr(Recording, name, record)
    model = _model()
    optimizer = Recording(0.1, weight_decay=0.1, global_clipnorm=1.0)
    optimizer.apply_gradients([(tf.ones_like(v), v) for v in model.trainable_variables])
    assert set(calls) == set(OPTIMIZER_HOOKS), calls


def _privates_defined_in_the_package():
    """Underscore names the package itself defines (its own private methods and attributes)."""
    names = set()
    for root, _, files in os.walk(PACKAGE):
        for file in files:
            if file.endswith(".py"):
                with open(os.path.join(root, file), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_"):
                        names.add(node.name)
                    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        names.add(node.attr)
    return names


def test_no_module_but_keras_compat_reads_a_keras_private():
    ours = _privates_defined_in_the_package() | set(OPTIMIZER_HOOKS)  # the hooks: BertAdamW calls super()'s
    found = []
    for root, _, files in os.walk(PACKAGE):
        for file in files:
            path = os.path.join(root, file)
            if not file.endswith(".py") or path == keras_compat.__file__:
                continue
            with open(path, encoding="utf-8") as f:
                source = f.read()
            for node in ast.walk(ast.parse(source)):
                name = None
                if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                    name = node.attr
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) in ("getattr", "hasattr")
                    and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant)
                    and str(node.args[1].value).startswith("_")
                ):
                    name = node.args[1].value
                if name is not None and name not in ours:
                    found.append(f"{os.path.relpath(path, REPO_ROOT)}:{node.lineno}: {name}")
            found += [
                f"{os.path.relpath(path, REPO_ROOT)}: .predict_function"
                for _ in re.finditer(r"\.predict_function\b", source)
            ]
            found += [f"{os.path.relpath(path, REPO_ROOT)}: keras.src" for _ in re.finditer(r"\bkeras\.src\b", source)]
    assert not found, "Keras privates read outside keras_bert_zoo/keras_compat.py:\n" + "\n".join(found)


def test_autocast_scope_casts_variable_reads_as_keras_call_does():
    import keras

    variable = keras.Variable(np.ones((2,), "float32"))
    with autocast_scope("bfloat16"):
        assert keras.backend.standardize_dtype(variable.value.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(variable.value.dtype) == "float32"


def test_dense_kernel_variable_forget_steps_and_all_layers():
    from keras_bert_zoo.keras_compat import all_layers, dense_kernel_variable, forget_steps

    inputs = keras.Input((3,))
    dense = keras.layers.Dense(2)
    model = keras.Model(inputs, dense(inputs))
    assert dense_kernel_variable(dense) is dense.kernel  # no LoRA: the variable is the kernel
    dense.enable_lora(1)
    assert dense_kernel_variable(dense) is not dense.kernel and tuple(dense_kernel_variable(dense).shape) == (3, 2)
    model.compile(loss="mse")
    model.predict(np.ones((1, 3)), verbose=0)
    assert model.predict_function is not None
    forget_steps(model)
    assert model.predict_function is None and model.train_function is None
    assert dense in all_layers(model) and model in all_layers(model)
