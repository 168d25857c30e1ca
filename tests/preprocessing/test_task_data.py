import csv
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing import bucketing
from keras_bert_zoo.tasks.classifier.data import DataLayout, make_dataset, read_examples
from tests.helpers import shared_data


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("task, count, pair", [("sst2", 872, False), ("mrpc", 408, True), ("rte", 277, True)])
def test_real_glue_dev_files_match_csv_module_reference(task, count, pair):
    """Our reader agrees with a plain pandas-free read of the same GLUE file."""
    path = shared_data(task, "dev.tsv")
    ex = read_examples(path, DataLayout.for_task(task))
    assert len(ex) == count and len(ex.texts) == (2 if pair else 1)
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    header, rows = rows[0], rows[1:]
    fmt = DataLayout.for_task(task)
    text_idx = [header.index(c) for c in fmt.text_columns]
    label_idx = header.index(fmt.label_column)
    assert ex.texts[0] == [r[text_idx[0]] for r in rows]
    assert [ex.label_names[i] for i in ex.labels] == [r[label_idx] for r in rows]
    if task == "sst2":
        assert int(ex.labels.sum()) == 444  # README: 444 positive / 428 negative
    if task == "mrpc":
        assert any('"' in t for t in ex.texts[1])  # bare quotes are text, not CSV quoting


def test_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "d.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "topic"])
        w.writerows([[1, 'a, quoted "thing"', "sports"], [2, "b", "news"], [3, "c", "sports"]])
    ex = read_examples(str(csv_path), DataLayout(("text",), "topic"))
    assert ex.texts == (['a, quoted "thing"', "b", "c"],)
    assert ex.label_names == ["news", "sports"] and ex.labels.tolist() == [1, 0, 1]
    jl = _write(
        tmp_path / "d.jsonl",
        "\n".join(
            json.dumps(o)
            for o in [
                {"q": "x", "p": "y", "score": 2.5, "tags": ["a", "b"]},
                {"q": "z", "p": "w", "score": 1.0, "tags": ["b"]},
            ]
        ),
    )
    reg = read_examples(jl, DataLayout(("q", "p"), "score", problem_type="regression"))
    assert reg.texts == (["x", "z"], ["y", "w"]) and reg.labels.tolist() == [2.5, 1.0]
    ml = read_examples(jl, DataLayout(("q",), "tags", problem_type="multi_label"))
    assert ml.label_names == ["a", "b"] and ml.labels.tolist() == [[1, 1], [0, 1]]


def test_numeric_labels_sort_numerically(tmp_path):
    path = _write(tmp_path / "d.tsv", "sentence\tlabel\na\t10\nb\t2\nc\t1\n")
    ex = read_examples(path, DataLayout(("sentence",), "label"))
    assert ex.label_names == ["1", "2", "10"] and ex.labels.tolist() == [2, 1, 0]


def test_bad_input_messages(tmp_path):
    fmt = DataLayout.for_task("sst2")
    with pytest.raises(ValueError, match="no examples"):
        read_examples(_write(tmp_path / "empty.tsv", ""), fmt)
    with pytest.raises(ValueError, match="no examples"):
        read_examples(_write(tmp_path / "header.tsv", "sentence\tlabel\n"), fmt)
    with pytest.raises(ValueError, match="no column 'label'.*--label-column"):
        read_examples(_write(tmp_path / "nolabel.tsv", "sentence\tstars\nok\t1\n"), fmt)
    with pytest.raises(ValueError, match=r"bad.tsv:3: unknown label '2'"):
        read_examples(_write(tmp_path / "bad.tsv", "sentence\tlabel\nok\t1\nhm\t2\n"), fmt)
    with pytest.raises(ValueError, match="unknown task 'sst3'"):
        DataLayout.for_task("sst3")
    with pytest.raises(FileNotFoundError):
        read_examples(str(tmp_path / "absent.tsv"), fmt)
    with pytest.raises(ValueError, match="short.tsv:2: 1 columns"):
        read_examples(_write(tmp_path / "short.tsv", "sentence\tlabel\nonly text\n"), fmt)


class _FakePreprocessor:
    """Stand-in with the preprocessor's contract: strings -> padded int features.

    Each word becomes one id, so lengths are known exactly."""

    sequence_length = 64

    def __call__(self, x):
        words = tf.strings.split(x)
        ids = tf.strings.to_hash_bucket_fast(words, 1000) + 1
        ids = ids[:, : self.sequence_length - 2]
        cls = tf.fill([ids.nrows(), 1], tf.constant(101, tf.int64))
        sep = tf.fill([ids.nrows(), 1], tf.constant(102, tf.int64))
        ids = tf.concat([cls, ids, sep], axis=1)
        token_ids = tf.cast(ids.to_tensor(shape=[None, self.sequence_length]), tf.int32)
        mask = tf.cast(token_ids != 0, tf.int32)
        return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": mask}


def _examples(n=300, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, n)
    texts = [" ".join(f"w{rng.integers(50)}" for _ in range(k)) for k in lengths]
    from keras_bert_zoo.tasks.classifier.data import Examples

    return Examples(texts=(texts,), labels=np.arange(n, dtype=np.int32), label_names=None), lengths + 2


def test_bucketed_training_batches_keep_every_example_once():
    ex, lengths = _examples()
    ds = make_dataset(ex, _FakePreprocessor(), batch_size=16, shuffle=True, seed=3)
    seen = []
    widths = set()
    for x, y in ds:
        width = x["token_ids"].shape[1]
        widths.add(width)
        assert width in bucketing.default_boundaries(64)
        real = x["padding_mask"].numpy().sum(axis=1)
        # each example sits in the smallest bucket that holds it
        smallest = [min(b for b in bucketing.default_boundaries(64) if b >= n) for n in real]
        assert all(s == width for s in smallest)
        np.testing.assert_array_equal(real, lengths[y.numpy()])
        seen += y.numpy().tolist()
    assert sorted(seen) == list(range(len(lengths)))
    assert len(widths) > 1
    # Same seed, same first-epoch order; the order changes between epochs.
    first = [y.numpy().tolist() for _, y in make_dataset(ex, _FakePreprocessor(), 16, shuffle=True, seed=3)]
    again = [y.numpy().tolist() for _, y in make_dataset(ex, _FakePreprocessor(), 16, shuffle=True, seed=3)]
    assert first == again


def test_evaluation_batches_keep_order_and_match_full_padding():
    ex, lengths = _examples(seed=1)
    pre = _FakePreprocessor()
    bucketed = list(make_dataset(ex, pre, batch_size=32))
    padded = list(make_dataset(ex, pre, batch_size=32, batching="fixed"))
    assert np.concatenate([y for _, y in bucketed]).tolist() == list(range(len(lengths)))
    for (xb, _), (xp, _) in zip(bucketed, padded, strict=True):
        w = xb["token_ids"].shape[1]
        assert xp["token_ids"].shape[1] == 64 and w <= 64
        np.testing.assert_array_equal(xb["token_ids"], xp["token_ids"][:, :w])
        assert not xp["padding_mask"][:, w:].numpy().any()  # nothing real was cut
