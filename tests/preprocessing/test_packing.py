"""Packed training batches: every window once, in the batch it was drawn in, and a tagger
computes on it exactly what it computes on the padded batch (loss, gradients, logits)."""

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertTagger
from keras_bert_zoo.models.layers.encoder_block import attention_layout
from keras_bert_zoo.preprocessing.packing import first_fit_decreasing, pack_batch
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
from keras_bert_zoo.tasks.tagger.alignment import IGNORE_LABEL, MODEL_INPUTS
from keras_bert_zoo.tasks.tagger.data import read_tagged
from keras_bert_zoo.tasks.tagger.dataset import make_tagging_dataset
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.windows import make_windows
from tests.helpers import minilm_path, shared_data


@pytest.fixture(scope="module")
def windows():
    testa = read_tagged(shared_data("conll2003", "eng.testa"))
    pre = TaggingPreprocessor(
        BertTokenizer.from_preset(minilm_path()), sequence_length=64, label_names=testa.label_names
    )
    return pre, make_windows(testa, pre)


def _sequences(features, labels):
    """`{number: (tokens, labels)}` of each sequence in packed (or padded) rows."""
    ids = features["padding_mask"].numpy()
    tokens, labels = features["token_ids"].numpy(), labels.numpy()
    found = {}
    for row in range(len(ids)):
        for number in np.unique(ids[row][ids[row] > 0]):
            at = np.flatnonzero(ids[row] == number)
            assert (np.diff(at) == 1).all(), "a packed sequence must be contiguous"
            assert number not in found, "a sequence number appears in one row only"
            found[int(number)] = (tuple(tokens[row, at]), tuple(labels[row, at]))
    return found


def test_an_epoch_of_packed_batches_holds_the_padded_batches_windows(windows):
    """Same seed, same batches: each packed batch holds exactly the windows (with their
    labels) of the padded batch drawn at the same step, in rows of at most 64 positions,
    every row but one more than half full (first fit), about 0.4x the positions."""
    pre, w = windows
    kwargs = dict(batch_size=32, training=True, seed=7, windows=w)
    packed = list(make_tagging_dataset(None, pre, pack_width=64, **kwargs))
    padded = list(make_tagging_dataset(None, pre, bucket=True, **kwargs))
    assert len(packed) == len(padded) == -(-len(w) // 32)
    positions = {"packed": 0, "padded": 0}
    everything = collections.Counter()
    for (x, y), (px, py) in zip(packed, padded, strict=True):
        assert set(x) == set(MODEL_INPUTS) and x["token_ids"].shape[1] == 64  # windows here are <= 64
        ours = _sequences(x, y)
        mask = px["padding_mask"].numpy()
        theirs = [
            (tuple(t[m > 0]), tuple(lab[m > 0]))
            for t, lab, m in zip(px["token_ids"].numpy(), py.numpy(), mask, strict=True)
        ]
        assert collections.Counter(ours.values()) == collections.Counter(theirs)
        assert all(t[0] == pre.tokenizer.cls_token_id and t[-1] == pre.tokenizer.sep_token_id for t, _ in theirs)
        fill = (x["padding_mask"].numpy() > 0).sum(axis=1)
        assert (fill > 32).sum() >= len(fill) - 1
        assert (y.numpy()[x["padding_mask"].numpy() == 0] == IGNORE_LABEL).all()
        assert not x["token_ids"].numpy()[x["padding_mask"].numpy() == 0].any()
        positions["packed"] += x["token_ids"].numpy().size
        positions["padded"] += mask.size
        everything.update(ours.values())
    expected = collections.Counter(
        (tuple(t[m > 0]), tuple(lab[m > 0]))
        for t, lab, m in zip(w.features["token_ids"], w.labels, w.features["padding_mask"], strict=True)
    )
    assert everything == expected
    assert positions["packed"] < 0.5 * positions["padded"], positions


def test_first_fit_decreasing_and_wide_sequences():
    rows, offsets = first_fit_decreasing(tf.constant([3, 5, 2, 4, 1]), 6)
    # 5 -> row 0; 4 -> row 1; 3 -> row 2; 2 -> row 1 (4 + 2); 1 -> row 0 (5 + 1)
    assert rows.numpy().tolist() == [2, 0, 1, 1, 0] and offsets.numpy().tolist() == [0, 0, 4, 0, 5]
    features = {
        "token_ids": tf.constant([[2, 9, 9, 9, 3], [2, 3, 0, 0, 0]]),
        "segment_ids": tf.zeros((2, 5), tf.int32),
        "padding_mask": tf.constant([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]),
    }
    packed, labels = pack_batch(features, width=3)  # a row is never narrower than the longest sequence
    assert labels is None
    assert packed["token_ids"].numpy().tolist() == [[2, 9, 9, 9, 3], [2, 3, 0, 0, 0]]
    assert packed["padding_mask"].numpy().tolist() == [[1, 1, 1, 1, 1], [2, 2, 0, 0, 0]]


def test_attention_layout_of_plain_and_packed_rows():
    """A 0/1 mask gives the original BERT bias (0 on real keys, -10000 on padding, for
    every query) and positions 0, 1, 2, ...; packed sequences see only themselves and
    count their positions from 0."""
    bias, positions = attention_layout(np.array([[1, 1, 1, 0], [1, 1, 2, 2]]))
    bias, positions = np.asarray(bias)[:, 0], np.asarray(positions)
    original = np.broadcast_to((1.0 - np.array([1, 1, 1, 0.0]))[None, :] * -10000.0, (4, 4))
    np.testing.assert_array_equal(bias[0], original)
    assert positions.tolist() == [[0, 1, 2, 3], [0, 1, 0, 1]]
    allowed = bias[1] == 0
    assert allowed.tolist() == [
        [True, True, False, False],
        [True, True, False, False],
        [False, False, True, True],
        [False, False, True, True],
    ]
    assert set(np.unique(bias)) == {0.0, -10000.0}


def test_packed_batch_trains_the_tagger_like_the_padded_batch(windows):
    """Dropout off, same weights: on the first packed batch and the same windows padded,
    every window's logits agree, and so do the loss and every gradient."""
    pre, w = windows
    kwargs = dict(batch_size=32, training=True, seed=3, windows=w)
    x, y = next(iter(make_tagging_dataset(None, pre, pack_width=64, **kwargs)))
    px, py = next(iter(make_tagging_dataset(None, pre, bucket=True, **kwargs)))
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=64,
        dropout=0.0,
    )
    model = BertTagger(backbone, num_labels=len(pre.label_names), dropout=0.0)

    def loss_and_grads(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            loss = model.compute_loss(y=labels, y_pred=logits)
        return logits, float(loss), tape.gradient(loss, model.trainable_variables)

    logits, loss, grads = loss_and_grads(x, y)
    plogits, ploss, pgrads = loss_and_grads(px, py)
    logits, plogits = np.asarray(logits), np.asarray(plogits)
    assert loss == pytest.approx(ploss, rel=1e-6)
    for g, pg, v in zip(grads, pgrads, model.trainable_variables, strict=True):
        g, pg = tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(pg).numpy()
        np.testing.assert_allclose(g, pg, atol=1e-6 * max(1.0, np.abs(pg).max()), err_msg=v.path)
    # Logits of each window: find it in the padded batch by its tokens.
    by_tokens = {}
    mask = px["padding_mask"].numpy()
    for row in range(len(mask)):
        by_tokens.setdefault(tuple(px["token_ids"].numpy()[row, mask[row] > 0]), []).append(plogits[row, mask[row] > 0])
    ids = x["padding_mask"].numpy()
    for row in range(len(ids)):
        for number in np.unique(ids[row][ids[row] > 0]):
            at = ids[row] == number
            candidates = by_tokens[tuple(x["token_ids"].numpy()[row, at])]
            assert min(np.abs(np.asarray(logits[row][at]) - c).max() for c in candidates) < 1e-5


def test_packed_qa_batch_trains_the_span_head_like_the_padded_batch():
    """Real SQuAD windows: each packed window carries exactly one start and one end
    target, inside itself; with dropout off, the packed span loss and its gradients
    equal the padded batch's with each window's softmax taken over its own positions
    (the padded loss also spreads probability over the padding, whose amount depends
    on the batch), and the start/end accuracies are 1 for logits peaked at the targets."""
    from keras_bert_zoo import BertSpanQA
    from keras_bert_zoo.tasks.span_qa.data import read_squad
    from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_dataset, make_qa_windows

    examples = read_squad(shared_data("squad", "dev.json"), max_examples=40)
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=128, doc_stride=32, stride_mode="overlap")
    windows = make_qa_windows(pre, examples.questions, examples.contexts, examples.answer_starts, examples.answer_ends)
    x, y = next(iter(make_qa_dataset(windows, batch_size=16, training=True, seed=2, pack=True)))
    px, py = next(iter(make_qa_dataset(windows, batch_size=16, training=True, seed=2)))
    ids = x["padding_mask"].numpy()
    assert len(ids) < 16 and ids.max() == 16  # 16 windows in fewer rows
    for key in ("start_positions", "end_positions"):
        targets = y[key].numpy()
        for number in range(1, 17):
            assert targets[ids == number].sum() == 1, (key, number)  # one target, inside its window
        assert targets.sum() == 16
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=128,
        dropout=0.0,
    )
    model = BertSpanQA(backbone)

    def unpadded_loss(features, labels, out):  # the reference: written out here, per padded row
        real = features["padding_mask"] > 0
        total = 0.0
        for key in ("start", "end"):
            logits = tf.where(real, out[f"{key}_logits"], -np.inf)
            total += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels[f"{key}_positions"], logits))
        return total / 2

    def loss_and_grads(features, labels, loss_fn):
        with tf.GradientTape() as tape:
            out = model(features, training=True)
            loss = loss_fn(features, labels, out)
        return float(loss), tape.gradient(loss, model.trainable_variables)

    loss, grads = loss_and_grads(x, y, lambda f, lab, out: model.compute_loss(x=f, y=lab, y_pred=out))
    ploss, pgrads = loss_and_grads(px, py, unpadded_loss)
    padded_loss, _ = loss_and_grads(px, py, lambda f, lab, out: model.compute_loss(x=f, y=lab, y_pred=out))
    assert padded_loss > ploss  # the padding's share of the softmax
    assert loss == pytest.approx(ploss, rel=1e-6)
    for g, pg, v in zip(grads, pgrads, model.trainable_variables, strict=True):
        g, pg = tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(pg).numpy()
        np.testing.assert_allclose(g, pg, atol=1e-6 * max(1.0, np.abs(pg).max()), err_msg=v.path)
    # Accuracy: a model that knows the answers (targets' logits pushed up) scores 1 both ways.
    for features, labels in ((x, y), (px, py)):
        if len(labels["start_positions"].shape) == 2:
            logits = {k.replace("positions", "logits"): tf.cast(v, tf.float32) * 50.0 for k, v in labels.items()}
        else:
            width = features["token_ids"].shape[1]
            logits = {k.replace("positions", "logits"): tf.one_hot(v, width) * 50.0 for k, v in labels.items()}
        model.start_accuracy_tracker.reset_state()
        model.end_accuracy_tracker.reset_state()
        metrics = model.compute_metrics(features, labels, logits)
        assert metrics["start_accuracy"] == 1.0 and metrics["end_accuracy"] == 1.0


def test_empty_sequences_and_an_empty_batch():
    """A window with no real token takes no room and gets no number; an empty batch packs to no rows."""
    features = {
        "token_ids": tf.constant([[2, 3, 0], [0, 0, 0], [2, 5, 3]]),
        "padding_mask": tf.constant([[1, 1, 0], [0, 0, 0], [1, 1, 1]]),
    }
    labels = tf.constant([[-100, 1, -100], [-100, -100, -100], [-100, 2, -100]])
    packed, packed_labels = pack_batch(features, labels, width=4)
    assert packed["token_ids"].numpy().tolist() == [[2, 5, 3, 0], [2, 3, 0, 0]]
    assert packed["padding_mask"].numpy().tolist() == [[3, 3, 3, 0], [1, 1, 0, 0]]
    assert packed_labels.numpy().tolist() == [[-100, 2, -100, -100], [-100, 1, -100, -100]]
    empty = {k: tf.zeros([0, 3], tf.int32) for k in ("token_ids", "padding_mask")}
    packed, _ = pack_batch(empty, width=4)
    assert packed["token_ids"].shape == (0, 4)
