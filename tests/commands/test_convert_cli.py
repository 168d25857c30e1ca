"""`bert-zoo convert`: whole models, heads included, from HF and Google checkpoints."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, BertPretrainer
from keras_bert_zoo.cli import main
from tests.convert.test_google_checkpoint_layout import bert_config, google_tensors_from_hf, write_google_checkpoint
from tests.helpers import minilm_path

VOCAB = 60
SIZES = {"V": VOCAB, "H": 8, "I": 16, "P": 16, "layers": 2}


def test_convert_hf_checkpoint_to_preset(tmp_path, capsys):
    source = minilm_path()
    out = str(tmp_path / "converted")
    assert main(["convert", "--from", source, "--out", out]) == 0
    assert "22,713,216 parameters" in capsys.readouterr().out
    assert os.path.exists(os.path.join(out, "vocab.txt"))
    original, converted = BertBackbone.from_preset(source), BertBackbone.from_preset(out)
    for a, b in zip(original.weights, converted.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_convert_reports_a_bad_source_without_traceback(tmp_path, capsys):
    assert main(["convert", "--from", str(tmp_path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "not a BERT checkpoint" in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "o")


def test_unknown_verb_is_rejected():
    with pytest.raises(SystemExit):
        main(["frobnicate"])


# --- task heads -----------------------------------------------------------------------------
def _hf(cls_name, **config):
    """A random tiny HF task model (tanh GELU, so a Google config's "gelu" means the same)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        hidden_act="gelu_new",
        **config,
    )
    model = getattr(transformers, cls_name)(cfg).eval()
    with torch.no_grad():  # random biases and LayerNorms too, so every tensor matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _save_hf(model, path):
    model.save_pretrained(path, safe_serialization=True)
    _write_vocab(path)
    return str(path)


def _write_vocab(path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)]
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(tokens) + "\n")


def _inputs():
    rng = np.random.default_rng(3)
    mask = np.ones((2, 9), "int32")
    mask[1, 6:] = 0
    return {
        "token_ids": rng.integers(5, VOCAB, (2, 9)).astype("int32"),
        "segment_ids": np.array([[0] * 5 + [1] * 4] * 2, "int32"),
        "padding_mask": mask,
    }


def _torch_inputs(x):
    import torch

    return {
        "input_ids": torch.tensor(x["token_ids"]).long(),
        "token_type_ids": torch.tensor(x["segment_ids"]).long(),
        "attention_mask": torch.tensor(x["padding_mask"]).long(),
    }


def _convert(source, out, capsys):
    capsys.readouterr()
    assert main(["convert", "--from", source, "--out", out]) == 0
    captured = capsys.readouterr()
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    return captured, config


def _pretraining_reference(hf, x, positions):
    import torch

    with torch.no_grad():
        out = hf(**_torch_inputs(x))
    mlm = np.take_along_axis(out.prediction_logits.numpy(), positions[:, :, None].astype("int64"), axis=1)
    return mlm, out.seq_relationship_logits.numpy()


def _assert_pretrainer_matches(out, hf, capsys):
    x = _inputs()
    positions = np.array([[1, 3, 4], [2, 5, 0]], "int32")
    model = BertPretrainer.from_preset(out, preprocessor=None)
    assert "initialised randomly" not in capsys.readouterr().out
    ours = model({**x, "mask_positions": positions}, training=False)
    mlm, nsp = _pretraining_reference(hf, x, positions)
    np.testing.assert_allclose(np.asarray(ours["mlm_logits"]), mlm, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(ours["nsp_logits"]), nsp, rtol=1e-5, atol=1e-4)


def _classifier_reference(hf, x):
    import torch

    with torch.no_grad():
        return hf(**_torch_inputs(x)).logits.numpy()


def test_convert_keeps_hf_pretraining_heads(tmp_path, capsys):
    hf = _hf("BertForPreTraining")
    source = _save_hf(hf, tmp_path / "hf")
    out = str(tmp_path / "out")
    captured, config = _convert(source, out, capsys)
    assert config["keras_bert_zoo"].get("task") == "BertPretrainer"
    assert "BertPretrainer from BertForPreTraining" in captured.out
    assert config["architectures"] == ["BertForPreTraining"]
    assert os.path.exists(os.path.join(out, "vocab.txt"))
    _assert_pretrainer_matches(out, hf, capsys)


def test_convert_keeps_hf_classifier_head_and_labels(tmp_path, capsys):
    hf = _hf(
        "BertForSequenceClassification",
        num_labels=3,
        id2label={0: "negative", 1: "neutral", 2: "positive"},
        label2id={"negative": 0, "neutral": 1, "positive": 2},
    )
    source = _save_hf(hf, tmp_path / "hf")
    out = str(tmp_path / "out")
    captured, config = _convert(source, out, capsys)
    assert config["keras_bert_zoo"].get("task") == "BertClassifier"
    assert "BertClassifier from BertForSequenceClassification" in captured.out
    model = BertClassifier.from_preset(out, preprocessor=None)
    assert "initialised randomly" not in capsys.readouterr().out
    assert model.num_classes == 3 and model.label_names == ["negative", "neutral", "positive"]
    x = _inputs()
    np.testing.assert_allclose(model.predict(x, verbose=0), _classifier_reference(hf, x), rtol=1e-5, atol=1e-4)


def test_convert_keeps_google_pretraining_heads(tmp_path, capsys):
    hf = _hf("BertForPreTraining")
    google = str(tmp_path / "google")
    write_google_checkpoint(google, google_tensors_from_hf(hf.state_dict(), 2), bert_config(SIZES))
    _write_vocab(google)
    out = str(tmp_path / "out")
    captured, config = _convert(google, out, capsys)
    assert config["keras_bert_zoo"].get("task") == "BertPretrainer"
    assert "BertPretrainer from Google checkpoint" in captured.out
    assert os.path.exists(os.path.join(out, "vocab.txt"))
    _assert_pretrainer_matches(out, hf, capsys)


def test_convert_keeps_google_run_classifier_head(tmp_path, capsys):
    hf = _hf("BertForSequenceClassification", num_labels=3)
    google = str(tmp_path / "google")
    tensors = google_tensors_from_hf(hf.state_dict(), 2, heads=False)
    # run_classifier.py: top-level output_weights [num_labels, hidden] and output_bias.
    tensors["output_weights"] = hf.classifier.weight.detach().numpy()
    tensors["output_bias"] = hf.classifier.bias.detach().numpy()
    write_google_checkpoint(google, tensors, bert_config(SIZES))
    out = str(tmp_path / "out")
    captured, config = _convert(google, out, capsys)
    assert config["keras_bert_zoo"].get("task") == "BertClassifier"
    assert "BertClassifier from Google checkpoint" in captured.out
    model = BertClassifier.from_preset(out, preprocessor=None)
    assert model.num_classes == 3
    x = _inputs()
    np.testing.assert_allclose(model.predict(x, verbose=0), _classifier_reference(hf, x), rtol=1e-5, atol=1e-4)


def test_convert_drops_an_unknown_head_in_one_line_and_keeps_the_backbone(tmp_path, capsys):
    """`BertForMaskedLM` (MLM head, no NSP head, no pooler) has no task model here."""
    import torch

    hf = _hf("BertForMaskedLM")
    source = _save_hf(hf, tmp_path / "hf")
    out = str(tmp_path / "out")
    captured, config = _convert(source, out, capsys)
    dropped = [line for line in captured.err.splitlines() if "dropped" in line]
    assert len(dropped) == 1, captured.err
    assert "BertForMaskedLM" in dropped[0] and "cls.predictions.*" in dropped[0]
    assert config["architectures"] == ["BertModel"] and "task" not in config["keras_bert_zoo"]
    assert "BertBackbone from BertForMaskedLM" in captured.out
    x = _inputs()
    with torch.no_grad():
        reference = hf.bert(**_torch_inputs(x)).last_hidden_state.numpy()
    ours = BertBackbone.from_preset(out)(x)["sequence_output"].numpy()
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(ours[real], reference[real], rtol=1e-5, atol=1e-4)
