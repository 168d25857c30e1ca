"""The pooled heads' fast path: the last layer at `[CLS]` only, and packed classification rows.

`BertClassifier` and `BertMultipleChoice` compute their logits through
`BertBackbone.pooled_output`, which runs the last encoder layer only at the tokens the
pooler reads. These tests hold it to the Functional graph the models are built from
(the whole last layer, then `pooled_output` of row position 0): equal logits, equal
gradients. Packed rows (`batching="packed"`, `pack_for_pooling`) give each example (and
each question's choices) the logits it has alone, and the loss and gradients of its
padded batch; evaluation cuts
sorted batches to their own longest and still traces its step once.
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
    MultipleChoicePreprocessor,
    batch_raw,
)
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.preprocessing.packing import pack_for_pooling
from tests.helpers import minilm_path

LENGTH = 40
TEXTS = [
    "a charming film .",
    "dull",
    "the plot is thin but the acting is fine and the score is lovely",
    "it never finds its footing",
    "a triumph",
    "one of the worst films of the year , badly written",
    "funny",
    "a quiet , patient , deeply moving portrait of a family in trouble",
    "meh",
    "bold and strange",
]
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 1, 0, 1])


def backbone(seed=0, num_layers=2):
    keras.utils.set_random_seed(seed)
    return BertBackbone(
        vocabulary_size=30522,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=64,
        dropout=0.0,
        initializer_range=0.5,
    )


def graph_logits(model, features):
    """The Functional graph the model was built from: every token of the last layer."""
    return super(type(model), model).call(features, training=False)


@pytest.fixture(scope="module")
def pre():
    return BertPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)


@pytest.mark.parametrize("num_layers", [1, 3])
def test_classifier_logits_equal_the_whole_last_layer(pre, num_layers):
    model = BertClassifier(backbone(num_layers=num_layers), num_classes=3, preprocessor=pre, dropout=0.0)
    features = pre((tf.constant(TEXTS), tf.constant(TEXTS[::-1])))
    ours = model(features, training=False).numpy()
    np.testing.assert_allclose(ours, graph_logits(model, features).numpy(), rtol=1e-5, atol=1e-6)
    pooled = model.backbone(features)["pooled_output"].numpy()
    np.testing.assert_allclose(model.backbone.pooled_output(features).numpy(), pooled, rtol=1e-5, atol=1e-6)
    assert np.abs(ours).max() > 1e-3  # a head that outputs zeros would pass the comparison


def test_classifier_gradients_equal_the_whole_last_layer(pre):
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    features = pre(tf.constant(TEXTS))
    labels = tf.constant(LABELS)

    def grads(forward):
        with tf.GradientTape() as tape:
            loss = keras.losses.sparse_categorical_crossentropy(labels, forward(features), from_logits=True)
            loss = tf.reduce_mean(loss)
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    ours = grads(lambda f: model(f, training=False))
    whole = grads(lambda f: graph_logits(model, f))
    assert len(ours) == len(whole) and all(g is not None for g in ours)
    for a, b in zip(ours, whole, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_multiple_choice_scores_equal_the_whole_last_layer():
    model = BertMultipleChoice(backbone(), dropout=0.0)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 30000, size=(3, 4, 9))
    mask = (np.arange(9)[None, None, :] < rng.integers(3, 10, size=(3, 4, 1))).astype("int32")
    features = {"token_ids": ids * mask, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    np.testing.assert_allclose(
        model(features, training=False).numpy(), graph_logits(model, features).numpy(), rtol=1e-5, atol=1e-6
    )


def test_packed_rows_give_each_example_its_own_logits(pre):
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    padded = pre(tf.constant(TEXTS))
    packed = pack_for_pooling(padded, width=LENGTH)
    assert packed["token_ids"].shape[0] < len(TEXTS)  # several examples share a row
    alone = np.concatenate([model({k: v[i : i + 1] for k, v in padded.items()}).numpy() for i in range(len(TEXTS))])
    np.testing.assert_allclose(model(packed).numpy(), alone, rtol=1e-5, atol=1e-6)


def test_packed_fit_trains_like_the_padded_batch(pre):
    """One SGD step on a packed batch = one step on the same examples padded (dropout 0)."""

    def make():
        model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        return model

    packed_model, padded_model = make(), make()
    padded_model.set_weights(packed_model.get_weights())
    packed_model.fit(TEXTS, LABELS, batch_size=len(TEXTS), epochs=1, verbose=0, batching="packed", shuffle=False)
    padded_model.fit(
        {k: v.numpy() for k, v in pre(tf.constant(TEXTS)).items()},
        LABELS,
        batch_size=len(TEXTS),
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    moved = max(
        float(np.abs(a - b).max()) for a, b in zip(packed_model.get_weights(), make().get_weights(), strict=True)
    )
    assert moved > 1e-3
    for a, b in zip(packed_model.get_weights(), padded_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_packed_batches_and_their_evaluation(pre):
    ds = batch_raw(pre, TEXTS, LABELS, batch_size=5, batching="packed")
    features, labels = next(iter(ds))
    assert features["cls_index"].shape == (5, 2) and labels.shape == (5,)
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    model.compile()
    packed = model.evaluate(TEXTS, LABELS, batch_size=5, verbose=0, batching="packed", return_dict=True)
    sorted_ = model.evaluate(TEXTS, LABELS, batch_size=5, verbose=0, return_dict=True)
    np.testing.assert_allclose(packed["loss"], sorted_["loss"], rtol=1e-5)


@pytest.mark.parametrize("width", [0, -8, 2.5, "64", True])
def test_a_bad_pack_width_is_one_clear_error(pre, width):
    with pytest.raises(UsageError, match="pack_width=.*positive int"):
        batch_raw(pre, TEXTS, LABELS, batching="packed", pack_width=width)


def test_packed_batching_refused_by_a_model_that_reads_row_zero(pre):
    from keras_bert_zoo import BertPretrainer

    model = BertPretrainer(backbone(), preprocessor=pre)
    with pytest.raises(UsageError, match='batching="packed" needs a model that reads packed rows'):
        model.raw_dataset(TEXTS, batching="packed")


@pytest.fixture(scope="module")
def choice_pre():
    return MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)


# Five questions of three choices each, of mixed lengths (the shortest pair 5 pieces, the longest 25).
CONTEXTS = TEXTS[:5]
CHOICES = [[TEXTS[(i + 1) % 10], TEXTS[(i + 4) % 10], TEXTS[(i + 8) % 10]] for i in range(5)]
CHOICE_LABELS = np.array([0, 2, 1, 1, 0])


def test_packed_choice_rows_give_each_question_its_own_scores(choice_pre):
    model = BertMultipleChoice(backbone(), dropout=0.0)
    padded = choice_pre((tf.constant(CONTEXTS), tf.constant(CHOICES)))
    packed = pack_for_pooling(padded, width=LENGTH)
    assert packed["cls_index"].shape == (5, 3, 2)
    assert packed["token_ids"].shape[0] < 15  # several pairs share a row
    alone = np.concatenate([model({k: v[i : i + 1] for k, v in padded.items()}).numpy() for i in range(5)])
    np.testing.assert_allclose(model(packed).numpy(), alone, rtol=1e-5, atol=1e-6)
    assert np.abs(alone).max() > 1e-3


def test_packed_choice_fit_evaluate_predict_match_the_padded_batches(choice_pre):
    """Packed batches of questions: the scores, the loss and one SGD step of their padded batches."""

    def make():
        model = BertMultipleChoice(backbone(), preprocessor=choice_pre, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        return model

    packed_model, padded_model = make(), make()
    x = (CONTEXTS, CHOICES)
    np.testing.assert_allclose(
        packed_model.predict(x, batch_size=2, batching="packed", verbose=0),
        padded_model.predict(x, batch_size=2, verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )
    packed = packed_model.evaluate(x, CHOICE_LABELS, batch_size=2, batching="packed", verbose=0, return_dict=True)
    padded = padded_model.evaluate(x, CHOICE_LABELS, batch_size=2, verbose=0, return_dict=True)
    np.testing.assert_allclose(packed["loss"], padded["loss"], rtol=1e-5)
    packed_model.fit(x, CHOICE_LABELS, batch_size=5, epochs=1, batching="packed", shuffle=False, verbose=0)
    padded_model.fit(x, CHOICE_LABELS, batch_size=5, epochs=1, batching="bucketed", shuffle=False, verbose=0)
    moved = max(
        float(np.abs(a - b).max()) for a, b in zip(packed_model.get_weights(), make().get_weights(), strict=True)
    )
    assert moved > 1e-3
    for a, b in zip(packed_model.get_weights(), padded_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_evaluate_traces_once_over_batches_cut_to_their_longest(pre):
    """Sorted evaluation batches come in many widths (each its own longest); one trace serves them."""
    rng = np.random.default_rng(1)
    words = "good bad film plot fine dull actor scene".split()
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, LENGTH - 2, size=50)]
    labels = rng.integers(0, 2, size=50)
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    model.compile()
    widths, traces = [], []
    step = model.test_step
    model.test_step = lambda data: (traces.append(1), widths.append(data[0]["token_ids"].shape[1]), step(data))[2]
    ours = model.evaluate(texts, labels, batch_size=4, verbose=0, return_dict=True)
    assert len(traces) == 1 and widths == [None]  # one shape-generic trace
    ints = {k: v.numpy() for k, v in pre(tf.constant(texts)).items()}
    padded = model.evaluate(ints, labels, batch_size=4, verbose=0, return_dict=True)
    np.testing.assert_allclose(ours["loss"], padded["loss"], rtol=1e-5)


def test_choice_packs_by_default_on_one_replica(choice_pre):
    """`batching="auto"` packs a question's pairs (`packs_by_default`), with the scores of the
    padded batches; the classifier keeps its length-grouped default."""
    model = BertMultipleChoice(backbone(), preprocessor=choice_pre, dropout=0.0)
    x = (CONTEXTS, CHOICES)
    features, _ = next(iter(model.raw_dataset(x, CHOICE_LABELS, batch_size=5, training=True)))
    assert features["cls_index"].shape == (5, 3, 2)
    np.testing.assert_allclose(
        model.predict(x, batch_size=2, verbose=0),
        model.predict(x, batch_size=2, batching="bucketed", verbose=0),
        rtol=1e-5,
        atol=1e-6,
    )
    classifier = BertClassifier(
        backbone(), num_classes=2, preprocessor=BertPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    )
    assert "cls_index" not in next(iter(classifier.raw_dataset(TEXTS, LABELS, training=True)))[0]


def test_packed_rows_of_a_pooled_head_are_refused_across_replicas(choice_pre, monkeypatch):
    """A strategy splits a batch's rows and its `cls_index` apart: packing a pooled head on
    several replicas is one clear error, and "auto" does not pack there (`raw_dataset`, and
    `finetune`, which asks the model class the same)."""
    from keras_bert_zoo import BertTagger

    class TwoReplicas:
        num_replicas_in_sync = 2

    monkeypatch.setattr(BertMultipleChoice, "distribute_strategy", property(lambda self: TwoReplicas()))
    model = BertMultipleChoice(backbone(), preprocessor=choice_pre)
    x = (CONTEXTS, CHOICES)
    with pytest.raises(UsageError, match='batching "packed" is for one replica'):
        model.raw_dataset(x, CHOICE_LABELS, batching="packed")
    assert "cls_index" not in next(iter(model.raw_dataset(x, CHOICE_LABELS, training=True)))[0]
    with pytest.raises(UsageError, match='batching "packed" is for one replica: BertClassifier'):
        BertClassifier.batching_on_replicas("packed", replicas=2)
    assert BertMultipleChoice.batching_on_replicas("auto", replicas=2) == "auto"
    assert BertMultipleChoice.batching_on_replicas("auto", replicas=1) == "packed"
    assert BertClassifier.batching_on_replicas("auto", replicas=1) == "auto"
    assert BertTagger.batching_on_replicas("packed", replicas=2) == "packed"  # token-level rows split fine
