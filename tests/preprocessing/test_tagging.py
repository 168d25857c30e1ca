import collections
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
from keras_bert_zoo.tasks.tagger.alignment import IGNORE_LABEL, MODEL_INPUTS, inside_label_map
from keras_bert_zoo.tasks.tagger.data import read_tagged
from keras_bert_zoo.tasks.tagger.dataset import make_tagging_dataset
from keras_bert_zoo.tasks.tagger.predict import predict_words
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.windows import make_windows, merge_windows, merge_windows_tf
from tests.helpers import minilm_path, shared_data

LABELS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset(minilm_path())


@pytest.fixture(scope="module")
def testa():
    return read_tagged(shared_data("conll2003", "eng.testa"))


def _hf_reference(encoding, word_labels, label_all_tokens, b_to_i):
    """HF run_ner.py's `tokenize_and_align_labels`, as written there."""
    labels, word_ids = [], []
    previous = None
    for word_idx in encoding.word_ids:
        if word_idx is None:
            labels.append(-100)
        elif word_idx != previous:
            labels.append(word_labels[word_idx])
        else:
            labels.append(b_to_i[word_labels[word_idx]] if label_all_tokens else -100)
        word_ids.append(-1 if word_idx is None else word_idx)
        previous = word_idx
    return labels, word_ids


@pytest.mark.parametrize("length", [32, 128])
def test_alignment_equals_hf_on_conll(tokenizer, testa, length):
    """Token ids, first-piece labels, word ids and (label_all_tokens) I- labels equal
    HF's fast tokenizer + run_ner.py on 600 real eng.testa sentences, truncated alike."""
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertTokenizerFast(os.path.join(minilm_path(), "vocab.txt"))
    words = testa.words[:600]
    ids = testa.label_ids()[:600]
    enc = hf(words, is_split_into_words=True, truncation=True, max_length=length, padding="max_length")
    b_to_i = inside_label_map(LABELS)
    assert [LABELS[b_to_i[i]] for i in range(9)] == ["O", "I-LOC", "I-MISC", "I-ORG", "I-PER"] + LABELS[5:]
    for label_all_tokens in (False, True):
        pre = TaggingPreprocessor(
            tokenizer, sequence_length=length, label_all_tokens=label_all_tokens, label_names=LABELS
        )
        out = {k: v.numpy() for k, v in pre(words, ids).items()}
        np.testing.assert_array_equal(out["token_ids"], np.asarray(enc["input_ids"]))
        np.testing.assert_array_equal(out["padding_mask"], np.asarray(enc["attention_mask"]))
        np.testing.assert_array_equal(out["segment_ids"], np.asarray(enc["token_type_ids"]))
        for i in range(len(words)):
            labels, word_ids = _hf_reference(enc[i], ids[i], label_all_tokens, b_to_i)
            assert out["labels"][i].tolist() == labels, i
            assert out["word_ids"][i].tolist() == word_ids, i
    if length == 32:  # truncation was exercised
        assert sum(len(hf(w, is_split_into_words=True)["input_ids"]) > length for w in words) > 20
    for k in list(MODEL_INPUTS) + ["labels", "word_ids", "first_piece_mask"]:
        assert out[k].dtype == np.int32 and out[k].shape == (600, length)


def test_label_all_tokens_gives_inside_forms(tokenizer):
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "S-MISC"]
    pre = TaggingPreprocessor(tokenizer, sequence_length=16, label_all_tokens=True, label_names=names)
    words = [["Kowalczyk", "visits", "Szczebrzeszyn", "Zurich"]]
    out = pre(words, [[1, 0, 3, 5]])
    labels = out["labels"].numpy()[0]
    word_ids = out["word_ids"].numpy()[0]
    tags = [None if lab == IGNORE_LABEL else names[lab] for lab in labels]
    by_word = {w: [t for t, x in zip(tags, word_ids, strict=True) if x == w] for w in range(4)}
    assert len(by_word[0]) > 1 and by_word[0] == ["B-PER"] + ["I-PER"] * (len(by_word[0]) - 1)
    assert len(by_word[2]) > 1 and by_word[2] == ["B-LOC"] + ["I-LOC"] * (len(by_word[2]) - 1)
    assert set(by_word[1]) == {"O"}
    assert tags[0] is None and tags[int(out["padding_mask"].numpy()[0].sum()) - 1] is None
    with pytest.raises(ValueError, match="needs `label_names`"):
        TaggingPreprocessor(tokenizer, label_all_tokens=True)


def test_word_without_pieces_gets_unk_slot(tokenizer):
    pre = TaggingPreprocessor(tokenizer, sequence_length=8)
    out = pre([["a", "\x01", "", "b"]], [[0, 1, 2, 3]])
    assert out["token_ids"].numpy()[0, :6].tolist() == [
        tokenizer.cls_token_id,
        tokenizer.token_to_id("a"),
        tokenizer.unk_token_id,
        tokenizer.unk_token_id,
        tokenizer.token_to_id("b"),
        tokenizer.sep_token_id,
    ]
    assert out["labels"].numpy()[0, :6].tolist() == [-100, 0, 1, 2, 3, -100]
    assert out["word_ids"].numpy()[0].tolist() == [-1, 0, 1, 2, 3, -1, -1, -1]


def _long_sentence(testa, n=1000):
    words = [w for s in testa.words for w in s][: n - 2]
    # A word of more pieces than a window at length 32 (split inside it is unavoidable) and a control char.
    return words[:500] + ["qzxjkvbqwpzxkjqvbzxqwjkzpvqxzjbkwqzxpvjkqzbxwvqpzkj", "\x07"] + words[500:]


def _max_context_reference(windows, sentence, word):
    """Independent, loop-by-loop run_squad `_check_is_max_context` for one word."""
    best, best_score = None, None
    for k in range(len(windows)):
        if windows.sentence_ids[k] != sentence:
            continue
        wid, first = windows.word_ids[k], windows.first_piece_mask[k]
        length = int((wid >= 0).sum())
        for pos in range(len(wid)):
            if wid[pos] == word and first[pos]:
                left, right = pos - 1, length - pos
                score = min(left, right) + 0.01 * length
                if best_score is None or score > best_score:
                    best, best_score = (k, pos), score
    return best


@pytest.mark.parametrize("length", [32, 128])
def test_long_sentence_every_word_once_from_max_context_window(tokenizer, testa, length):
    words = _long_sentence(testa)
    assert len(words) == 1000
    sentences = [words[:7], words, words[3:40]]
    pre = TaggingPreprocessor(tokenizer, sequence_length=length)
    windows = make_windows(sentences, pre)
    assert np.all(np.diff(windows.sentence_ids) >= 0) and windows.sentence_ids[0] == 0
    assert np.sum(windows.sentence_ids == 1) > (1000 // length)
    calls = []

    def encode_window_and_position(features):
        """Fake model: the prediction at each position is (global window index, position)."""
        n = features["token_ids"].shape[0]
        first = sum(calls)
        calls.append(n)
        return (np.arange(first, first + n)[:, None] * length + np.arange(length)[None, :]).astype(np.int64)

    tags = predict_words(
        encode_window_and_position, sentences, pre, label_names=[str(i) for i in range(10**6)], batch_size=7
    )
    assert [len(t) for t in tags] == [len(s) for s in sentences]
    for s, sentence_tags in enumerate(tags):
        for w, value in enumerate(sentence_tags):
            k, pos = divmod(int(value), length)
            assert windows.sentence_ids[k] == s and windows.word_ids[k, pos] == w and windows.first_piece_mask[k, pos]
            if s == 1 and (w % 7 == 0 or 495 <= w <= 505):  # the reference loop is slow: a sample
                assert (k, pos) == _max_context_reference(windows, s, w), (s, w)
    # Windows start at word starts unless a word is longer than the stride; no gap between windows.
    pieces = tokenizer(tf.constant(words)).row_lengths().numpy()
    long_sentence = np.nonzero(windows.sentence_ids == 1)[0]
    inside_word = []
    for a, b in zip(long_sentence[:-1], long_sentence[1:], strict=True):
        starts_word = windows.first_piece_mask[b, 1] == 1
        assert starts_word or pieces[windows.word_ids[b, 1]] > pre.window_stride
        inside_word.append(not starts_word)
        assert windows.word_ids[b, 1] <= windows.word_ids[a][windows.word_ids[a] >= 0].max() + 1
    # Only the 46-piece word (longer than a 30-piece window) is cut, and only at length 32.
    assert pieces[500] == 46 and pieces[501] == 0 and (any(inside_word) == (length == 32))
    # The TF-ops merge (for serving) picks the same positions, also inside tf.function.
    values = np.arange(windows.word_ids.size).reshape(windows.word_ids.shape)
    expected = merge_windows(
        values, windows.word_ids, windows.sentence_ids, windows.first_piece_mask, windows.num_words
    )
    in_graph = tf.function(merge_windows_tf)(
        values, windows.word_ids, windows.sentence_ids, windows.num_words, windows.first_piece_mask
    )
    assert in_graph.to_list() == [e.tolist() for e in expected]
    derived = merge_windows_tf(values, windows.word_ids, windows.sentence_ids, windows.num_words)
    assert derived.row_lengths().numpy().tolist() == windows.num_words
    last = long_sentence[-1]
    assert windows.word_ids[last][windows.word_ids[last] >= 0].max() == 999


def test_every_testa_sentence_at_length_32(tokenizer, testa):
    """All 51,362 words get a tag, the tag read at the word's own first piece."""
    pre = TaggingPreprocessor(tokenizer, sequence_length=32)
    names = [f"c{i}" for i in range(9)]

    def logits_from_token_ids(features):
        return tf.one_hot(features["token_ids"] % 9, 9)

    tags = predict_words(logits_from_token_ids, testa, pre, label_names=names, batch_size=256)
    assert [len(t) for t in tags] == [len(s) for s in testa.words]
    assert sum(map(len, tags)) == 51362
    flat = [w for s in testa.words for w in s]
    first_piece = tokenizer(tf.constant(flat))[:, :1].to_tensor(default_value=tokenizer.unk_token_id).numpy()[:, 0]
    assert [t for s in tags for t in s] == [names[i % 9] for i in first_piece]


def test_windows_training_labels_and_dataset(tokenizer, testa):
    ex = testa
    pre = TaggingPreprocessor(tokenizer, sequence_length=32, label_names=ex.label_names)
    windows = make_windows(ex, pre)
    assert len(windows) > len(ex)
    # Each word's label sits on its first piece in every window holding it; nothing else is labelled.
    labelled = windows.labels != IGNORE_LABEL
    np.testing.assert_array_equal(labelled, windows.first_piece_mask == 1)
    ids = ex.label_ids()
    rows, cols = np.nonzero(labelled)
    for k, p in zip(rows[::97], cols[::97], strict=True):
        assert windows.labels[k, p] == ids[windows.sentence_ids[k]][windows.word_ids[k, p]]
    ds = make_tagging_dataset(ex, pre, batch_size=64, training=True, seed=1, windows=windows)
    assert int(ds.cardinality()) == -(-len(windows) // 64)
    x, y = next(iter(ds))
    assert set(x) == set(MODEL_INPUTS) and y.shape == (64, 32) and y.dtype == tf.int32
    assert all(v.dtype == tf.int32 and v.shape == (64, 32) for v in x.values())
    again = next(iter(make_tagging_dataset(ex, pre, batch_size=64, training=True, seed=1, windows=windows)))
    np.testing.assert_array_equal(x["token_ids"], again[0]["token_ids"])  # seeded
    pred = make_tagging_dataset(ex, pre, batch_size=50, windows=windows, drop_remainder=True)
    x, info = next(iter(pred))
    assert set(info) == {"word_ids", "first_piece_mask", "sentence_ids"} and info["sentence_ids"].shape == (50,)
    assert int(pred.cardinality()) == len(windows) // 50
    bucketed = make_tagging_dataset(ex, pre, batch_size=64, with_labels=True, bucket=True, windows=windows)
    widths = {int(b[0]["token_ids"].shape[1]) for b in bucketed.take(20)}
    assert widths <= {16, 32} and all(b[1].shape[1] == b[0]["token_ids"].shape[1] for b in bucketed.take(3))


def test_random_training_batches_cut_to_their_longest(tokenizer, testa):
    """Random training batches (bucketing's default) are cut to within 8 pieces of their
    longest window (HF pads to the longest): the same rows in the same order as uncut
    batches, and a tagger's loss on a cut batch equals its loss on the full width."""
    from keras_bert_zoo import BertBackbone, BertTagger

    pre = TaggingPreprocessor(tokenizer, sequence_length=64, label_names=testa.label_names)
    windows = make_windows(testa, pre)

    def batches(bucket):
        # The whole epoch: its order also depends on the global TF seed earlier tests set, so
        # a dozen batches may all hold a window of full length.
        return list(
            make_tagging_dataset(None, pre, batch_size=32, training=True, seed=5, windows=windows, bucket=bucket)
        )

    cut, full = batches(True), batches(False)
    widths = set()
    for (x, y), (fx, fy) in zip(cut, full, strict=True):
        width, longest = int(x["token_ids"].shape[1]), int(x["padding_mask"].numpy().sum(axis=1).max())
        assert longest <= width < longest + 8 or width == 64
        widths.add(width)
        for k in MODEL_INPUTS:
            np.testing.assert_array_equal(x[k], fx[k][:, :width])
            assert not fx[k][:, width:].numpy().any()  # only padding was cut
        np.testing.assert_array_equal(y, fy[:, :width])
        assert (fy.numpy()[:, width:] == IGNORE_LABEL).all()
    assert widths - {16, 32, 64}  # finer than the coarse buckets
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=64,
        dropout=0.0,
    )
    model = BertTagger(backbone, num_labels=len(testa.label_names), dropout=0.0)
    (x, y), (fx, fy) = cut[0], full[0]
    loss_cut = float(model.compute_loss(y=y, y_pred=model(x)))
    loss_full = float(model.compute_loss(y=fy, y_pred=model(fx)))
    assert loss_cut == pytest.approx(loss_full, rel=1e-5)


def test_training_batches_grouped_by_length(tokenizer, testa):
    """group_by_length: every window exactly once per epoch, each batch padded by less
    than 8 pieces beyond its longest window, labels padded with IGNORE_LABEL, and far
    less padding than random batches (the point of it)."""
    pre = TaggingPreprocessor(tokenizer, sequence_length=64, label_names=testa.label_names)
    windows = make_windows(testa, pre)
    ds = make_tagging_dataset(testa, pre, batch_size=32, training=True, seed=3, windows=windows, group_by_length=True)
    lengths = windows.features["padding_mask"].sum(axis=1)
    seen, padded, batches = collections.Counter(), 0, 0
    labelled = int((windows.labels != IGNORE_LABEL).sum())
    tokens_per_batch = labelled / -(-len(lengths) // 32)  # the mean of random batches of 32
    for x, y, weight in ds:
        # Each row weighs (labelled tokens of its batch) / tokens_per_batch: every labelled token
        # then counts the same in the epoch's loss, whatever the size of the batch it is in.
        batch_tokens = int((y.numpy() != IGNORE_LABEL).sum())
        np.testing.assert_allclose(weight.numpy(), np.full(len(y), batch_tokens / tokens_per_batch), rtol=1e-6)
        batches += 1
        mask = x["padding_mask"].numpy()
        width, longest = mask.shape[1], mask.sum(axis=1).max()
        assert longest <= width < longest + 8 or width == 64
        np.testing.assert_array_equal(y.numpy() == IGNORE_LABEL, (y.numpy() == IGNORE_LABEL) | (mask == 0))
        assert (y.numpy()[mask == 0] == IGNORE_LABEL).all()
        for row, n in zip(x["token_ids"].numpy(), mask.sum(axis=1), strict=True):
            seen[tuple(row[:n])] += 1
        padded += mask.size
    expected = collections.Counter(tuple(r[:n]) for r, n in zip(windows.features["token_ids"], lengths, strict=True))
    assert seen == expected
    assert batches > -(-len(lengths) // 32)  # grouping adds partial batches
    random_batches = sum(lengths[i : i + 32].max() * len(lengths[i : i + 32]) for i in range(0, len(lengths), 32))
    assert padded < 0.7 * random_batches

    def first_batch():
        return next(
            iter(
                make_tagging_dataset(
                    testa, pre, batch_size=32, training=True, seed=3, windows=windows, group_by_length=True
                )
            )
        )[0]["token_ids"].numpy()

    np.testing.assert_array_equal(first_batch(), first_batch())  # seeded


def test_predict_words_with_keras_model(tokenizer):
    """A Keras model taking the three inputs: predict_words returns one tag per word."""
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in MODEL_INPUTS}
    hidden = keras.layers.Embedding(tokenizer.vocabulary_size(), 8)(inputs["token_ids"])
    model = keras.Model(inputs, keras.layers.Dense(3)(hidden))
    sentences = [["Hello", "there"], ["x"] * 50, ["General", "Kenobi", "!"]]
    pre = TaggingPreprocessor(tokenizer, sequence_length=16)
    tags, logits = predict_words(model, sentences, pre, label_names=["O", "B-X", "I-X"], return_logits=True)
    assert [len(t) for t in tags] == [2, 50, 3] and all(t in ("O", "B-X", "I-X") for s in tags for t in s)
    assert [lg.shape for lg in logits] == [(2, 3), (50, 3), (3, 3)]
    assert [["O", "B-X", "I-X"][i] for i in logits[1].argmax(-1)] == tags[1]
    info_ds = make_tagging_dataset(sentences, pre, batch_size=4)
    assert model.predict(info_ds, verbose=0).shape == (len(make_windows(sentences, pre)), 16, 3)


def test_tf_data_map_and_tf_function(tokenizer):
    pre = TaggingPreprocessor(tokenizer, sequence_length=12, label_names=["O", "B-X", "I-X"], label_all_tokens=True)
    words = [["Johannesburg", "is", "big"], ["a"] * 15, ["Hi"]]
    labels = [[1, 0, 0], [1, 2] * 7 + [0], [0]]
    eager = pre(words, labels)
    eager_windows = pre.windows(words, labels)
    w = tf.ragged.constant(words)
    y = tf.ragged.constant(labels, dtype=tf.int32)
    ds = tf.data.Dataset.from_tensor_slices((w, y)).ragged_batch(3)
    mapped = next(iter(ds.map(lambda a, b: pre(a, b))))
    in_graph = tf.function(lambda a, b: pre(a, b))(w, y)
    windowed = next(iter(ds.map(lambda a, b: pre.windows(a, b)).unbatch().batch(100)))
    per_sentence = list(tf.data.Dataset.from_tensor_slices(w).map(pre))
    for k in eager:
        np.testing.assert_array_equal(mapped[k], eager[k])
        np.testing.assert_array_equal(in_graph[k], eager[k])
        if k != "labels":
            np.testing.assert_array_equal(np.stack([p[k] for p in per_sentence]), eager[k])
    for k in eager_windows:
        np.testing.assert_array_equal(windowed[k], eager_windows[k])
    assert eager_windows["sentence_ids"].numpy().tolist() == [0, 1, 1, 2]
    assert in_graph["token_ids"].shape == (3, 12) and windowed["token_ids"].shape == (4, 12)


def test_get_config_round_trip_and_preset(tokenizer, tmp_path):
    pre = TaggingPreprocessor(tokenizer, sequence_length=24, label_all_tokens=True, label_names=LABELS, stride=5)
    config = pre.get_config()
    clone = TaggingPreprocessor.from_config(config)
    assert clone.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(pre))
    assert isinstance(restored, TaggingPreprocessor) and restored.get_config() == config
    tokenizer.save_assets(str(tmp_path))  # the vocabulary is an asset: a .keras file brings it, here we do
    for other in (clone, restored):
        other.tokenizer.load_assets(str(tmp_path))
    words, labels = [["Peter", "Blackburn"] * 20], [[4, 8] * 20]
    for other in (clone, restored):
        a, b = pre.windows(words, labels), other.windows(words, labels)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    pre.save_to_preset(str(tmp_path))
    loaded = TaggingPreprocessor.from_preset(str(tmp_path))

    # Layer names (also the nested tokenizer's) are auto-numbered per Keras session.
    def unnamed(c):
        return {
            **c,
            "name": None,
            "tokenizer": {**c["tokenizer"], "config": {**c["tokenizer"]["config"], "name": None}},
        }

    assert unnamed(loaded.get_config()) == unnamed(config)
    with pytest.raises(ValueError, match="stride"):
        TaggingPreprocessor(tokenizer, sequence_length=8, stride=7)


def test_merge_windows_ties_and_checks():
    # Two windows of one sentence hold word 0's first piece with equal context: the first wins.
    word_ids = np.array([[-1, 0, 1, 2, -1], [-1, 1, 2, 0, -1]])
    preds = np.array([[0, 10, 11, 12, 0], [0, 21, 22, 23, 0]])
    out = merge_windows(preds, word_ids, np.array([0, 0]), num_words=[3])
    assert out[0].tolist() == [10, 11, 22]
    with pytest.raises(ValueError, match="missing words"):
        merge_windows(preds, word_ids, np.array([0, 0]), num_words=[4])
