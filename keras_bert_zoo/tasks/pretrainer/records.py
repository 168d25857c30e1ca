"""Pretraining TFRecords in the original BERT feature format.

google-research/bert's `create_pretraining_data.py` writes, per instance, a
`tf.train.Example` with int64 features `input_ids`, `input_mask`, `segment_ids`
(`[max_seq_length]`), `masked_lm_positions`, `masked_lm_ids` (`[max_predictions]`),
`next_sentence_labels` (`[1]`) and float `masked_lm_weights` (`[max_predictions]`);
`run_pretraining.py` parses them with `FixedLenFeature`s of those shapes. We write
and read exactly that, so data made there trains here and ours trains there.
"""

import os

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import InvalidInputError, UsageError

__all__ = [
    "feature_spec",
    "example_from_arrays",
    "write_pretraining_records",
    "read_pretraining_records",
    "worker_files",
    "restore_masked_ids",
]


def feature_spec(sequence_length, max_predictions):
    """The original `run_pretraining.py` `name_to_features`."""
    int_seq = tf.io.FixedLenFeature([sequence_length], tf.int64)
    int_pred = tf.io.FixedLenFeature([max_predictions], tf.int64)
    return {
        "input_ids": int_seq,
        "input_mask": int_seq,
        "segment_ids": int_seq,
        "masked_lm_positions": int_pred,
        "masked_lm_ids": int_pred,
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def example_from_arrays(
    token_ids, segment_ids, padding_mask, mask_positions, mask_ids, mask_weights, next_sentence_label=0
):
    """One `tf.train.Example` in the original format (arrays of one instance)."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "input_ids": _int_feature(token_ids),
                "input_mask": _int_feature(padding_mask),
                "segment_ids": _int_feature(segment_ids),
                "masked_lm_positions": _int_feature(mask_positions),
                "masked_lm_ids": _int_feature(mask_ids),
                "masked_lm_weights": _float_feature(mask_weights),
                "next_sentence_labels": _int_feature([next_sentence_label]),
            }
        )
    )


def write_pretraining_records(dataset, path, max_examples=None):
    """Writes `(x, y)` batches (e.g. from `pretraining_dataset`) as original-format records.

    Masks are written as drawn (static masking, as the original; run the writer
    several times with other seeds for its `dupe_factor`). The file appears
    atomically (written to a temporary name, then renamed).

    Args:
        dataset: `tf.data.Dataset` of `(x, y)` batches as `BertPretrainer.fit` takes.
        path: output `.tfrecord` path.
        max_examples: optional cap on the number of examples.

    Returns:
        int, examples written.
    """
    from keras_bert_zoo.files import output_file

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    count = 0
    with output_file(path, overwrite=True) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for x, y in dataset:
            x = {k: v.numpy() for k, v in x.items()}
            y = {k: v.numpy() for k, v in y.items()}
            labels = y.get("next_sentence_labels", np.zeros(len(x["token_ids"]), np.int64))
            for i in range(len(x["token_ids"])):
                if max_examples is not None and count >= max_examples:
                    break
                example = example_from_arrays(
                    x["token_ids"][i],
                    x["segment_ids"][i],
                    x["padding_mask"][i],
                    x["mask_positions"][i],
                    y["mask_ids"][i],
                    y["mask_weights"][i],
                    labels[i],
                )
                writer.write(example.SerializeToString())
                count += 1
    return count


def _infer_shapes(path):
    """(sequence_length, max_predictions) from the first record of a file."""
    for raw in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(raw.numpy())
        feature = example.features.feature
        missing = [k for k in feature_spec(1, 1) if k not in feature]
        if missing:
            raise InvalidInputError(
                f"{path} is not a BERT pretraining record file: its examples lack {missing} "
                "(expected the features written by create_pretraining_data.py)."
            )
        return len(feature["input_ids"].int64_list.value), len(feature["masked_lm_ids"].int64_list.value)
    raise InvalidInputError(
        f"{path} holds no records; write them with keras_bert_zoo.tasks.pretrainer.records.write_pretraining_records."
    )


def read_pretraining_records(
    paths,
    batch_size=32,
    sequence_length=None,
    max_predictions=None,
    use_nsp=True,
    masker=None,
    seed=0,
    shuffle=False,
    repeat=False,
    drop_remainder=False,
    input_shards=1,
    num_workers=1,
    worker_index=0,
):
    """A dataset of `(x, y)` batches for `BertPretrainer.fit` from original-format records.

    Args:
        paths: a path or list of paths (glob patterns allowed).
        batch_size: int.
        sequence_length, max_predictions: inferred from the first record when None.
        use_nsp: False drops `next_sentence_labels` (MLM-only training).
        masker: optional `MaskedLMMasker`; when given, the stored masks are undone
            (the original ids are put back from `masked_lm_ids`) and new masks are
            drawn for every batch (dynamic masking on static data).
        seed: int, seed of the dynamic masks and the shuffle.
        shuffle, repeat, drop_remainder: the usual `tf.data` options.
        input_shards: read the files as this many shards (file `i` in shard
            `i % input_shards`), each its own shuffled stream; every batch takes
            `batch_size / input_shards` rows from each shard, in shard order. So the
            batches depend on `input_shards`, not on how many processes read them.
        num_workers, worker_index: with `input_shards > 1`, this worker reads only its
            `input_shards / num_workers` shards (their files alone) and returns its
            rows of each batch; the workers' rows together are the one-process batch.

    Examples:
    >>> import os, tempfile, keras
    >>> from keras_bert_zoo import BertBackbone, BertPretrainer
    >>> from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset
    >>> from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records, write_pretraining_records
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "ran", "."]
    >>> folder = tempfile.mkdtemp()
    >>> corpus, records = os.path.join(folder, "corpus.txt"), os.path.join(folder, "corpus.tfrecord")
    >>> _ = open(corpus, "w").write("the cat sat .\\nthe dog ran .\\n\\nthe dog sat .\\nthe cat ran .\\n")
    >>> write_pretraining_records(pretraining_dataset(corpus, vocab, sequence_length=16, max_predictions=3,
    ...                                               batch_size=2), records)
    3
    >>> ds = read_pretraining_records(records, batch_size=2, repeat=True)  # lengths read from the file
    >>> x, y = next(iter(ds))
    >>> tuple(x["token_ids"].shape), tuple(x["mask_positions"].shape), sorted(y)
    ((2, 16), (2, 3), ['mask_ids', 'mask_weights', 'next_sentence_labels'])
    >>> keras.utils.set_random_seed(0)
    >>> model = BertPretrainer(BertBackbone(vocabulary_size=len(vocab), num_layers=1, num_heads=2, hidden_dim=8,
    ...                                     intermediate_dim=16, max_sequence_length=16))
    >>> model.compile()
    >>> sorted(model.fit(ds, steps_per_epoch=1, verbose=0).history)
    ['loss', 'mlm_accuracy', 'mlm_loss', 'nsp_accuracy', 'nsp_loss']
    """
    files = _record_files(paths)
    if sequence_length is None or max_predictions is None:
        seq, pred = _infer_shapes(files[0])
        sequence_length = sequence_length or seq
        max_predictions = max_predictions or pred
    spec = feature_spec(sequence_length, max_predictions)
    mine = _my_shards(files, batch_size, input_shards, num_workers, worker_index)
    rows = batch_size // input_shards

    def shard_stream(shard):
        ds = tf.data.TFRecordDataset(files[shard::input_shards])
        if shuffle:
            ds = ds.shuffle(10_000, seed=seed + shard)
        if repeat:
            ds = ds.repeat()
        return ds.batch(rows, drop_remainder=drop_remainder or input_shards > 1).enumerate()

    def parse(index, raw, shard=0):
        f = tf.io.parse_example(raw, spec)
        # The model takes int32 ids (the original casts int64 to int32 as well: TPUs).
        f = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in f.items()}
        x = {
            "token_ids": f["input_ids"],
            "segment_ids": f["segment_ids"],
            "padding_mask": f["input_mask"],
            "mask_positions": f["masked_lm_positions"],
        }
        y = {"mask_ids": f["masked_lm_ids"], "mask_weights": f["masked_lm_weights"]}
        if masker is not None:
            original = restore_masked_ids(x["token_ids"], x["mask_positions"], y["mask_ids"], y["mask_weights"])
            # Per batch and shard: the masks of a row do not depend on who reads it.
            masked = masker(original, seed=tf.stack([tf.constant(seed, tf.int64), index * input_shards + shard]))
            x["token_ids"], x["mask_positions"] = masked["token_ids"], masked["mask_positions"]
            y = {"mask_ids": masked["mask_ids"], "mask_weights": masked["mask_weights"]}
        if use_nsp:
            y["next_sentence_labels"] = f["next_sentence_labels"][:, 0]
        return x, y

    if len(mine) == 1:
        ds = shard_stream(mine[0]).map(lambda i, raw: parse(i, raw, mine[0]), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        parsed = tuple(
            shard_stream(k).map(lambda i, raw, k=k: parse(i, raw, k), num_parallel_calls=tf.data.AUTOTUNE) for k in mine
        )
        ds = tf.data.Dataset.zip(parsed).map(
            lambda *parts: tf.nest.map_structure(lambda *t: tf.concat(t, axis=0), *parts)
        )
    return ds.prefetch(tf.data.AUTOTUNE)


def _record_files(paths):
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for p in paths:
        matched = tf.io.gfile.glob(os.fspath(p))
        if not matched:
            raise FileNotFoundError(f"no record file matches {os.fspath(p)!r}.")
        files += sorted(matched)
    return files


def worker_files(paths, batch_size, input_shards=1, num_workers=1, worker_index=0):
    """The record files worker `worker_index` reads (see `read_pretraining_records`)."""
    files = _record_files(paths)
    shards = _my_shards(files, batch_size, input_shards, num_workers, worker_index)
    return [f for k in shards for f in files[k::input_shards]]


def _my_shards(files, batch_size, input_shards, num_workers, worker_index):
    """The shard indices this worker reads; checks that the split is even."""
    if not isinstance(input_shards, int) or input_shards < 1:
        raise UsageError(f"--input-shards {input_shards!r} must be a positive integer.")
    if input_shards == 1:
        return [0]  # one stream; a multi-worker run slices rows from it (training.loop.worker_rows)
    if len(files) < input_shards:
        raise UsageError(
            f"--input-shards {input_shards} needs at least {input_shards} record files; "
            f"there are {len(files)}. Write the records into more files or lower --input-shards."
        )
    if batch_size % input_shards:
        raise UsageError(
            f"the global batch {batch_size} must be a multiple of --input-shards {input_shards} "
            "(each batch takes the same number of rows from every shard)."
        )
    if input_shards % num_workers:
        raise UsageError(
            f"--input-shards {input_shards} must be a multiple of the {num_workers} workers "
            "(each worker reads the same number of shards)."
        )
    per_worker = input_shards // num_workers
    return list(range(worker_index * per_worker, (worker_index + 1) * per_worker))


def restore_masked_ids(token_ids, mask_positions, mask_ids, mask_weights):
    """Puts the original ids back at the masked positions (undoes a static mask)."""
    batch = tf.shape(token_ids)[0]
    preds = tf.shape(mask_positions)[1]
    rows = tf.repeat(tf.range(batch)[:, None], preds, axis=1)
    index = tf.stack([rows, tf.cast(mask_positions, tf.int32)], axis=-1)
    real = mask_weights > 0
    return tf.tensor_scatter_nd_update(
        token_ids, tf.boolean_mask(index, real), tf.boolean_mask(tf.cast(mask_ids, token_ids.dtype), real)
    )
