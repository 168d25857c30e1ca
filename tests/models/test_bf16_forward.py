"""Every task model's bfloat16 forward equals its float32 forward within bf16 rounding.

Each model is tiny, with weights drawn at BERT's scale; the same weights run once in float32
and once under Keras' `mixed_bfloat16` (`models.precision.with_precision`: matmuls in bf16;
softmax, LayerNorm and the task's logits in float32), through the model's own raw-input
`predict` (or `encode`). Tolerance: 3e-2 absolute on outputs of order 1 (bf16 keeps 8 bits of
mantissa, a relative step of 2**-8 = 0.4 % per rounding, over two layers); the test also
checks the bf16 run really differs from float32, so it cannot pass by running float32 twice.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPreprocessor,
    BertPretrainer,
    BertSentenceEmbedder,
    BertSpanQA,
    BertTagger,
)
from keras_bert_zoo.models.precision import with_precision
from tests.helpers import minilm_path

TEXTS = ["a good film", "Zürich, café — 日本語", "and on " * 8]
ATOL = 3e-2


def _backbone(vocabulary_size):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )


def _classifier(v, pre):
    return BertClassifier(_backbone(v), num_classes=3, preprocessor=pre), lambda m: m.predict(TEXTS, verbose=0)


def _tagger(v, _):
    from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

    pre = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=12)
    model = BertTagger(_backbone(v), num_labels=3, preprocessor=pre, label_names=["O", "B-X", "I-X"])
    words = [t.split() for t in TEXTS]
    return model, lambda m: m.predict(
        pre(tf.ragged.constant(words))[0]
        if isinstance(pre(tf.ragged.constant(words)), tuple)
        else pre(tf.ragged.constant(words)),
        verbose=0,
    )


def _span_qa(v, _):
    from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor

    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=24, doc_stride=6, max_query_length=8)
    model = BertSpanQA(_backbone(v), preprocessor=pre)
    ids = BertPreprocessor.from_preset(minilm_path(), sequence_length=24)(tf.constant(TEXTS))
    return model, lambda m: m.predict(ids, verbose=0)


def _choice(v, _):
    from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor

    pre = MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=12)
    model = BertMultipleChoice(_backbone(v), preprocessor=pre)
    choices = [TEXTS, TEXTS[::-1], TEXTS[1:] + TEXTS[:1]]
    return model, lambda m: m.predict((TEXTS, choices), verbose=0)


def _embedder(v, pre):
    return BertSentenceEmbedder(_backbone(v), pooling="mean", preprocessor=pre), lambda m: m.encode(TEXTS)


def _pretrainer(v, pre):
    model = BertPretrainer(backbone=_backbone(v), preprocessor=pre)
    x = {**pre(tf.constant(TEXTS)), "mask_positions": np.array([[1, 2], [3, 0], [1, 4]], "int32")}
    return model, lambda m: m.predict(x, verbose=0)


@pytest.mark.parametrize(
    "make", [_classifier, _tagger, _span_qa, _choice, _embedder, _pretrainer], ids=lambda f: f.__name__.strip("_")
)
def test_bf16_forward_equals_float32_within_bf16_rounding(make):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=16)
    model, run = make(pre.tokenizer.vocabulary_size(), pre)
    full = tf.nest.map_structure(np.asarray, run(model))
    twin = with_precision(model, "bfloat16")
    assert twin.backbone.get_layer("encoder_layer_0").compute_dtype == "bfloat16"
    half = tf.nest.map_structure(np.asarray, run(twin))
    differences = []
    for a, b in zip(tf.nest.flatten(full), tf.nest.flatten(half), strict=True):
        if not np.issubdtype(a.dtype, np.floating):
            continue
        assert b.dtype == np.float32  # the task's outputs stay float32
        np.testing.assert_allclose(b, a, atol=ATOL, rtol=0)
        differences.append(np.abs(a - b).max())
    assert differences and max(differences) > 1e-6  # bf16 really ran
