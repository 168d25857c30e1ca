import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models.backbone import BertBackbone
from keras_bert_zoo.tasks.classifier.model import BertClassifier
from tests.helpers import run_model_test


def tiny_backbone(**kwargs):
    return BertBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def int_inputs(batch=3, seq=7, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, size=batch)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    return {
        "token_ids": (rng.integers(1, vocab, size=(batch, seq)) * mask).astype("int32"),
        "segment_ids": (rng.integers(0, 2, size=(batch, seq)) * mask).astype("int32"),
        "padding_mask": mask,
    }


@pytest.mark.parametrize("num_classes, problem_type", [(3, None), (1, None), (4, "multi_label")])
def test_contract(tmp_path, num_classes, problem_type):
    model = BertClassifier(
        tiny_backbone(),
        num_classes=num_classes,
        problem_type=problem_type,
        label_names=[f"l{i}" for i in range(num_classes)],
    )
    out = run_model_test(model, int_inputs(), tmp_path)
    assert tuple(out.shape) == (3, num_classes)
    expected = problem_type or ("regression" if num_classes == 1 else "single_label")
    assert model.problem_type == expected


def test_bad_arguments():
    with pytest.raises(ValueError, match="label_names has 2 entries"):
        BertClassifier(tiny_backbone(), num_classes=3, label_names=["a", "b"])
    with pytest.raises(ValueError, match="problem_type"):
        BertClassifier(tiny_backbone(), num_classes=3, problem_type="ranking")
    with pytest.raises(ValueError, match="num_classes=1"):
        BertClassifier(tiny_backbone(), num_classes=1, problem_type="single_label")


@pytest.mark.parametrize("num_classes, problem_type", [(2, None), (1, None), (3, "multi_label")])
def test_fit_lowers_loss(num_classes, problem_type):
    """Each problem type trains with its default loss on a learnable toy task."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(tiny_backbone(dropout=0.0), num_classes=num_classes, problem_type=problem_type, dropout=0.0)
    x = int_inputs(batch=32, seed=1)
    signal = (x["token_ids"][:, 1] > 25).astype("int32")  # label = a property of token 1
    y = {
        "single_label": signal,
        "regression": signal.astype("float32"),
        "multi_label": np.stack([signal, 1 - signal, signal], axis=1).astype("float32"),
    }[model.problem_type]
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(x, y, epochs=60, batch_size=32, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]


def test_probabilities_and_labels():
    model = BertClassifier(tiny_backbone(), num_classes=3, label_names=["neg", "neu", "pos"])
    labels, probs = model.predict_labels(int_inputs(), verbose=0)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, atol=1e-6)
    assert labels == [["neg", "neu", "pos"][i] for i in probs.argmax(-1)]


def _save_hf(tmp_path, num_labels, seed=0):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        num_labels=num_labels,
    )
    hf = transformers.BertForSequenceClassification(config).eval()
    # Non-trivial head weights: HF initialises the bias to 0.
    with torch.no_grad():
        hf.classifier.bias.normal_()
    path = str(tmp_path / "hf")
    hf.save_pretrained(path, safe_serialization=True)
    return hf, path


def _hf_logits(hf, x):
    import torch

    with torch.no_grad():
        return hf(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        ).logits.numpy()


def test_hf_parity_and_round_trip(tmp_path):
    """A random HF BertForSequenceClassification gives the same logits as ours."""
    hf, path = _save_hf(tmp_path, num_labels=3)
    x = int_inputs(batch=4, seq=9)
    model = BertClassifier.from_preset(path, num_classes=3, preprocessor=None)
    ours = model.predict(x, verbose=0)
    np.testing.assert_allclose(ours, _hf_logits(hf, x), rtol=1e-5, atol=2e-5)

    # Our preset is an HF checkpoint too, and it remembers the label names.
    model.label_names = ["a", "b", "c"]
    out = str(tmp_path / "ours")
    model.save_to_preset(out)
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["architectures"] == ["BertForSequenceClassification"]
    import transformers

    reloaded_hf = transformers.BertForSequenceClassification.from_pretrained(out).eval()
    np.testing.assert_allclose(_hf_logits(reloaded_hf, x), ours, rtol=1e-5, atol=2e-5)
    again = BertClassifier.from_preset(out, preprocessor=None)
    assert again.label_names == ["a", "b", "c"] and again.num_classes == 3
    np.testing.assert_allclose(again.predict(x, verbose=0), ours, rtol=1e-5, atol=1e-6)


def test_head_with_other_class_count_starts_fresh(tmp_path, capsys):
    hf, path = _save_hf(tmp_path, num_labels=3)
    model = BertClassifier.from_preset(path, num_classes=2, preprocessor=None)
    assert "head initialised randomly" in capsys.readouterr().out
    # The backbone still came from the checkpoint.
    x = int_inputs(batch=2)
    import torch

    with torch.no_grad():
        pooled = hf.bert(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        ).pooler_output
    np.testing.assert_allclose(model.backbone(x)["pooled_output"], pooled.numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("pairs", [False, True])
def test_raw_strings_match_preprocessed_ints(pairs):
    """With a preprocessor, predict/evaluate on raw strings (and pairs) equal the int path."""
    from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor
    from tests.helpers import minilm_path

    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=24)
    backbone = BertBackbone(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=24,
        initializer_range=0.5,
    )  # large weights: inputs visibly change logits
    model = BertClassifier(backbone, num_classes=2, preprocessor=pre)
    a = ["a charming film .", "dull", "the plot is thin but the acting is fine"]
    b = ["it was good", "very dull indeed", "fine acting"]
    raw = list(zip(a, b, strict=True)) if pairs else a
    ints = pre((tf.constant(a), tf.constant(b)) if pairs else tf.constant(a))
    if pairs:  # the pair really reached the model: segment 1 is present
        assert int(tf.reduce_max(ints["segment_ids"])) == 1
    expected = model.predict({k: v.numpy() for k, v in ints.items()}, verbose=0)
    np.testing.assert_allclose(model.predict(raw, verbose=0), expected, rtol=1e-5, atol=1e-5)
    if pairs:  # and text_b was not dropped
        first_only = model.predict({k: v.numpy() for k, v in pre(tf.constant(a)).items()}, verbose=0)
        assert np.abs(first_only - expected).max() > 1e-2
    model.compile()
    loss_raw = model.evaluate(raw, np.array([1, 0, 1]), verbose=0)
    loss_int = model.evaluate({k: v.numpy() for k, v in ints.items()}, np.array([1, 0, 1]), verbose=0)
    np.testing.assert_allclose(loss_raw, loss_int, rtol=1e-5, atol=1e-5)


def test_google_run_classifier_head_loads(tmp_path):
    """A TF1 checkpoint in run_classifier.py's layout (`output_weights` [num_labels, hidden],
    `logits = pooled @ output_weights^T + output_bias`) gives HF's logits."""
    from keras_bert_zoo.models.weight_names import backbone_weight_specs, google_name

    hf, path = _save_hf(tmp_path, num_labels=3)
    backbone = BertClassifier.from_preset(path, num_classes=3, preprocessor=None).backbone
    names, tensors = [], []
    for spec in backbone_weight_specs(backbone):
        names.append(google_name(spec))
        tensors.append(tf.constant(spec.variable.numpy()))
    # run_classifier.py: output_weights is [num_labels, hidden], like torch's Linear weight.
    names += ["output_weights", "output_bias"]
    tensors += [tf.constant(hf.classifier.weight.detach().numpy()), tf.constant(hf.classifier.bias.detach().numpy())]
    gdir = tmp_path / "google"
    gdir.mkdir()
    tf.raw_ops.SaveV2(
        prefix=str(gdir / "bert_model.ckpt"), tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
    )
    cfg = hf.config
    with open(gdir / "bert_config.json", "w") as f:
        json.dump(
            {
                "vocab_size": cfg.vocab_size,
                "hidden_size": cfg.hidden_size,
                "num_hidden_layers": cfg.num_hidden_layers,
                "num_attention_heads": cfg.num_attention_heads,
                "intermediate_size": cfg.intermediate_size,
                "hidden_act": "gelu",
                "max_position_embeddings": cfg.max_position_embeddings,
                "type_vocab_size": 2,
            },
            f,
        )
    # HF trained with erf GELU; Google's "gelu" means tanh, so override.
    model = BertClassifier.from_preset(
        str(gdir), num_classes=3, preprocessor=None, backbone_kwargs={"activation": "gelu"}
    )
    x = int_inputs(batch=4, seq=9)
    np.testing.assert_allclose(model.predict(x, verbose=0), _hf_logits(hf, x), rtol=1e-5, atol=2e-5)


def test_from_preset_without_num_classes_names_the_argument(tmp_path):
    """A backbone directory (no head, no id2label) or a preset name cannot say how many classes:
    the error names `num_classes=`, not the constructor's bare TypeError."""
    from keras_bert_zoo.errors import UsageError
    from keras_bert_zoo.tasks.tagger.model import BertTagger

    path = str(tmp_path / "backbone")
    tiny_backbone().save_to_preset(path)
    with pytest.raises(
        UsageError,
        match=r"BertClassifier\.from_preset\('.*backbone'\) needs num_classes: it holds "
        r"no BertClassifier head .*num_classes=2\)",
    ):
        BertClassifier.from_preset(path)
    with pytest.raises(UsageError, match=r"needs num_classes: a preset name is a backbone architecture"):
        BertClassifier.from_preset("bert_tiny_uncased", load_weights=False)
    with pytest.raises(UsageError, match=r"BertTagger\.from_preset\(.*\) needs num_labels"):
        BertTagger.from_preset(path)
    assert BertClassifier.from_preset(path, num_classes=3, preprocessor=None).num_classes == 3
    BertClassifier.from_preset(path, num_classes=3, preprocessor=None).save_to_preset(path + "_clf")
    assert BertClassifier.from_preset(path + "_clf", preprocessor=None).num_classes == 3  # its own head says 3
