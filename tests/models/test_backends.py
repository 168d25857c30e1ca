"""Every task model on Keras' three backends, from the same weights.

TensorFlow (this process) builds the six task models with tiny backbones and the real MiniLM
vocabulary, with the options real presets bring (label names; the embedder normalising as
all-MiniLM-L6-v2 does, and in each pooling mode; LoRA adapters on the classifier), and saves
each with `save_to_preset`. One process per other backend (JAX, torch;
both started at once, `tests.helpers.start_on_backend`) loads them all (`from_preset`), predicts on raw inputs, trains
a few raw `fit` steps, predicts again and saves its presets. Here: its predictions before
training equal TensorFlow's within 1e-4, its loss dropped, and TensorFlow loads its presets and
predicts what it predicted after training (a preset saved on one backend loads on another).
The LoRA classifier trains its adapters and head only; bfloat16 twins (`with_precision`) predict
as TensorFlow's twins do (a bfloat16 `fit` is left out: a JAX step compiles anew, minutes on a
busy host). The TensorFlow-only entry points (SavedModel export, strategies, the `finetune` /
`pretrain` jobs) refuse there with a one-line `UsageError` naming the backend.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_bert_zoo import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPreprocessor,
    BertPretrainer,
    BertSentenceEmbedder,
    BertSpanQA,
    BertTagger,
    MultipleChoicePreprocessor,
    SpanQAPreprocessor,
    TaggingPreprocessor,
)
from keras_bert_zoo.models.precision import with_precision
from tests.helpers import minilm_path, start_on_backend
from tests.models.backend_tasks import INPUTS, SCRIPT

NAMES = ("classifier", "tagger", "choice", "embedder", "span_qa", "pretrainer")
# predicted on the backend, not trained: the embedder's other pooling modes (VARIANTS in the script)
POOLINGS = {"embedder_cls": "cls", "embedder_max": "max", "embedder_pooled": "pooled"}
CLASS_NAMES = ["negative", "positive"]
TAG_NAMES = ["O", "B-MISC", "I-MISC"]
CLASSES = {
    "classifier": BertClassifier,
    "tagger": BertTagger,
    "choice": BertMultipleChoice,
    "embedder": BertSentenceEmbedder,
    "span_qa": BertSpanQA,
    "pretrainer": BertPretrainer,
}


def backbone(seed):
    keras.utils.set_random_seed(seed)
    return BertBackbone(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=64,
        dropout=0.0,
        initializer_range=0.5,
    )


def build(name, vocab):
    """A tiny task model of each kind, with the MiniLM vocabulary's preprocessor."""
    if name == "classifier":
        model = BertClassifier(
            backbone(0),
            num_classes=2,
            dropout=0.0,
            label_names=CLASS_NAMES,
            preprocessor=BertPreprocessor.from_preset(vocab, sequence_length=32),
        )
        model.backbone.enable_lora(2)
        # adapters as after some training (fresh ones add zero), so the backend computes them
        for weight in model.backbone.trainable_weights:
            if "lora_kernel_b" in weight.path:
                weight.assign(np.random.default_rng(0).normal(0.0, 0.5, weight.shape).astype("float32"))
        return model
    if name == "tagger":
        return BertTagger(
            backbone(1),
            num_labels=3,
            dropout=0.0,
            label_names=TAG_NAMES,
            preprocessor=TaggingPreprocessor.from_preset(vocab, sequence_length=32),
        )
    if name == "choice":
        return BertMultipleChoice(
            backbone(2), dropout=0.0, preprocessor=MultipleChoicePreprocessor.from_preset(vocab, sequence_length=32)
        )
    if name.startswith("embedder"):  # normalised as sentence-transformers' Normalize module does
        return BertSentenceEmbedder(
            backbone(3),
            pooling=POOLINGS.get(name, "mean"),
            normalize=True,
            preprocessor=BertPreprocessor.from_preset(vocab, sequence_length=32),
        )
    if name == "span_qa":
        return BertSpanQA(
            backbone(4),
            preprocessor=SpanQAPreprocessor.from_preset(vocab, sequence_length=32, doc_stride=8, max_query_length=8),
        )
    return BertPretrainer(backbone(5), preprocessor=BertPreprocessor.from_preset(vocab, sequence_length=32))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The six models saved by TensorFlow, and the path."""
    path = tmp_path_factory.mktemp("tf_presets")
    vocab = minilm_path()
    for name in NAMES + tuple(POOLINGS):
        build(name, vocab).save_to_preset(str(path / name))
    return str(path)


@pytest.fixture(scope="module")
def runs(saved, tmp_path_factory):
    """The JAX and torch processes, started together on the saved presets: they run side by side
    (each ~2-4 min of imports, tracing and fits on a loaded 2-core host), each test waits for its own."""
    started = {}
    for backend in ("jax", "torch"):
        if importlib.util.find_spec(backend) is None:
            continue  # its test skips
        path = tmp_path_factory.mktemp(f"on_{backend}")
        started[backend] = (
            start_on_backend(
                backend, SCRIPT, path, presets=saved, out=str(path / "saved"), inputs=INPUTS, variants=list(POOLINGS)
            ),
            str(path / "saved"),
        )
    yield started
    for run, _ in started.values():
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def predict(name, m, x=INPUTS):
    """What the script's `predicts` compute, here on TensorFlow."""
    if name.startswith("classifier") or name.startswith("embedder"):
        return m.predict(x["texts"], batch_size=4, verbose=0)
    if name == "tagger":
        return m.predict(x["words"], batch_size=4, verbose=0)
    if name == "choice":
        return m.predict((x["contexts"], x["choices"]), batch_size=2, verbose=0)
    if name == "span_qa":
        return np.array(
            [[a["start"], a["end"], a["score"]] for a in m.predict_answers(x["questions"], x["passages"], n_best=3)]
        )
    return np.array([[p for _, p in slot] for text in m.fill_mask(x["masked"], top_k=3) for slot in text])


def load(path, name):
    return CLASSES[name.split("_")[0] if name.startswith("embedder") else name].from_preset(os.path.join(path, name))


def tf_predictions(path, names=NAMES):
    return {name: predict(name, load(path, name)) for name in names}


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_task_models_on_backend_match_tensorflow(backend, saved, runs):
    pytest.importorskip(backend)
    run, out = runs[backend]
    got = run.result(timeout=900)
    expected = tf_predictions(saved, NAMES + tuple(POOLINGS))
    for name in NAMES + tuple(POOLINGS):
        # the same weights predict the same on raw inputs (the tokenizer runs in tf.data on both)
        key = f"{name}_before" if name in NAMES else name
        np.testing.assert_allclose(got[key], expected[name], atol=1e-4, rtol=1e-4, err_msg=name)
    for name in NAMES:
        before, after = got[f"{name}_loss"]
        assert after < before - 1e-3, f"{name}: raw fit on {backend} did not lower the loss ({before} -> {after})"
        # trained (the outputs moved) ...
        assert np.abs(got[f"{name}_after"] - got[f"{name}_before"]).max() > 1e-4, name
    np.testing.assert_allclose(np.linalg.norm(got["embedder_before"], axis=-1), 1.0, rtol=1e-5)
    # LoRA: the frozen backbone did not move; the adapters and head are what trained
    assert got["classifier_frozen_moved"] == 0.0
    assert got["classifier_trainable"] == sum(
        int(np.prod(w.shape)) for w in load(saved, "classifier").trainable_weights
    )
    # ... and saved on this backend, loaded here on TensorFlow: the same predictions, labels by name
    reloaded = {name: load(out, name) for name in NAMES}
    for name in NAMES:
        np.testing.assert_allclose(predict(name, reloaded[name]), got[f"{name}_after"], atol=1e-4, rtol=1e-4)
    assert list(got["classifier_labels"]) == reloaded["classifier"].predict_labels(INPUTS["texts"])[0]
    assert set(got["classifier_labels"]) <= set(CLASS_NAMES)
    assert list(got["tagger_tags"]) == sum(reloaded["tagger"].predict_tags(INPUTS["words"]), [])
    check_bfloat16(got, saved)
    for line in got["refusals"]:
        what, message = str(line).split(": ", 1)
        assert "TensorFlow" in message and backend in message and "\n" not in message, f"{what}: {message}"


def check_bfloat16(got, saved):
    """bfloat16 twins (the LoRA classifier, the normalising embedder) compute in bfloat16 on the
    backend and predict as TensorFlow's twins do, within bfloat16's rounding."""
    for name in ("classifier", "embedder"):
        assert str(got[f"{name}_bf16_dtype"]) == "bfloat16", name
        twin = with_precision(load(saved, name), "bf16")
        np.testing.assert_allclose(got[f"{name}_bf16"], predict(name, twin), atol=3e-2, rtol=3e-2, err_msg=name)
