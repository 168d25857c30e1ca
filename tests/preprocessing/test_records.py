"""Pretraining TFRecords: the original create_pretraining_data.py / run_pretraining.py format."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.tasks.pretrainer.data import make_masker, pretraining_dataset
from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records, write_pretraining_records
from tests.helpers import minilm_path, shared_data

SEQ, PRED = 64, 10

# run_pretraining.py's `name_to_features`, spelled out here rather than imported
# from our module, so a change on our side cannot silently change the reference.
ORIGINAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


@pytest.fixture(scope="module")
def vocab():
    return os.path.join(minilm_path(), "vocab.txt")


def test_written_records_parse_with_the_original_spec(tmp_path, vocab):
    corpus = shared_data("pretrain_text", "sample_text.txt")
    ds = pretraining_dataset([corpus], vocab, sequence_length=SEQ, max_predictions=PRED, batch_size=8)
    batches = list(ds)
    path = str(tmp_path / "ours.tfrecord")
    n = write_pretraining_records(batches, path)
    assert n == sum(len(x["token_ids"]) for x, _ in batches) > 10
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]
    parsed = [tf.io.parse_single_example(r, ORIGINAL_SPEC) for r in tf.data.TFRecordDataset(path)]
    x0, y0 = batches[0]
    for i in range(3):
        p = parsed[i]
        np.testing.assert_array_equal(p["input_ids"], x0["token_ids"][i])
        np.testing.assert_array_equal(p["input_mask"], x0["padding_mask"][i])
        np.testing.assert_array_equal(p["segment_ids"], x0["segment_ids"][i])
        np.testing.assert_array_equal(p["masked_lm_positions"], x0["mask_positions"][i])
        np.testing.assert_array_equal(p["masked_lm_ids"], y0["mask_ids"][i])
        np.testing.assert_array_equal(p["masked_lm_weights"], y0["mask_weights"][i])
        assert int(p["next_sentence_labels"][0]) == int(y0["next_sentence_labels"][i])
    # And it reads back identically.
    back = list(read_pretraining_records(path, batch_size=8))
    for (xa, ya), (xb, yb) in zip(batches, back, strict=True):
        for k in xa:
            np.testing.assert_array_equal(xa[k], xb[k])
        for k in ya:
            np.testing.assert_array_equal(ya[k], yb[k])


def _create_int_feature(values):
    # As create_pretraining_data.py writes them.
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _create_float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def test_records_from_a_plain_example_writer_train_here(tmp_path):
    rng = np.random.default_rng(0)
    path = str(tmp_path / "original.tfrecord")
    originals = []
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(16):
            n = int(rng.integers(20, SEQ))
            ids = [101] + rng.integers(1000, 1100, n - 2).tolist() + [102] + [0] * (SEQ - n)
            original = list(ids)
            positions = sorted(rng.choice(np.arange(1, n - 1), 5, replace=False).tolist())
            masked_ids = [ids[p] for p in positions]
            for p in positions:
                ids[p] = 103
            features = collections.OrderedDict()
            features["input_ids"] = _create_int_feature(ids)
            features["input_mask"] = _create_int_feature([1] * n + [0] * (SEQ - n))
            features["segment_ids"] = _create_int_feature([0] * SEQ)
            features["masked_lm_positions"] = _create_int_feature(positions + [0] * (PRED - 5))
            features["masked_lm_ids"] = _create_int_feature(masked_ids + [0] * (PRED - 5))
            features["masked_lm_weights"] = _create_float_feature([1.0] * 5 + [0.0] * (PRED - 5))
            features["next_sentence_labels"] = _create_int_feature([int(rng.integers(0, 2))])
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
            originals.append(original)
    ds = read_pretraining_records(path, batch_size=8)
    x, y = next(iter(ds))
    assert x["token_ids"].dtype == tf.int32 and x["token_ids"].shape == (8, SEQ)
    assert x["mask_positions"].shape == (8, PRED) and y["next_sentence_labels"].shape == (8,)
    backbone = BertBackbone(
        vocabulary_size=1200, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=SEQ
    )
    model = BertPretrainer(backbone=backbone)
    model.compile("adam")
    history = model.fit(ds, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and "mlm_accuracy" in history.history

    # Dynamic masking on static records: the originals come back, then new masks.
    vocabulary = ["[PAD]"] + [f"t{i}" for i in range(1, 1200)]
    vocabulary[100], vocabulary[101], vocabulary[102], vocabulary[103] = "[UNK]", "[CLS]", "[SEP]", "[MASK]"
    masker = make_masker(vocabulary, max_predictions=PRED)
    remasked = list(read_pretraining_records(path, batch_size=8, masker=masker, seed=1))
    x, y = remasked[0]
    restored = x["token_ids"].numpy().copy()
    pos, ids, w = x["mask_positions"].numpy(), y["mask_ids"].numpy(), y["mask_weights"].numpy()
    for i in range(8):
        restored[i, pos[i][w[i] > 0]] = ids[i][w[i] > 0]
    np.testing.assert_array_equal(restored, np.array(originals[:8]))


def test_not_a_record_file_is_rejected(tmp_path):
    path = str(tmp_path / "other.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(tf.train.Example().SerializeToString())
    with pytest.raises(ValueError, match="not a BERT pretraining record file"):
        read_pretraining_records(path)
    with pytest.raises(FileNotFoundError, match="no record file"):
        read_pretraining_records(str(tmp_path / "missing-*.tfrecord"))


def test_dynamic_masking_draws_new_masks_each_epoch(tmp_path):
    """Same records, next pass: same original ids, different masks; same seed: same run."""
    rng = np.random.default_rng(1)
    path = _unmasked_records(
        str(tmp_path / "r.tfrecord"), [[101] + rng.integers(1000, 1100, SEQ - 2).tolist() + [102] for _ in range(8)]
    )
    masker = make_masker(_vocabulary(1200), max_predictions=PRED)

    def first_batches(seed):
        ds = read_pretraining_records(path, batch_size=8, masker=masker, seed=seed, repeat=True)
        return [(x["mask_positions"].numpy(), x["token_ids"].numpy()) for x, _ in ds.take(2)]

    (pos1, ids1), (pos2, ids2) = first_batches(0)
    assert not np.array_equal(pos1, pos2)  # epoch 2 masks differ
    again = first_batches(0)
    np.testing.assert_array_equal(again[0][0], pos1)  # reproducible
    np.testing.assert_array_equal(again[1][1], ids2)


def _numbered_records(directory, files, per_file):
    """`files` record files; record r of file f has input_ids starting [101, 1000 + 100 f + r]."""
    return [
        _unmasked_records(
            os.path.join(directory, f"part-{f}.tfrecord"),
            [[101, 1000 + 100 * f + r] + [1050] * (SEQ - 3) + [102] for r in range(per_file)],
        )
        for f in range(files)
    ]


def _unmasked_records(path, rows):
    """Records of `rows` of ids with no mask stored (for dynamic masking)."""
    with tf.io.TFRecordWriter(path) as writer:
        for ids in rows:
            writer.write(
                tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "input_ids": _create_int_feature(ids),
                            "input_mask": _create_int_feature([1] * SEQ),
                            "segment_ids": _create_int_feature([0] * SEQ),
                            "masked_lm_positions": _create_int_feature([0] * PRED),
                            "masked_lm_ids": _create_int_feature([0] * PRED),
                            "masked_lm_weights": _create_float_feature([0.0] * PRED),
                            "next_sentence_labels": _create_int_feature([0]),
                        }
                    )
                ).SerializeToString()
            )
    return path


def _vocabulary(size):
    vocabulary = ["[PAD]"] + [f"t{i}" for i in range(1, size)]
    vocabulary[100], vocabulary[101], vocabulary[102], vocabulary[103] = "[UNK]", "[CLS]", "[SEP]", "[MASK]"
    return vocabulary


def test_input_shards_give_each_worker_its_files_and_together_the_one_process_batches(tmp_path):
    from keras_bert_zoo.tasks.pretrainer.records import worker_files

    paths = _numbered_records(str(tmp_path), files=4, per_file=6)
    common = dict(
        batch_size=8,
        input_shards=4,
        shuffle=True,
        repeat=True,
        seed=3,
        masker=make_masker(_vocabulary(1600), max_predictions=PRED),
    )

    def take(ds, n=5):  # five batches: more than one pass over each 6-record file
        return [(x, y) for x, y in ds.take(n)]

    one = take(read_pretraining_records(paths, **common))
    parts = [take(read_pretraining_records(paths, num_workers=2, worker_index=w, **common)) for w in range(2)]
    for (x, y), (x0, y0), (x1, y1) in zip(one, *parts, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], np.concatenate([x0[k], x1[k]]))
        for k in y:
            np.testing.assert_array_equal(y[k], np.concatenate([y0[k], y1[k]]))
    # A worker's rows come from its files only: worker 0 reads shards 0, 1 = files 0, 1.
    assert worker_files(paths, 8, 4, 2, 0) == paths[:2] and worker_files(paths, 8, 4, 2, 1) == paths[2:]
    # Each batch holds 2 rows of every file, in file order (ids with the masks undone).
    files_of_rows = [int(v - 1000) // 100 for v in restore_ids(one[0])[:, 1]]
    assert files_of_rows == [0, 0, 1, 1, 2, 2, 3, 3]
    # The shuffle is per shard: different seeds, different order within a shard.
    other = take(read_pretraining_records(paths, **{**common, "seed": 4}), 1)
    assert not np.array_equal(restore_ids(other[0]), restore_ids(one[0]))


def restore_ids(batch):
    from keras_bert_zoo.tasks.pretrainer.records import restore_masked_ids

    x, y = batch
    return restore_masked_ids(x["token_ids"], x["mask_positions"], y["mask_ids"], y["mask_weights"]).numpy()


def test_input_shards_that_cannot_split_evenly_are_refused(tmp_path):
    from keras_bert_zoo.errors import UsageError

    paths = _numbered_records(str(tmp_path), files=3, per_file=2)
    with pytest.raises(UsageError, match="at least 4 record files"):
        read_pretraining_records(paths, batch_size=8, input_shards=4)
    with pytest.raises(UsageError, match="multiple of --input-shards 3"):
        read_pretraining_records(paths, batch_size=8, input_shards=3)
    with pytest.raises(UsageError, match="multiple of the 2 workers"):
        read_pretraining_records(paths, batch_size=9, input_shards=3, num_workers=2)


def test_sharded_reader_iterator_resumes_where_it_was_saved(tmp_path):
    """`pretrain` saves the `tf.data` iterator of a one-process records run (`position="iterator"`):
    with input shards it is a zip of shuffled streams, and a restored iterator must go on with
    the very next batch."""
    paths = _numbered_records(str(tmp_path), files=2, per_file=10)
    ds = read_pretraining_records(
        paths,
        batch_size=4,
        input_shards=2,
        shuffle=True,
        repeat=True,
        seed=1,
        masker=make_masker(_vocabulary(1600), max_predictions=PRED),
    )
    iterator = iter(ds)
    for _ in range(3):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    expected = [next(iterator) for _ in range(4)]  # runs past the first pass over each file
    checkpoint.restore(saved)
    for (x, y), (ex, ey) in zip([next(iterator) for _ in range(4)], expected, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], ex[k])
        for k in y:
            np.testing.assert_array_equal(y[k], ey[k])
