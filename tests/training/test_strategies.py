"""Models build, compile and train inside tf.distribute scopes, and replicas agree."""

import json
import os
import socket
import subprocess
import sys

import pytest

from keras_bert_zoo.training import global_batch_size, is_chief, make_strategy, set_precision
from tests.helpers import REPO_ROOT

# Run in a fresh process: logical devices must be configured before TF starts.
MIRRORED_SCRIPT = r"""
import json, os, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
from keras_bert_zoo import BertBackbone
from keras_bert_zoo.training import create_optimizer, global_batch_size

def build_and_compile():
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, dropout=0.0)
    inputs = {k: keras.Input((8,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
    model = keras.Model(inputs, keras.layers.Dense(2)(backbone(inputs)["pooled_output"]))
    model.compile(optimizer=create_optimizer(1e-2, total_steps=10, warmup_steps=0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model

rng = np.random.default_rng(0)
x = {"token_ids": rng.integers(0, 30, (8, 8)).astype("int32"), "segment_ids": np.zeros((8, 8), "int32"),
     "padding_mask": np.ones((8, 8), "int32")}
y = rng.integers(0, 2, 8).astype("int32")
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with mirrored.scope():
    distributed = build_and_compile()
single = build_and_compile()
single.set_weights(distributed.get_weights())
initial = single.get_weights()
batch = global_batch_size(4, mirrored)
for model in (single, distributed):
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), epochs=2, verbose=0)
diff = max(float(np.abs(a - b).max()) for a, b in zip(single.get_weights(), distributed.get_weights()))
moved = max(float(np.abs(a - b).max()) for a, b in zip(single.get_weights(), initial))
print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "batch": batch, "diff": diff, "moved": moved}))
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
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_mirrored_two_replicas_train_like_one_device():
    result = run_script(MIRRORED_SCRIPT)
    assert result["replicas"] == 2 and result["batch"] == 8
    assert result["moved"] > 1e-3, "training must change the weights for the comparison to mean anything"
    assert result["diff"] < 1e-5


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


@pytest.mark.parametrize("name,match", [
    ("nccl", "Unknown strategy 'nccl'"),
    ("tpu", "needs --tpu"),
])
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
