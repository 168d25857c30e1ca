"""`jit_compile="auto"`: the one rule (`keras_bert_zoo.training.jit`).

What can be decided without timing is checked case by case (devices faked for the GPU
cases); the timing is checked to leave no trace on the model (the run after it trains
exactly like a twin that was never timed), to pick what its own figures say, to be
remembered per path, and to be what the jobs use.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.training import jit
from keras_bert_zoo.training.jit import choose_jit_compile, static_rule


def _fake_devices(monkeypatch, gpus):
    devices = {"GPU": gpus, "TPU": []}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: devices.get(kind, []))


@pytest.mark.parametrize("gpus", [[], ["GPU:0"]])
def test_what_needs_no_timing(monkeypatch, gpus):
    _fake_devices(monkeypatch, gpus)
    assert static_rule("auto", strategy="tpu").enabled is True
    assert static_rule(False, strategy="tpu").enabled is True
    assert static_rule(False).enabled is False and static_rule(True).enabled is True
    assert static_rule("auto", fixed_shapes=False).enabled is False  # a program per batch width
    assert static_rule("auto", steps=jit.MIN_STEPS - 1).enabled is False
    assert static_rule("auto", steps=jit.MIN_STEPS) is None  # timed
    if gpus:
        assert static_rule("auto", strategy="multi_worker") is None
        assert static_rule("auto", "bf16") is None
    else:
        # The crash of issue 28: CollectiveGatherV2 has no XLA_CPU kernel.
        choice = static_rule("auto", strategy="multi_worker")
        assert choice.enabled is False and "collectives" in choice.reason
        assert static_rule("auto", "bf16").enabled is False
        with pytest.raises(UsageError, match="--jit-compile auto or false"):
            static_rule(True, strategy="multi_worker")


def test_bad_values_are_refused():
    for bad in ("false", "true", 1, None):
        with pytest.raises(ValueError, match="use True, False or 'auto'"):
            static_rule(bad)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.3), keras.layers.Dense(2)]
    )
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=False,
    )
    return model


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(8, 6)).astype("float32"), rng.integers(0, 2, 8).astype("int32")


def test_timing_leaves_no_trace_on_the_run():
    timed, twin = _model(), _model()
    batch = _batch()
    seconds = jit.time_train_steps(timed, batch)
    assert seconds["xla"] > 0 and seconds["plain"] > 0 and seconds["compile_xla"] > 0
    assert int(timed.optimizer.iterations) == 0
    twin.optimizer.build(twin.trainable_variables)
    for a, b in zip(
        timed.variables + timed.optimizer.variables, twin.variables + twin.optimizer.variables, strict=True
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # Dropout seed states included: the next steps (dropout on) are the twin's exactly.
    for _ in range(3):
        timed.train_on_batch(*batch)
        twin.train_on_batch(*batch)
    for a, b in zip(timed.weights, twin.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_auto_keeps_the_faster_and_remembers_it(monkeypatch, tmp_path):
    cache = tmp_path / "choices.json"
    monkeypatch.setenv("BERT_ZOO_JIT_CACHE", str(cache))
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    timings = iter(
        [
            {"xla": 0.5, "plain": 1.0, "compile_xla": 1, "compile_plain": 1},
            {"xla": 0.99, "plain": 1.0, "compile_xla": 1, "compile_plain": 1},
        ]
    )
    monkeypatch.setattr(jit, "time_train_steps", lambda model, batch: next(timings))
    lines = []
    first = choose_jit_compile(_model(), _batch(), "auto", log=lines.append)
    assert first.enabled and first.source == "measured"
    assert lines == ["jit_compile: XLA (timed at start-up: 500 ms/step with XLA, 1000 without)"]
    again = choose_jit_compile(_model(), _batch(), "auto", log=lines.append)  # same path: not timed again
    assert again.enabled and again.source == "remembered" and "earlier run" in lines[-1]
    assert len(json.loads(cache.read_text())) == 1
    # Another path (batch width) is timed anew; 1% faster is within the margin: no XLA.
    other = choose_jit_compile(_model(), (np.ones((16, 6), "float32"), np.ones(16, "int32")), "auto", log=None)
    assert not other.enabled and other.source == "measured"


def test_auto_measures_for_real(monkeypatch):
    monkeypatch.setenv("BERT_ZOO_JIT_CACHE", "off")
    choice = choose_jit_compile(_model(), _batch(), "auto", log=None)
    assert choice.source == "measured" and set(choice.seconds) >= {"xla", "plain"}
    assert choice.enabled == (choice.seconds["xla"] < jit.MARGIN * choice.seconds["plain"])
