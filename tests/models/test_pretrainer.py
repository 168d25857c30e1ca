"""BertPretrainer: contract, HF BertForPreTraining parity (logits and loss), presets."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
from tests.helpers import minilm_path, run_model_test

VOCAB = 50


def tiny_backbone(**kwargs):
    return BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def batch(seed=0, b=3, s=10, p=4):
    rng = np.random.default_rng(seed)
    lengths = np.array([s, s - 3, 6])[:b]
    padding_mask = (np.arange(s)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(5, VOCAB, size=(b, s)).astype("int32") * padding_mask
    segment_ids = ((np.arange(s)[None, :] >= lengths[:, None] // 2) * padding_mask).astype("int32")
    positions = np.stack([np.sort(rng.choice(np.arange(1, n), p, replace=False)) for n in lengths])
    weights = np.ones((b, p), "float32")
    weights[1, 3:] = 0  # padding prediction slots
    weights[2, 2:] = 0
    positions = (positions * weights).astype("int32")
    x = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask, "mask_positions": positions}
    y = {
        "mask_ids": (rng.integers(5, VOCAB, size=(b, p)) * weights).astype("int32"),
        "mask_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, size=(b,)).astype("int32"),
    }
    return x, y


def test_model_contract(tmp_path):
    model = BertPretrainer(backbone=tiny_backbone())
    x, _ = batch()
    out = run_model_test(model, x, tmp_path)
    assert out["mlm_logits"].shape == (3, 4, VOCAB)
    assert out["nsp_logits"].shape == (3, 2)
    # The decoder is tied: the head owns no [hidden, vocab] kernel, only a bias.
    head_shapes = [tuple(w.shape) for w in model.mlm_head.weights]
    assert (VOCAB,) in head_shapes and (8, VOCAB) not in head_shapes


def _hf_model(tmp_path, act="gelu"):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        hidden_act=act,
    )
    hf = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():  # random, not init-time zeros: biases and LayerNorms must load too
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = str(tmp_path / "hf")
    hf.save_pretrained(path, safe_serialization=True)
    return hf, path


def _hf_outputs(hf, x, y):
    import torch

    labels = np.full(x["token_ids"].shape, -100, "int64")
    for i in range(labels.shape[0]):
        for j in range(y["mask_ids"].shape[1]):
            if y["mask_weights"][i, j] > 0:
                labels[i, x["mask_positions"][i, j]] = y["mask_ids"][i, j]
    with torch.no_grad():
        out = hf(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
            labels=torch.tensor(labels),
            next_sentence_label=torch.tensor(y["next_sentence_labels"], dtype=torch.long),
        )
    mlm = out.prediction_logits.numpy()
    mlm = np.take_along_axis(mlm, x["mask_positions"][:, :, None].astype("int64"), axis=1)
    return mlm, out.seq_relationship_logits.numpy(), float(out.loss)


@pytest.mark.parametrize("act", ["gelu", "gelu_new"])
def test_matches_hf_bert_for_pretraining(tmp_path, act):
    hf, path = _hf_model(tmp_path, act)
    model = BertPretrainer.from_preset(path)
    x, y = batch()
    mlm_ref, nsp_ref, loss_ref = _hf_outputs(hf, x, y)
    out = model(x, training=False)
    np.testing.assert_allclose(np.asarray(out["nsp_logits"]), nsp_ref, rtol=1e-5, atol=1e-4)
    real = y["mask_weights"] > 0  # HF has no prediction for our padding slots
    np.testing.assert_allclose(np.asarray(out["mlm_logits"])[real], mlm_ref[real], rtol=1e-5, atol=1e-4)
    loss = float(model.compute_loss(x, y, out))
    assert abs(loss - loss_ref) <= 1e-4 * max(1.0, abs(loss_ref))
    # Our preset loads back in HF with the same outputs (decoder written as tied tensors).
    ours = str(tmp_path / "ours")
    model.save_to_preset(ours)
    with open(os.path.join(ours, "config.json")) as f:
        assert json.load(f)["architectures"] == ["BertForPreTraining"]
    import transformers

    hf2 = transformers.BertForPreTraining.from_pretrained(ours).eval()
    mlm2, nsp2, loss2 = _hf_outputs(hf2, x, y)
    np.testing.assert_allclose(mlm2[real], mlm_ref[real], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nsp2, nsp_ref, rtol=1e-5, atol=1e-5)
    reloaded = BertPretrainer.from_preset(ours)
    np.testing.assert_allclose(
        np.asarray(reloaded(x)["mlm_logits"]), np.asarray(out["mlm_logits"]), rtol=1e-5, atol=1e-6
    )


def test_google_checkpoint_head_loads(tmp_path):
    """A TF1 checkpoint with the original `cls/...` names loads into the heads."""
    tf = pytest.importorskip("tensorflow")
    hf, path = _hf_model(tmp_path)
    ours = BertPretrainer.from_preset(path)
    from keras_bert_zoo.models.weight_names import backbone_weight_specs, google_name

    gdir = tmp_path / "google"
    gdir.mkdir()
    values = {}
    for spec in backbone_weight_specs(ours.backbone) + ours.head_weight_specs():
        value = spec.variable.numpy()
        if spec.kind == "kernel" and spec.google_transposed:
            value = value.T
        values[google_name(spec)] = value
    # The original names, spelled out (not derived) so a rule change cannot hide here.
    for name in (
        "cls/predictions/transform/dense/kernel",
        "cls/predictions/transform/LayerNorm/gamma",
        "cls/predictions/output_bias",
        "cls/seq_relationship/output_weights",
        "cls/seq_relationship/output_bias",
        "bert/embeddings/word_embeddings",
    ):
        assert name in values, name
    assert values["cls/seq_relationship/output_weights"].shape == (2, 8)
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.get_variable(n, initializer=v) for n, v in values.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(gdir / "bert_model.ckpt"))
    cfg = json.load(open(os.path.join(path, "config.json")))
    json.dump(cfg, open(gdir / "bert_config.json", "w"))
    loaded = BertPretrainer.from_preset(str(gdir), backbone_kwargs={"activation": "gelu"})
    x, _ = batch()
    a, b = ours(x), loaded(x)
    np.testing.assert_allclose(np.asarray(a["mlm_logits"]), np.asarray(b["mlm_logits"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(a["nsp_logits"]), np.asarray(b["nsp_logits"]), rtol=1e-5, atol=1e-5)


def test_backbone_only_checkpoint_gets_fresh_heads(capsys):
    path = minilm_path()
    model = BertPretrainer.from_preset(path)
    assert "head initialised randomly" in capsys.readouterr().out
    assert model.backbone.num_layers == 6 and model.backbone.hidden_dim == 384
    # The tied decoder is the real embedding matrix.
    from safetensors.numpy import load_file

    table = load_file(os.path.join(path, "model.safetensors"))["embeddings.word_embeddings.weight"]
    np.testing.assert_array_equal(model.backbone.token_embedding.embeddings.numpy(), table)


def test_fit_lowers_loss_and_reports_metrics():
    from keras_bert_zoo.training import create_optimizer

    model = BertPretrainer(backbone=tiny_backbone(dropout=0.0))
    model.compile(optimizer=create_optimizer(1e-2, total_steps=60, warmup_steps=3))
    x, y = batch()
    first = model.evaluate(x, y, return_dict=True, verbose=0)
    model.fit(x, y, epochs=60, verbose=0)
    last = model.evaluate(x, y, return_dict=True, verbose=0)
    assert set(last) >= {"loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"}
    assert last["loss"] < 0.5 * first["loss"]
    assert abs(last["loss"] - last["mlm_loss"] - last["nsp_loss"]) < 1e-4
    # No NSP labels (the "No NSP" ablation): the loss is the MLM term alone.
    y_mlm = {k: v for k, v in y.items() if k != "next_sentence_labels"}
    only = model.evaluate(x, y_mlm, return_dict=True, verbose=0)
    assert abs(only["loss"] - only["mlm_loss"]) < 1e-5
    # ... and no NSP figures: the trackers saw nothing, a 0.0 loss would be a lie (continue_pretraining).
    assert sorted(only) == ["loss", "mlm_accuracy", "mlm_loss"]
    history = model.fit(x, y_mlm, epochs=1, verbose=0).history
    assert sorted(history) == ["loss", "mlm_accuracy", "mlm_loss"]


def test_bad_labels_and_loss_are_rejected():
    model = BertPretrainer(backbone=tiny_backbone())
    with pytest.raises(ValueError, match="own loss"):
        model.compile("adam", loss="mse")
    model.compile("adam")
    x, y = batch()
    with pytest.raises(ValueError, match="mask_ids"):
        model.fit(x, y["next_sentence_labels"], verbose=0)


JAX_SCRIPT = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
from keras_bert_zoo import BertPretrainer
assert keras.backend.backend() == "jax"
preset, data_path = sys.argv[1], sys.argv[2]
data = json.load(open(data_path))
x = {k: np.array(v, "int32") for k, v in data["x"].items()}
y = {k: np.array(v, "float32" if k == "mask_weights" else "int32") for k, v in data["y"].items()}
model = BertPretrainer.from_preset(preset)
out = model(x, training=False)
loss = float(model.compute_loss(x, y, out))
model.compile(optimizer="adam")
history = model.fit(x, y, epochs=2, verbose=0).history
print(json.dumps({"mlm": np.asarray(out["mlm_logits"]).tolist(), "nsp": np.asarray(out["nsp_logits"]).tolist(),
                  "loss": loss, "history": {k: [float(v) for v in vs] for k, vs in history.items()}}))
"""


@pytest.mark.slow  # the JAX backbone parity stays in the default run (test_jax_backend.py)
def test_pretrainer_on_jax_matches_tensorflow_and_trains(tmp_path):
    pytest.importorskip("jax")
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    model = BertPretrainer(backbone=tiny_backbone())
    model.save_to_preset(str(tmp_path / "preset"))
    x, y = batch()
    (tmp_path / "data.json").write_text(
        json.dumps({"x": {k: v.tolist() for k, v in x.items()}, "y": {k: v.tolist() for k, v in y.items()}})
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO_ROOT}
    result = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT, str(tmp_path / "preset"), str(tmp_path / "data.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    jax_out = json.loads(result.stdout.strip().splitlines()[-1])
    out = model(x, training=False)
    np.testing.assert_allclose(np.array(jax_out["mlm"]), np.asarray(out["mlm_logits"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(jax_out["nsp"]), np.asarray(out["nsp_logits"]), rtol=1e-5, atol=1e-5)
    assert jax_out["loss"] == pytest.approx(float(model.compute_loss(x, y, out)), rel=1e-5)
    history = jax_out["history"]
    assert {"mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"} <= set(history)
    assert np.isfinite(history["loss"]).all()
