"""Models build, compile and train inside tf.distribute scopes, and replicas agree."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_zoo.training import (
    global_batch_size,
    is_chief,
    make_strategy,
    set_precision,
)
from tests.helpers import REPO_ROOT

# --- N replicas train like one device, for every task model ----------------------------------
# Each case takes a numpy Generator and returns `(build, x, y)`: `build()` makes and compiles
# a model with dropout 0 (it is called once inside `MirroredStrategy.scope()` and once
# outside), and `x, y` are STEPS global batches of data. A new task model is one more
# function and one more REPLICA_CASES entry; `test_every_task_model_has_a_replica_case`
# fails until it has one.
STEPS = 3
LEARNING_RATE = 1e-2
PER_REPLICA_BATCH = 4
LENGTH = 8
VOCAB = 30


def _tiny_backbone():
    from keras_bert_zoo import BertBackbone

    return BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=LENGTH,
        dropout=0.0,
    )


def _optimizer():
    from keras_bert_zoo.training import create_optimizer

    return create_optimizer(LEARNING_RATE, total_steps=STEPS, warmup_steps=0)


def _token_inputs(rng, n):
    lengths = rng.integers(4, LENGTH + 1, n)
    padding_mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype("int32")
    return {
        "token_ids": (rng.integers(1, VOCAB, (n, LENGTH)) * padding_mask).astype("int32"),
        "segment_ids": ((np.arange(LENGTH)[None, :] >= lengths[:, None] // 2) * padding_mask).astype("int32"),
        "padding_mask": padding_mask,
    }


def keras_model_case(rng, n):
    """A plain Functional model with a Keras loss object (Keras scales that one itself)."""
    import keras

    def build():
        backbone = _tiny_backbone()
        inputs = {
            k: keras.Input((LENGTH,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")
        }
        model = keras.Model(inputs, keras.layers.Dense(2)(backbone(inputs)["pooled_output"]))
        model.compile(optimizer=_optimizer(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    return build, _token_inputs(rng, n), rng.integers(0, 2, n).astype("int32")


def pretrainer_case(rng, n):
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer

    def build():
        model = BertPretrainer(backbone=_tiny_backbone())
        model.compile(optimizer=_optimizer())
        return model

    predictions = 3
    x = _token_inputs(rng, n)
    # Rows have 1 to 3 real predictions, so the replicas' shares of the MLM mean differ.
    weights = (np.arange(predictions)[None, :] < rng.integers(1, predictions + 1, n)[:, None]).astype("float32")
    x["mask_positions"] = (rng.integers(1, 4, (n, predictions)) * weights).astype("int32")
    y = {
        "mask_ids": (rng.integers(1, VOCAB, (n, predictions)) * weights).astype("int32"),
        "mask_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, n).astype("int32"),
    }
    return build, x, y


def classifier_case(rng, n):
    from keras_bert_zoo.tasks.classifier.model import BertClassifier

    def build():
        model = BertClassifier(_tiny_backbone(), num_classes=3, dropout=0.0)
        model.compile(optimizer=_optimizer())  # default loss and metrics
        return model

    return build, _token_inputs(rng, n), rng.integers(0, 3, n).astype("int32")


def tagger_case(rng, n):
    from keras_bert_zoo.tasks.tagger.model import BertTagger

    def build():
        model = BertTagger(_tiny_backbone(), num_labels=5, dropout=0.0)
        model.compile(optimizer=_optimizer())
        return model

    x = _token_inputs(rng, n)
    # First pieces only: rows carry different numbers of labelled positions (-100 elsewhere).
    labelled = (rng.random((n, LENGTH)) < 0.5) & (x["padding_mask"] == 1)
    labelled[:, 0] = False  # [CLS]
    y = np.where(labelled, rng.integers(0, 5, (n, LENGTH)), -100).astype("int32")
    return build, x, y


def packed_tagger_case(rng, n):
    """The tagger on packed rows (`preprocessing.packing`): two sequences in each row."""
    build, x, y = tagger_case(rng, n)
    lengths = x["padding_mask"].sum(1)
    second = (np.arange(LENGTH)[None, :] >= lengths[:, None] // 2) & (x["padding_mask"] == 1)
    x["padding_mask"] = (x["padding_mask"] + second).astype("int32")
    return build, x, y


def span_qa_case(rng, n):
    from keras_bert_zoo.tasks.span_qa.model import BertSpanQA

    def build():
        model = BertSpanQA(_tiny_backbone())
        model.compile(optimizer=_optimizer())
        return model

    x = _token_inputs(rng, n)
    lengths = x["padding_mask"].sum(1)
    start = rng.integers(0, lengths)
    y = {
        "start_positions": start.astype("int32"),
        "end_positions": np.minimum(start + rng.integers(0, 3, n), lengths - 1).astype("int32"),
    }
    return build, x, y


def packed_span_qa_case(rng, n):
    """Span QA on packed rows: two windows in each row, a start and an end map 1 inside each."""
    build, x, _ = span_qa_case(rng, n)
    lengths = x["padding_mask"].sum(1)
    half = lengths // 2
    second = (np.arange(LENGTH)[None, :] >= half[:, None]) & (x["padding_mask"] == 1)
    x["padding_mask"] = (x["padding_mask"] + second).astype("int32")
    maps = {k: np.zeros((n, LENGTH), "int32") for k in ("start_positions", "end_positions")}
    for row in range(n):
        for first, last in ((0, half[row]), (half[row], lengths[row])):
            start = rng.integers(first, last)
            maps["start_positions"][row, start] = 1
            maps["end_positions"][row, rng.integers(start, last)] = 1
    return build, x, maps


def multiple_choice_case(rng, n):
    from keras_bert_zoo.tasks.multiple_choice.model import BertMultipleChoice

    def build():
        model = BertMultipleChoice(_tiny_backbone(), dropout=0.0)
        model.compile(optimizer=_optimizer())  # default loss (softmax over choices) and metrics
        return model

    choices = 3
    flat = _token_inputs(rng, n * choices)
    x = {k: v.reshape(n, choices, LENGTH) for k, v in flat.items()}
    return build, x, rng.integers(0, choices, n).astype("int32")


def embedder_case(rng, n):
    """Sentence embeddings trained towards target vectors with a Keras MSE loss."""
    import keras

    from keras_bert_zoo.tasks.embedder.model import BertSentenceEmbedder

    def build():
        model = BertSentenceEmbedder(_tiny_backbone(), pooling="mean")
        model.compile(optimizer=_optimizer(), loss=keras.losses.MeanSquaredError())
        return model

    return build, _token_inputs(rng, n), rng.normal(size=(n, 8)).astype("float32")


# The biases added equally to every logit of one softmax: span start/end over positions,
# a multiple-choice score over the choices. Their exact gradient is 0, so each run's is float
# noise, and Adam's step, lr * g / (|g| + eps), is up to lr in either direction.
SHIFT_INVARIANT_BIASES = {
    "BertSpanQA": "qa_outputs/bias",
    "BertSpanQA (packed rows)": "qa_outputs/bias",
    "BertMultipleChoice": "classifier/bias",
}

REPLICA_CASES = {
    "keras.Model": keras_model_case,
    "BertPretrainer": pretrainer_case,
    "BertClassifier": classifier_case,
    "BertTagger": tagger_case,
    "BertTagger (packed rows)": packed_tagger_case,
    "BertSpanQA": span_qa_case,
    "BertSpanQA (packed rows)": packed_span_qa_case,
    "BertMultipleChoice": multiple_choice_case,
    "BertSentenceEmbedder": embedder_case,
}


def train_one_and_two_replicas(case, mirrored):
    """Runs in the subprocess: the same STEPS global batches on one device and on
    `mirrored` (2 replicas), from the same weights. Returns the largest weight
    difference, how far training moved the weights, and both runs' logs."""
    import tensorflow as tf

    from keras_bert_zoo.training import global_batch_size

    batch = global_batch_size(PER_REPLICA_BATCH, mirrored)
    build, x, y = REPLICA_CASES[case](np.random.default_rng(0), STEPS * batch)
    from keras_bert_zoo.training.loop import train

    with mirrored.scope():
        distributed = build()
        looped = build()  # trained by the jobs' own loop (training.loop.train), not fit
    single = build()
    single.set_weights(distributed.get_weights())
    looped.set_weights(distributed.get_weights())
    initial = single.get_weights()
    logs = {}
    for name, model in (("single", single), ("mirrored", distributed), ("loop", looped)):
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
        if name == "loop":
            history = train(model, data, epochs=1, steps_per_epoch=STEPS, verbose=0).history
        else:
            history = model.fit(data, epochs=1, verbose=0).history
        logs[name] = {k: float(v[-1]) for k, v in history.items()}

    def largest_difference(a, b):
        """The largest difference over the weights, and the variable it is in; the shift-invariant
        biases (below) are left out: their gradient is float noise, which Adam scales up to lr."""
        skip = SHIFT_INVARIANT_BIASES.get(case)
        return max(
            (float(np.abs(u - v).max()), w.path)
            for w, u, v in zip(a.weights, a.get_weights(), b.get_weights(), strict=True)
            if w.path != skip
        )

    return {
        "replicas": mirrored.num_replicas_in_sync,
        "batch": batch,
        "diff": largest_difference(single, distributed),
        "loop_diff": largest_difference(single, looped),
        "moved": max(float(np.abs(a - b).max()) for a, b in zip(single.get_weights(), initial, strict=True)),
        "logs": logs,
    }


# Run in a fresh process: logical devices must be configured before TF starts.
MIRRORED_SCRIPT = r"""
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.training.test_strategies import REPLICA_CASES, train_one_and_two_replicas
# One strategy for all cases: two MirroredStrategy objects in one process reuse collective
# instance keys, and their all-reduces then fail with a shape mismatch.
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
print(json.dumps({case: train_one_and_two_replicas(case, mirrored) for case in REPLICA_CASES}))
"""

MULTI_WORKER_SCRIPT = r"""
import json
import tensorflow as tf
import keras, numpy as np
from keras_bert_zoo import BertBackbone
from keras_bert_zoo.training import make_strategy, is_chief
strategy = make_strategy("multi_worker")
with strategy.scope():
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8)
out = backbone({"token_ids": np.ones((2, 4), "int32"), "segment_ids": np.zeros((2, 4), "int32"),
                "padding_mask": np.ones((2, 4), "int32")})
print(json.dumps({"chief": is_chief(strategy), "replicas": strategy.num_replicas_in_sync,
                  "shape": list(out["sequence_output"].shape)}))
"""


def run_script(script, env_extra=None):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "3", **(env_extra or {})}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _registered_task_classes():
    import importlib
    import pkgutil

    import keras

    import keras_bert_zoo.models
    from keras_bert_zoo.models.task import Task

    for module in pkgutil.walk_packages(keras_bert_zoo.models.__path__, "keras_bert_zoo.models."):
        importlib.import_module(module.name)
    return sorted(
        obj.__name__
        for key, obj in keras.saving.get_custom_objects().items()
        if key.startswith("keras_bert_zoo>") and isinstance(obj, type) and issubclass(obj, Task)
    )


def test_every_task_model_has_a_replica_case():
    registered = _registered_task_classes()
    assert {"BertPretrainer", "BertClassifier"} <= set(registered)
    missing = sorted(set(registered) - set(REPLICA_CASES))
    assert not missing, f"add a REPLICA_CASES entry (tests/training/test_strategies.py) for {missing}"


@pytest.mark.slow  # over a minute together with the others: kept out of the 20-minute default run
def test_mirrored_two_replicas_train_like_one_device():
    results = run_script(MIRRORED_SCRIPT)
    assert set(results) == set(REPLICA_CASES)
    for case, result in results.items():
        assert result["replicas"] == 2 and result["batch"] == 2 * PER_REPLICA_BATCH
        assert result["moved"] > 1e-3, f"{case}: training must change the weights for the comparison to mean anything"
        single = result["logs"]["single"]
        for run in ("mirrored", "loop"):  # Keras fit, and the loop `pretrain`/`finetune` train with
            other = result["logs"][run]
            assert set(single) == set(other) and "loss" in single, (case, run, single, other)
            # Loss and every metric (mlm_loss, nsp_loss, accuracies, ...) as logged.
            for name in single:
                assert abs(single[name] - other[name]) < 1e-5, (case, run, name, single[name], other[name])
        # Relative to how far 3 Adam steps moved the weights: Adam divides each gradient by its own
        # scale, so a rounding difference in a small gradient (summed in another order over 2
        # replicas) shifts the update by a fraction of the learning rate, not of the gradient. On an
        # AVX2 machine a layer-norm beta of BertSpanQA differed by 1.2e-5 (0.4% of the 3e-3 moved).
        tolerance = max(1e-5, 1e-2 * result["moved"])
        assert result["diff"][0] < tolerance, (case, result["diff"], result["moved"])
        assert result["loop_diff"][0] < tolerance, (case, result["loop_diff"], result["moved"])


def test_multi_worker_reads_tf_config_and_chief_writes():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tf_config = {"cluster": {"worker": [f"localhost:{port}"]}, "task": {"type": "worker", "index": 0}}
    result = run_script(MULTI_WORKER_SCRIPT, {"TF_CONFIG": json.dumps(tf_config)})
    assert result == {"chief": True, "replicas": 1, "shape": [2, 4, 8]}


def test_default_strategy_and_batch_size():
    strategy = make_strategy("default")
    assert strategy.num_replicas_in_sync == 1 and global_batch_size(32, strategy) == 32
    assert is_chief(strategy)


@pytest.mark.parametrize(
    "name,match",
    [
        ("nccl", "Unknown strategy 'nccl'"),
        ("tpu", "needs --tpu"),
    ],
)
def test_bad_strategy_arguments(name, match):
    with pytest.raises(ValueError, match=match):
        make_strategy(name)


def test_multi_worker_without_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        make_strategy("multi_worker")


def test_precision_names():
    assert set_precision("bf16") == "mixed_bfloat16"
    assert set_precision("none") == "float32"
    with pytest.raises(ValueError, match="fp8"):
        set_precision("fp8")
