""".keras save -> load -> identical predictions, for every model type; presets for task models.

`test_every_registered_class_is_covered` fails when a new registered model or
layer (e.g. `BertTagger`) lands without a round-trip here.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo
from keras_bert_zoo import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPreprocessor,
    BertPretrainer,
    BertSpanQA,
    BertTagger,
    MaskedLMMasker,
)
from tests.helpers import minilm_path

TEXTS = ["a good film", "", "Zürich, café — 日本語", "and on " * 40]

# Registered class -> the round-trip test whose loaded model must contain it.
COVERED = {
    "BertBackbone": "backbone",
    "BertEmbeddings": "backbone",
    "BertEncoderBlock": "backbone",
    "LoraDense": "backbone",  # and backbone_with_lora, its adapters
    "AttentionLayout": "backbone",
    "Int8Dense": "backbone",  # float here; quantized: tests/models/test_int8.py
    "BertClassifier": "classifier",
    "BertTokenizer": "classifier",
    "SegmentPacker": "classifier",
    "BertPreprocessor": "classifier",
    "BertPretrainer": "pretrainer",
    "MaskedLMHead": "pretrainer",
    "NextSentenceHead": "pretrainer",
    "MaskedLMMasker": "masker",
    "BertTagger": "tagger",
    "TaggingPreprocessor": "tagger",
    "BertSpanQA": "span_qa",
    "SpanQAPreprocessor": "span_qa",
    "BertMultipleChoice": "multiple_choice",
    "MultipleChoicePreprocessor": "multiple_choice",
    "BertSentenceEmbedder": "embedder",
    "SentencePooling": "embedder",
    "BertFeatureExtractor": "feature_extractor",
}


def _registered_layer_classes():
    found = {}
    for key, obj in keras.saving.get_custom_objects().items():
        if key.startswith("keras_bert_zoo>") and isinstance(obj, type) and issubclass(obj, keras.layers.Layer):
            found[obj.__name__] = obj
    return found


def _all_layers(model):
    layers = list(model._flatten_layers(include_self=True, recursive=True))
    pre = getattr(model, "preprocessor", None)
    if pre is not None:
        layers += [pre, pre.tokenizer] + ([pre.packer] if hasattr(pre, "packer") else [])
    # A class and the package's classes it derives from (Int8Dense is a LoraDense).
    return {cls.__name__ for layer in layers for cls in type(layer).__mro__}


def _backbone(vocabulary_size):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )


def _save_load(model, tmp_path, name):
    path = os.path.join(str(tmp_path), f"{name}.keras")
    model.save(path)
    return keras.saving.load_model(path)


def _ids(vocabulary_size, batch=3, length=10, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(5, vocabulary_size, (batch, length)).astype("int32"),
        "segment_ids": np.concatenate([np.zeros((batch, 6)), np.ones((batch, 4))], axis=1).astype("int32"),
        "padding_mask": np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 3 + [0] * 7], "int32")[:batch],
    }


def test_every_registered_class_is_covered():
    missing = sorted(set(_registered_layer_classes()) - set(COVERED))
    assert not missing, f"add a .keras round-trip (and a COVERED entry) for {missing}"
    assert keras_bert_zoo.BertClassifier is BertClassifier


def test_backbone(tmp_path):
    keras.utils.set_random_seed(0)
    model = _backbone(50)
    model_with_states = BertBackbone(**{**model.get_config(), "output_hidden_states": True})
    for m in (model, model_with_states):
        x = _ids(50)
        expected = m.predict(x, verbose=0)
        restored = _save_load(m, tmp_path, "backbone")
        got = restored.predict(x, verbose=0)
        tf.nest.map_structure(np.testing.assert_array_equal, expected, got)
        assert {
            "BertBackbone",
            "BertEmbeddings",
            "BertEncoderBlock",
            "AttentionLayout",
            "LoraDense",
            "Int8Dense",
        } <= _all_layers(restored)
        assert restored.get_config() == m.get_config()


def test_backbone_with_lora(tmp_path):
    """A LoRA backbone reloads with LoRA on and its adapters as they were (not merged)."""
    keras.utils.set_random_seed(0)
    model = _backbone(50)
    model.enable_lora(4)
    for w in model.weights:
        if "lora_kernel" in w.path:
            w.assign(np.random.default_rng(1).normal(0, 0.2, w.shape).astype("float32"))
    x = _ids(50)
    restored = _save_load(model, tmp_path, "backbone_lora")
    tf.nest.map_structure(np.testing.assert_array_equal, model.predict(x, verbose=0), restored.predict(x, verbose=0))
    assert restored.get_config() == model.get_config() and restored.get_config()["lora"]["rank"] == 4
    for a, b in zip(model.weights, restored.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_classifier_with_preprocessor(tmp_path):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=16)
    model = BertClassifier(
        _backbone(pre.tokenizer.vocabulary_size()),
        num_classes=3,
        preprocessor=pre,
        label_names=["a", "b", "c"],
        data_layout={"sequence_length": 16},
    )
    expected = model.predict(TEXTS, verbose=0)
    restored = _save_load(model, tmp_path, "classifier")
    # Raw strings in: the tokenizer, packer and vocabulary came back too.
    np.testing.assert_array_equal(restored.predict(TEXTS, verbose=0), expected)
    assert restored.label_names == ["a", "b", "c"] and restored.preprocessor.sequence_length == 16
    assert {"BertClassifier", "BertPreprocessor", "BertTokenizer", "SegmentPacker"} <= _all_layers(restored)
    # save_to_preset / from_preset keep the head, labels and the preprocessor.
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertClassifier.from_preset(str(tmp_path / "preset"))
    np.testing.assert_allclose(reloaded.predict(TEXTS, verbose=0), expected, rtol=1e-5, atol=1e-6)
    assert reloaded.label_names == ["a", "b", "c"] and reloaded.preprocessor.sequence_length == 16


def test_pretrainer(tmp_path):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=10)
    model = BertPretrainer(backbone=_backbone(pre.tokenizer.vocabulary_size()), preprocessor=pre)
    x = {**_ids(pre.tokenizer.vocabulary_size()), "mask_positions": np.array([[1, 2], [3, 0], [1, 0]], "int32")}
    expected = model.predict(x, verbose=0)
    restored = _save_load(model, tmp_path, "pretrainer")
    tf.nest.map_structure(np.testing.assert_array_equal, expected, restored.predict(x, verbose=0))
    # The MLM decoder is still tied to the (restored) token embedding, not a copy.
    assert restored.mlm_head.token_embedding is restored.backbone.token_embedding
    assert {"BertPretrainer", "MaskedLMHead", "NextSentenceHead", "BertPreprocessor"} <= _all_layers(restored)
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertPretrainer.from_preset(str(tmp_path / "preset"), preprocessor=None)
    tf.nest.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), expected, reloaded.predict(x, verbose=0)
    )


def test_tagger(tmp_path):
    from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

    keras.utils.set_random_seed(0)
    pre = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=12)
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    model = BertTagger(
        _backbone(pre.tokenizer.vocabulary_size()),
        num_labels=5,
        preprocessor=pre,
        label_names=names,
        data_layout={"scheme": None},
    )
    sentences = [["Angela", "Merkel", "visited", "Zürich"], ["and"] * 30, ["x"]]
    x = _ids(pre.tokenizer.vocabulary_size())
    expected, expected_tags = model.predict(x, verbose=0), model.predict_tags(sentences)
    assert [len(t) for t in expected_tags] == [4, 30, 1]  # 30 words in windows of 10 pieces
    restored = _save_load(model, tmp_path, "tagger")
    np.testing.assert_array_equal(restored.predict(x, verbose=0), expected)
    assert restored.predict_tags(sentences) == expected_tags and restored.label_names == names
    assert {"BertTagger", "TaggingPreprocessor", "BertTokenizer"} <= _all_layers(restored)
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertTagger.from_preset(str(tmp_path / "preset"))
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-5)
    assert reloaded.predict_tags(sentences) == expected_tags and reloaded.preprocessor.sequence_length == 12


def test_span_qa(tmp_path):
    from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor

    keras.utils.set_random_seed(0)
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=24, doc_stride=6, max_query_length=8)
    model = BertSpanQA(
        _backbone(pre.tokenizer.vocabulary_size()),
        preprocessor=pre,
        version_2_with_negative=True,
        null_threshold=0.5,
        data_layout={"doc_stride": 6},
    )
    questions, contexts = ["Who visited Zürich?", "and?"], ["Angela Merkel visited Zürich. " * 6, "x"]
    x = _ids(pre.tokenizer.vocabulary_size())
    expected, expected_answers = model.predict(x, verbose=0), model.predict_answers(questions, contexts)
    restored = _save_load(model, tmp_path, "span_qa")
    tf.nest.map_structure(np.testing.assert_array_equal, restored.predict(x, verbose=0), expected)
    assert restored.predict_answers(questions, contexts) == expected_answers
    assert restored.null_threshold == 0.5 and restored.version_2_with_negative
    assert {"BertSpanQA", "SpanQAPreprocessor", "BertTokenizer"} <= _all_layers(restored)
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertSpanQA.from_preset(str(tmp_path / "preset"))
    tf.nest.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), reloaded.predict(x, verbose=0), expected
    )
    assert reloaded.preprocessor.doc_stride == 6 and reloaded.preprocessor.max_query_length == 8
    assert [r["answer"] for r in reloaded.predict_answers(questions, contexts)] == [
        r["answer"] for r in expected_answers
    ]


def test_multiple_choice(tmp_path):
    from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor

    keras.utils.set_random_seed(0)
    pre = MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=12)
    model = BertMultipleChoice(
        _backbone(pre.tokenizer.vocabulary_size()),
        preprocessor=pre,
        data_layout={"sequence_length": 12, "num_choices": 3},
    )
    contexts, choices = TEXTS[:3], [TEXTS[1:], TEXTS[:3], [TEXTS[3], TEXTS[0], TEXTS[0]]]
    expected = model.predict((contexts, choices), verbose=0)
    assert expected.shape == (3, 3)
    restored = _save_load(model, tmp_path, "multiple_choice")
    # Raw strings in: the preprocessor (and its length) came back too.
    np.testing.assert_array_equal(restored.predict((contexts, choices), verbose=0), expected)
    assert restored.preprocessor.sequence_length == 12 and restored.data_layout == model.data_layout
    assert {"BertMultipleChoice", "MultipleChoicePreprocessor", "BertTokenizer", "SegmentPacker"} <= _all_layers(
        restored
    )
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertMultipleChoice.from_preset(str(tmp_path / "preset"))
    np.testing.assert_allclose(reloaded.predict((contexts, choices), verbose=0), expected, rtol=1e-5, atol=1e-5)
    assert reloaded.preprocessor.sequence_length == 12


@pytest.mark.parametrize("pooling", ["mean", "pooled"])
def test_embedder(tmp_path, pooling):
    from keras_bert_zoo import BertSentenceEmbedder

    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=16)
    model = BertSentenceEmbedder(
        _backbone(pre.tokenizer.vocabulary_size()), pooling=pooling, normalize=True, preprocessor=pre
    )
    expected = model.encode(TEXTS)
    restored = _save_load(model, tmp_path, "embedder")
    np.testing.assert_array_equal(restored.encode(TEXTS), expected)
    assert (restored.pooling, restored.normalize, restored.preprocessor.sequence_length) == (pooling, True, 16)
    assert {"BertSentenceEmbedder", "BertPreprocessor"} | (
        {"SentencePooling"} if pooling == "mean" else set()
    ) <= _all_layers(restored)
    model.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertSentenceEmbedder.from_preset(str(tmp_path / "preset"))
    np.testing.assert_allclose(reloaded.encode(TEXTS), expected, rtol=1e-5, atol=1e-6)


def test_feature_extractor(tmp_path):
    from keras_bert_zoo import BertFeatureExtractor

    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=50,
        num_layers=4,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=32,
        output_hidden_states=True,
    )
    model = BertFeatureExtractor(backbone, combination="concat_last_four")
    x = _ids(50)
    expected = model.predict(x, verbose=0)
    restored = _save_load(model, tmp_path, "feature_extractor")
    np.testing.assert_array_equal(restored.predict(x, verbose=0), expected)
    assert restored.combination == "concat_last_four" and not restored.trainable_weights
    assert {"BertFeatureExtractor", "BertBackbone"} <= _all_layers(restored)


def test_masker(tmp_path):
    # The masker has no weights: its .keras content is its config, checked with the same seed.
    masker = MaskedLMMasker(
        vocabulary_size=60,
        mask_token_id=4,
        unselectable_token_ids=[0, 2, 3],
        max_predictions=4,
        whole_word_masking=False,
    )
    ids = tf.constant(_ids(60)["token_ids"])
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(masker))
    a, b = masker(ids, seed=[3, 4]), restored(ids, seed=[3, 4])
    tf.nest.map_structure(lambda x, y: np.testing.assert_array_equal(x.numpy(), y.numpy()), a, b)
    assert restored.get_config() == masker.get_config()


@pytest.mark.parametrize("policy", ["mixed_bfloat16"])
def test_classifier_mixed_precision_roundtrip(tmp_path, policy):
    keras.config.set_dtype_policy(policy)
    model = BertClassifier(_backbone(50), num_classes=2)
    x = _ids(50)
    expected = model.predict(x, verbose=0)
    restored = _save_load(model, tmp_path, "mixed")
    np.testing.assert_array_equal(restored.predict(x, verbose=0), expected)
    assert restored.backbone.dtype_policy.name == policy


@pytest.mark.parametrize(
    "make",
    [
        lambda: BertClassifier(_backbone(40), num_classes=3),
        lambda: BertTagger(_backbone(40), num_labels=5),
        lambda: BertSpanQA(_backbone(40)),
        lambda: BertMultipleChoice(_backbone(40)),
        lambda: BertPretrainer(_backbone(40)),
    ],
    ids=["classifier", "tagger", "span_qa", "multiple_choice", "pretrainer"],
)
def test_compiled_task_reloads_compiled(make, tmp_path):
    """A task compiled with its defaults comes back from `.keras` compiled the same way,
    optimizer state included, without Keras' "compile() was not called" warning."""
    import warnings

    from keras_bert_zoo.training import create_optimizer

    model = make()
    model.compile(optimizer=create_optimizer(1e-3, total_steps=10, warmup_steps=2))
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        loaded = _save_load(model, tmp_path, "compiled")
    assert loaded.compiled and type(loaded.optimizer) is type(model.optimizer)
    assert int(loaded.optimizer.iterations) == 3
    assert float(loaded.optimizer.learning_rate) == pytest.approx(float(model.optimizer.learning_rate))


def test_uncompiled_task_reloads_uncompiled_and_compiled_one_trains(tmp_path):
    """`compile_from_config` must not compile a model saved uncompiled, and a reloaded
    compiled one trains on from its restored optimizer step."""
    model = BertClassifier(_backbone(40), num_classes=3)
    assert not _save_load(model, tmp_path, "bare").compiled
    model.compile()  # optimizer="auto"
    x, y = _ids(40), np.array([0, 1, 2])
    model.train_on_batch(x, y)
    loaded = _save_load(model, tmp_path, "trained")
    assert int(loaded.optimizer.iterations) == 1
    loaded.train_on_batch(x, y)
    assert int(loaded.optimizer.iterations) == 2
