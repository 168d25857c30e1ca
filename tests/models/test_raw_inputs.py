"""Raw inputs through `Task.fit/evaluate/predict` are the int path, only narrower.

For each task model with a preprocessor: `fit`, `evaluate` and `predict` on raw inputs
(strings, pairs, word lists, contexts + choices) give the losses and outputs of the same
examples fed as int tensors padded to the full `sequence_length` (<= 1e-5), although raw
batches are cut to their bucket width; packed tagging batches train like padded ones;
the number of traced train steps stays bounded over an epoch of mixed lengths; and
`batch_raw` pads only as far as a batch needs. The tokenizer is the real MiniLM one.
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
    BertSentenceEmbedder,
    BertTagger,
    MultipleChoicePreprocessor,
    TaggingPreprocessor,
    batch_raw,
)
from keras_bert_zoo.preprocessing.batching import batch_raw_sorted, padding_ratio, unsort
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


def backbone(seed=0):
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


def full_width(pre, x):
    """The same examples as int tensors at the full `sequence_length` (the padded path)."""
    return {k: v.numpy() for k, v in pre(x).items()}


def same_start(make):
    """Two models with identical weights (one for the raw path, one for the int path)."""
    a, b = make(), make()
    b.set_weights(a.get_weights())
    for m in (a, b):
        m.compile(optimizer=keras.optimizers.SGD(0.5))
    return a, b


@pytest.fixture(scope="module")
def pre():
    return BertPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)


@pytest.mark.parametrize("pairs", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_classifier_raw_equals_padded_ints(pre, pairs):
    x = list(zip(TEXTS, TEXTS[::-1], strict=True)) if pairs else TEXTS
    ints = full_width(pre, (tf.constant(TEXTS), tf.constant(TEXTS[::-1])) if pairs else tf.constant(TEXTS))
    raw_model, int_model = same_start(lambda: BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0))
    # predict: sorted by length inside, handed back in the input order
    np.testing.assert_allclose(
        raw_model.predict(x, batch_size=3, verbose=0), int_model.predict(ints, batch_size=3, verbose=0), atol=1e-5
    )
    np.testing.assert_allclose(
        raw_model.evaluate(x, LABELS, batch_size=3, verbose=0),
        int_model.evaluate(ints, LABELS, batch_size=3, verbose=0),
        atol=1e-5,
    )
    # fit: the same batches in the same order (no shuffling), cut to their width on the raw side
    raw = raw_model.fit(x, LABELS, batch_size=4, epochs=2, shuffle=False, batching="bucketed", verbose=0).history
    padded = int_model.fit(ints, LABELS, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(raw["loss"], padded["loss"], atol=1e-5)
    assert abs(raw["loss"][0] - raw["loss"][1]) > 1e-3  # it trained: the check can fail
    for a, b in zip(raw_model.get_weights(), int_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow  # default-run budget: one case of each kind stays in it
def test_sample_weight_reaches_the_loss(pre):
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    model.compile()
    weights = np.array([1.0] * 5 + [0.0] * 5)
    ints = full_width(pre, tf.constant(TEXTS))
    expected = model.evaluate(ints, LABELS, sample_weight=weights, batch_size=10, verbose=0)
    got = model.evaluate(TEXTS, LABELS, sample_weight=weights, batch_size=10, batching="bucketed", verbose=0)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert abs(got[0] - model.evaluate(TEXTS, LABELS, batch_size=10, verbose=0)[0]) > 1e-4


def test_embedder_raw_equals_padded_ints(pre):
    model = BertSentenceEmbedder(backbone(), pooling="mean", preprocessor=pre)
    np.testing.assert_allclose(
        model.predict(TEXTS, batch_size=4, verbose=0),
        model.predict(full_width(pre, tf.constant(TEXTS)), batch_size=4, verbose=0),
        atol=1e-5,
    )


@pytest.mark.slow  # default-run budget: one case of each kind stays in it
def test_multiple_choice_raw_equals_padded_ints():
    mc = MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    contexts = TEXTS[:6]
    choices = [[TEXTS[(i + 1) % 10], TEXTS[(i + 3) % 10], TEXTS[(i + 7) % 10]] for i in range(6)]
    labels = np.array([0, 1, 2, 0, 1, 2])
    ints = full_width(mc, (tf.constant(contexts), tf.constant(choices)))
    raw_model, int_model = same_start(lambda: BertMultipleChoice(backbone(), preprocessor=mc, dropout=0.0))
    np.testing.assert_allclose(
        raw_model.predict((contexts, choices), batch_size=4, verbose=0),
        int_model.predict(ints, batch_size=4, verbose=0),
        atol=1e-5,
    )
    raw = raw_model.fit(
        (contexts, choices), labels, batch_size=4, epochs=2, shuffle=False, batching="bucketed", verbose=0
    ).history
    padded = int_model.fit(ints, labels, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(raw["loss"], padded["loss"], atol=1e-5)
    with pytest.raises(ValueError, match="label 3; labels are choice indices 0..2"):
        raw_model.fit((contexts[:1], choices[:1]), [3], verbose=0)


def tagger_data():
    words = [t.split() for t in TEXTS]
    tags = [["B-MISC" if i % 3 == 0 else "O" for i in range(len(s))] for s in words]
    return words, tags, ["O", "B-MISC", "I-MISC"]


def test_tagger_raw_equals_padded_ints():
    words, tags, names = tagger_data()
    tp = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    ids = tf.ragged.constant([[names.index(t) for t in row] for row in tags], dtype=tf.int32)
    out = tp(tf.ragged.constant(words), ids)
    labels = out["labels"].numpy()
    ints = {k: out[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}
    raw_model, int_model = same_start(
        lambda: BertTagger(backbone(), num_labels=3, label_names=names, preprocessor=tp, dropout=0.0)
    )
    np.testing.assert_allclose(
        raw_model.predict(words, batch_size=4, verbose=0), int_model.predict(ints, batch_size=4, verbose=0), atol=1e-5
    )
    # evaluate sorts the windows by length: one batch holds all of them, so the token-averaged
    # loss is over the same tokens either way
    np.testing.assert_allclose(
        raw_model.evaluate(words, tags, batch_size=16, verbose=0),
        int_model.evaluate(ints, labels, batch_size=16, verbose=0),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        raw_model.evaluate(words, tags, batch_size=4, verbose=0, return_dict=True)["accuracy"],
        int_model.evaluate(ints, labels, batch_size=4, verbose=0, return_dict=True)["accuracy"],
        atol=1e-5,
    )
    raw = raw_model.fit(words, tags, batch_size=4, epochs=2, shuffle=False, batching="bucketed", verbose=0).history
    padded = int_model.fit(ints, labels, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(raw["loss"], padded["loss"], atol=1e-5)


@pytest.mark.slow  # default-run budget: one case of each kind stays in it
def test_tagger_packed_fit_trains_like_padded():
    """The training default packs each random batch into rows (same windows, same loss)."""
    words, tags, names = tagger_data()
    tp = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    packed_model, padded_model = same_start(
        lambda: BertTagger(backbone(), num_labels=3, label_names=names, preprocessor=tp, dropout=0.0)
    )
    packed_ds = packed_model.raw_dataset(words, tags, batch_size=4, training=True, seed=3)  # "auto": packed
    padded_ds = padded_model.raw_dataset(words, tags, batch_size=4, training=True, seed=3, batching="bucketed")
    rows = [
        (int(p["token_ids"].shape[0]), int(q["token_ids"].shape[0]))
        for (p, _), (q, _) in zip(packed_ds, padded_ds, strict=True)
    ]
    assert any(a < b for a, b in rows)  # rows really were packed
    # Keras' epoch loss averages batches weighted by their rows (fewer when packed), so
    # compare what training did: the same steps give the same weights.
    packed_model.fit(packed_ds, epochs=2, verbose=0)
    padded_model.fit(padded_ds, epochs=2, verbose=0)
    moved = max(
        float(np.abs(a - b).max())
        for a, b in zip(packed_model.get_weights(), backbone().get_weights() + [np.zeros(0)] * 2, strict=True)
        if a.shape == b.shape
    )
    assert moved > 1e-3
    for a, b in zip(packed_model.get_weights(), padded_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_tagger_packed_evaluation_equals_the_sorted_one():
    """`evaluate(batching="packed")` packs the labelled windows (it used to fall back to padded
    batches without a word): one batch of the same windows gives the same loss and accuracy."""
    words, tags, names = tagger_data()
    tp = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    model = BertTagger(backbone(), num_labels=3, label_names=names, preprocessor=tp)
    model.compile()
    features, _ = next(iter(model.raw_dataset(words, tags, batch_size=len(words), batching="packed")))
    assert features["padding_mask"].numpy().max() > 1  # windows share rows
    packed = model.evaluate(words, tags, batch_size=len(words), batching="packed", return_dict=True, verbose=0)
    sorted_ = model.evaluate(words, tags, batch_size=len(words), return_dict=True, verbose=0)
    assert packed.keys() == sorted_.keys()
    for key in packed:
        np.testing.assert_allclose(packed[key], sorted_[key], rtol=1e-5, err_msg=key)


def test_bounded_number_of_traced_train_steps(pre):
    """An epoch of 24 batches in many widths traces the train step a few times, not once per width."""
    rng = np.random.default_rng(0)
    words = "good bad film plot fine dull actor scene".split()
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, LENGTH - 2, size=96)]
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    model.compile()
    traces = []
    step = model.train_step
    model.train_step = lambda data: (traces.append(1), step(data))[1]  # runs only while tracing
    ds = model.raw_dataset(texts, rng.integers(0, 2, size=96), batch_size=4, training=True)
    widths = {int(f["token_ids"].shape[1]) for f, _ in ds}
    assert len(widths) >= 4
    model.fit(texts, rng.integers(0, 2, size=96), batch_size=4, epochs=1, verbose=0)
    # Once: the batches' spec is width-generic and the optimizer is built before the first
    # trace (a step creating its slot variables would be traced twice).
    assert len(traces) == 1, (len(traces), sorted(widths))
    assert model.optimizer.built


@pytest.mark.parametrize("raw", [True, False])
def test_string_metrics_trace_each_step_once(pre, raw):
    """`compile(metrics=["accuracy"])` (a name, so Keras creates the metric's variables in the
    first traced step, and `tf.function` then traces it again): `fit` and `evaluate` build
    that state first (`models.step_state`), so each step is traced once, on raw text and on ints."""
    traces = {"train": 0, "test": 0}

    def counted_model():
        model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        train_step, test_step = model.train_step, model.test_step
        model.train_step = lambda data: (traces.__setitem__("train", traces["train"] + 1), train_step(data))[1]
        model.test_step = lambda data: (traces.__setitem__("test", traces["test"] + 1), test_step(data))[1]
        return model

    x = TEXTS if raw else full_width(pre, TEXTS)
    counted_model().fit(x, LABELS, batch_size=4, epochs=1, verbose=0)
    scores = counted_model().evaluate(x, LABELS, batch_size=4, verbose=0, return_dict=True)  # evaluate alone
    assert traces == {"train": 1, "test": 1}
    assert sorted(scores) == ["accuracy", "loss"] and 0.0 <= scores["accuracy"] <= 1.0


def test_predict_traces_once_over_mixed_widths(pre):
    """`predict` on raw texts of many widths traces its step once (Keras would retrace per new width)."""
    rng = np.random.default_rng(1)
    words = "good bad film plot fine dull actor scene".split()
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, LENGTH - 2, size=50)]
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre, dropout=0.0)
    traces = []
    step = model.predict_step
    model.predict_step = lambda data: (traces.append(1), step(data))[1]  # runs only while tracing
    out = model.predict(texts, batch_size=4, verbose=0)
    assert len(traces) == 1 and out.shape == (50, 2)
    np.testing.assert_allclose(out, model.predict(full_width(pre, texts), verbose=0), rtol=1e-5, atol=1e-6)


def test_batch_raw_pads_only_what_a_batch_needs(pre):
    rng = np.random.default_rng(0)
    texts = [" ".join(["word"] * int(n)) for n in rng.integers(1, 30, size=200)]
    labels = rng.integers(0, 2, size=200)
    fixed = padding_ratio(batch_raw(pre, texts, labels, batching="fixed"))
    bucketed = padding_ratio(batch_raw(pre, texts, labels, batching="bucketed"))
    grouped = padding_ratio(batch_raw(pre, texts, labels, training=True))
    assert grouped < 1.3 < bucketed < fixed
    seen = sorted(int(v) for _, y in batch_raw(pre, texts, labels, training=True) for v in y.numpy())
    assert seen == sorted(labels.tolist())  # every example once per epoch
    ds, order = batch_raw_sorted(pre, texts, batch_size=16)
    lengths = np.concatenate([np.asarray(b["padding_mask"]).sum(1) for b in ds])
    assert (np.diff(lengths) >= 0).all()
    np.testing.assert_array_equal(unsort(lengths, order), np.asarray(pre(texts)["padding_mask"]).sum(1))


def test_raw_input_errors_are_one_clear_line(pre):
    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre)
    with pytest.raises(ValueError, match="batching='grouped'; use one of"):
        model.fit(TEXTS, LABELS, batching="grouped", verbose=0)
    with pytest.raises(ValueError, match="raw inputs must be strings .* got list values such as"):
        model.predict([[1, 2], [3, 4]], verbose=0)
    bare = BertClassifier(backbone(), num_classes=2)
    with pytest.raises(ValueError, match="has no preprocessor"):
        bare.raw_dataset(TEXTS)


def test_raw_datasets_run_without_autotuning(pre):
    """Autotuning's thread could hold an iterator's teardown for seconds after the last
    batch (`bucketing.finish_in_memory`); every in-memory pipeline the raw path hands
    Keras turns it off, and keeps a prefetch."""

    def autotuned(ds):
        return ds.options().autotune.enabled is not False

    model = BertClassifier(backbone(), num_classes=2, preprocessor=pre)
    datasets = {
        batching: model.raw_dataset(TEXTS, LABELS, batch_size=4, training=True, batching=batching)
        for batching in ("by_length", "bucketed", "fixed", "packed")
    }
    datasets["sorted"] = batch_raw_sorted(pre, TEXTS, batch_size=4)[0]
    words, tags, names = tagger_data()
    tp = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)
    tagger = BertTagger(backbone(), num_labels=3, label_names=names, preprocessor=tp)
    datasets["tagger_train"] = tagger.raw_dataset(words, tags, batch_size=4, training=True)
    datasets["tagger_evaluate"] = tagger.raw_dataset(words, tags, batch_size=4)
    assert not [name for name, ds in datasets.items() if autotuned(ds)]
    assert all(len(list(ds)) > 0 for ds in datasets.values())


def test_bucketed_predict_loops_run_without_autotuning(pre, monkeypatch):
    """The loops that call `predict` once per bucket (sentence embeddings, QA windows, the
    tagger under a strategy) go through `bucketing.in_memory_buckets`: each dataset
    they hand Keras has autotuning off, and the outputs land on the right rows."""
    from keras_bert_zoo import BertSpanQA
    from keras_bert_zoo.tasks.span_qa.preprocessor import (
        SpanQAPreprocessor,
        make_qa_dataset,
        make_qa_windows,
        window_logits,
    )

    seen = []
    predict = keras.Model.predict

    def spy(model, x, *args, **kwargs):
        seen.append(x)
        return predict(model, x, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "predict", spy)
    embedder = BertSentenceEmbedder(backbone(), preprocessor=pre)
    vectors = embedder.encode(TEXTS + ["a long one: " + " ".join(TEXTS[2:4])])
    one_by_one = np.concatenate([embedder.encode([t]) for t in TEXTS[:3]])
    np.testing.assert_allclose(vectors[:3], one_by_one, rtol=1e-5, atol=1e-6)
    qa_pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=64, doc_stride=16, max_query_length=8)
    windows = make_qa_windows(qa_pre, ["who acts ?"] * 3, [TEXTS[2], TEXTS[7], " ".join(TEXTS)], [4, 0, 0], [6, 1, 1])
    start, _ = window_logits(BertSpanQA(backbone()), windows)
    assert start.shape == windows.features["token_ids"].shape
    datasets = [x for x in seen if isinstance(x, tf.data.Dataset)]
    assert len(datasets) >= 4  # two widths of sentences, the one-by-one calls, the QA windows' buckets
    assert not [ds for ds in datasets if ds.options().autotune.enabled is not False]
    for ds in (
        make_qa_dataset(windows, batch_size=2),
        make_qa_dataset(windows, batch_size=2, training=True),
        make_qa_dataset(windows, batch_size=2, training=True, pack=True),
    ):
        assert ds.options().autotune.enabled is False
