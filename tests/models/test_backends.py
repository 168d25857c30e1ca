"""Every task model on Keras' three backends, from the same weights.

TensorFlow (this process) builds the six task models with tiny backbones and the real MiniLM
vocabulary and saves each with `save_to_preset`. One process per other backend (JAX, torch;
both started at once, `tests.helpers.start_on_backend`) loads them all (`from_preset`), predicts on raw inputs, trains
a few raw `fit` steps, predicts again and saves its presets. Here: its predictions before
training equal TensorFlow's within 1e-4, its loss dropped, and TensorFlow loads its presets and
predicts what it predicted after training (a preset saved on one backend loads on another).
The TensorFlow-only entry points (SavedModel export, strategies, the `finetune` / `pretrain`
jobs) refuse there with a one-line `UsageError` naming the backend.
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
from tests.helpers import minilm_path, start_on_backend
from tests.models.backend_tasks import INPUTS, SCRIPT

NAMES = ("classifier", "tagger", "choice", "embedder", "span_qa", "pretrainer")
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
        return BertClassifier(
            backbone(0),
            num_classes=2,
            dropout=0.0,
            preprocessor=BertPreprocessor.from_preset(vocab, sequence_length=32),
        )
    if name == "tagger":
        return BertTagger(
            backbone(1),
            num_labels=3,
            dropout=0.0,
            preprocessor=TaggingPreprocessor.from_preset(vocab, sequence_length=32),
        )
    if name == "choice":
        return BertMultipleChoice(
            backbone(2), dropout=0.0, preprocessor=MultipleChoicePreprocessor.from_preset(vocab, sequence_length=32)
        )
    if name == "embedder":
        return BertSentenceEmbedder(backbone(3), preprocessor=BertPreprocessor.from_preset(vocab, sequence_length=32))
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
    for name in NAMES:
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
            start_on_backend(backend, SCRIPT, path, presets=saved, out=str(path / "saved"), inputs=INPUTS),
            str(path / "saved"),
        )
    yield started
    for run, _ in started.values():
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def tf_predictions(path, x=INPUTS):
    """What the script's `predicts` compute, here on TensorFlow, for the presets under `path`."""
    out = {}
    for name in NAMES:
        m = CLASSES[name].from_preset(os.path.join(path, name))
        if name == "classifier" or name == "embedder":
            out[name] = m.predict(x["texts"], batch_size=4, verbose=0)
        elif name == "tagger":
            out[name] = m.predict(x["words"], batch_size=4, verbose=0)
        elif name == "choice":
            out[name] = m.predict((x["contexts"], x["choices"]), batch_size=2, verbose=0)
        elif name == "span_qa":
            out[name] = np.array(
                [[a["start"], a["end"], a["score"]] for a in m.predict_answers(x["questions"], x["passages"], n_best=3)]
            )
        else:
            out[name] = np.array([[p for _, p in slot] for text in m.fill_mask(x["masked"], top_k=3) for slot in text])
    return out


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_task_models_on_backend_match_tensorflow(backend, saved, runs):
    pytest.importorskip(backend)
    run, out = runs[backend]
    got = run.result(timeout=900)
    expected = tf_predictions(saved)
    for name in NAMES:
        # the same weights predict the same on raw inputs (the tokenizer runs in tf.data on both)
        np.testing.assert_allclose(got[f"{name}_before"], expected[name], atol=1e-4, rtol=1e-4, err_msg=name)
        before, after = got[f"{name}_loss"]
        assert after < before - 1e-3, f"{name}: raw fit on {backend} did not lower the loss ({before} -> {after})"
        # trained (the outputs moved) ...
        assert np.abs(got[f"{name}_after"] - got[f"{name}_before"]).max() > 1e-4, name
    # ... and saved on this backend, loaded here on TensorFlow: the same predictions
    reloaded = tf_predictions(out)
    for name in NAMES:
        np.testing.assert_allclose(reloaded[name], got[f"{name}_after"], atol=1e-4, rtol=1e-4, err_msg=name)
    for line in got["refusals"]:
        what, message = str(line).split(": ", 1)
        assert "TensorFlow" in message and backend in message and "\n" not in message, f"{what}: {message}"
