"""Run checkpoints and the resumable loop, in-process: atomic writes, resume, refusal, NaN stop.

The kill -9 versions of these (real `bert-zoo` processes) are in `test_resume.py` (slow).
"""

import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.checkpointing import CheckpointMismatchError, RunCheckpoints
from keras_bert_zoo.training.loop import NonFiniteLossError, train


def tiny_model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dropout(0.3), keras.layers.Dense(2)]
    )
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def shuffled_data(n=40, batch=4, bad_batch=None):
    x = np.random.default_rng(1).normal(size=(n, 3)).astype("float32")
    if bad_batch is not None:
        x[bad_batch * batch] = np.nan
    y = (x[:, 0] > 0).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return ds if bad_batch is not None else ds.shuffle(n, seed=3, reshuffle_each_iteration=True)


class Interrupt(keras.callbacks.Callback):
    """Stands in for a kill: raises after `at` steps."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise KeyboardInterrupt


@pytest.mark.parametrize("position", ["iterator", "replay"])
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, position):
    run = dict(epochs=3, steps_per_epoch=10, checkpoint_every=4, verbose=0, position=position, signature={"lr": 1e-2})
    reference = tiny_model()
    train(reference, shuffled_data().batch(4), checkpoint_dir=str(tmp_path / "a"), **run)

    interrupted = tiny_model()
    with pytest.raises(KeyboardInterrupt):  # after step 14: checkpoints at 4, 8, 10 (epoch end), 12
        train(
            interrupted, shuffled_data().batch(4), checkpoint_dir=str(tmp_path / "b"), callbacks=[Interrupt(14)], **run
        )
    resumed = tiny_model(seed=99)  # other initial weights: all of them must come from the checkpoint
    keras.utils.set_random_seed(0)  # the job's seed, as a rerun of the same command sets it (data shuffle)
    train(resumed, shuffled_data().batch(4), checkpoint_dir=str(tmp_path / "b"), **run)
    assert int(resumed.optimizer.iterations) == 30
    for a, b in zip(reference.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # The dropout seed state is part of it (else the masks after resuming would differ).
    assert any("seed_generator" in v.path for v in resumed.variables)


def test_checkpoints_are_atomic_and_found_again(tmp_path):
    model = tiny_model()
    model.optimizer.build(model.trainable_variables)
    ckpts = RunCheckpoints(str(tmp_path), model, signature={"seed": 0})
    ckpts.save(3, {"epoch": 0})
    # A writer killed mid-write leaves a tmp- directory and possibly a ckpt- without meta.json.
    os.makedirs(tmp_path / "tmp-ckpt-000006-123")
    os.makedirs(tmp_path / "ckpt-000006")
    assert ckpts.latest() == str(tmp_path / "ckpt-000003")
    # `latest` names a complete checkpoint; if it is lost, the newest complete one is used.
    os.remove(tmp_path / "latest")
    assert ckpts.latest() == str(tmp_path / "ckpt-000003")
    ckpts.save(12, {"epoch": 1})
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000003", "ckpt-000012", "latest"]  # partial ones cleared
    with open(tmp_path / "ckpt-000012" / "meta.json") as f:
        assert json.load(f)["state"] == {"epoch": 1}
    before = [w.copy() for w in model.get_weights()]
    model.set_weights([np.zeros_like(w) for w in before])
    assert ckpts.restore(ckpts.latest())["step"] == 12
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    ckpts.save(15, {"epoch": 1})  # the two newest are kept (a damaged newest falls back to the other)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000012", "ckpt-000015", "latest"]


def test_resume_refuses_another_run(tmp_path):
    model = tiny_model()
    RunCheckpoints(str(tmp_path), model, signature={"learning_rate": 1e-3, "seed": 0}).save(1)
    other = RunCheckpoints(str(tmp_path), model, signature={"learning_rate": 2e-3, "seed": 0})
    with pytest.raises(CheckpointMismatchError, match=r"learning_rate: 0.001 there, 0.002 now.*--no-resume"):
        other.restore(other.latest())
    bigger = keras.Sequential([keras.Input((3,)), keras.layers.Dense(9), keras.layers.Dense(2)])
    bigger.compile(keras.optimizers.Adam(), "mse")
    with pytest.raises(CheckpointMismatchError, match="another architecture"):
        RunCheckpoints(str(tmp_path), bigger, signature={"learning_rate": 1e-3, "seed": 0}).restore(
            str(tmp_path / "ckpt-000001")
        )


def test_non_finite_loss_stops_at_its_step_and_keeps_the_last_good_checkpoint(tmp_path):
    model = tiny_model()
    with pytest.raises(NonFiniteLossError) as error:  # batch index 6 holds a NaN: step 7
        train(
            model,
            shuffled_data(bad_batch=6).batch(4),
            epochs=1,
            steps_per_epoch=10,
            checkpoint_every=1,
            checkpoint_dir=str(tmp_path),
            verbose=0,
            nonfinite={"learning_rate": 0.01},
        )
    message = str(error.value)
    assert re.search(r"loss is nan at step 7\b", message), message
    assert "learning rate 0.01 too high" in message
    with open(tmp_path / "latest") as f:
        assert f.read().strip() == "ckpt-000006"
    restored = tiny_model(seed=5)
    iterator = iter(shuffled_data(bad_batch=6).batch(4).repeat())
    RunCheckpoints(str(tmp_path), restored, iterator=iterator).restore(str(tmp_path / "ckpt-000006"))
    assert np.isnan(next(iterator)[0].numpy()).any()  # the next batch is the bad one
    assert all(np.isfinite(w).all() for w in restored.get_weights())


def test_fp16_names_overflow():
    from keras_bert_zoo.training.loop import nonfinite_message

    assert "fp16 overflow" in nonfinite_message(3, float("inf"), 1e-4, "fp16")


def test_bert_zoo_exits_1_naming_the_step_and_keeps_out_as_it_was(tmp_path, capsys, monkeypatch):
    from keras_bert_zoo import BertBackbone
    from keras_bert_zoo.cli import main
    from keras_bert_zoo.commands import finetune as finetune_command

    # The parser refuses a learning rate above 1 (a usage error, exit 2); let 1e30 through
    # to make the loss overflow, which is what this test is about.
    monkeypatch.setattr(finetune_command, "learning_rate_float", float)

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
    BertBackbone(
        vocabulary_size=len(words), num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    ).save_to_preset(str(tmp_path / "model"))
    (tmp_path / "model" / "vocab.txt").write_text("\n".join(words) + "\n")
    (tmp_path / "data.tsv").write_text("sentence\tlabel\n" + "good film\t1\nbad film\t0\n" * 16)
    data, out = str(tmp_path / "data.tsv"), tmp_path / "out"
    code = main(
        [
            "finetune",
            "classify",
            "--model",
            str(tmp_path / "model"),
            "--train",
            data,
            "--dev",
            data,
            "--glue",
            "sst2",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--learning-rate",
            "1e30",
            "--warmup-ratio",
            "0",
            "--sequence-length",
            "16",
            "--checkpoint-every",
            "1",
            "--out",
            str(out),
        ]
    )
    error = capsys.readouterr().err
    assert code == 1, error
    step = int(re.search(r"the training loss is (?:nan|inf) at step (\d+)", error).group(1))
    assert "learning rate 1e+30 too high" in error
    assert sorted(os.listdir(out)) == ["checkpoints"]  # no preset, no metrics
    with open(out / "checkpoints" / "latest") as f:
        assert f.read().strip() == f"ckpt-{step - 1:06d}"


def test_the_loop_traces_its_train_step_once(tmp_path):
    """`compile(metrics=["accuracy"])` names a metric, so Keras would create its variables in the
    first traced step and `tf.function` would trace the step again; `train` creates them first
    (`models.step_state.build_metrics`), as `fit` does, so its train step is traced once.
    (A Functional model, as every task model is: a Sequential's outputs are not known before it runs.)"""
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    model.compile(
        keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    traces = []
    step = model.train_step
    model.train_step = lambda data: (traces.append(1), step(data))[1]  # runs only while tracing
    ds = tf.data.Dataset.from_tensor_slices((np.ones((16, 4), "float32"), np.zeros(16, "int32"))).batch(4)
    train(model, ds, epochs=2, steps_per_epoch=4, checkpoint_dir=str(tmp_path), verbose=0)
    assert len(traces) == 1 and int(model.optimizer.iterations) == 8
