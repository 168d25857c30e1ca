"""Sentence(-pair) classification data: GLUE TSV, CSV and JSON Lines -> `tf.data`.

A `DataLayout` says where the text and the label are in a file (a GLUE task name
fills it in). `read_examples` parses and validates a whole file up front, so a
missing column, an empty file or a label the model does not know fails with a clear
message before any training starts. `make_dataset` turns the examples into a
`tf.data` pipeline: tokenization runs in TF ops (the preprocessor), batches are
bucketed by length (see `bucketing.py`).

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.tasks.classifier.data import DataLayout, read_examples
>>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
>>> _ = open(path, "w").write("sentence\\tlabel\\ngood film\\t1\\nbad film\\t0\\n")
>>> examples = read_examples(path, DataLayout.for_task("sst2"))
>>> examples.texts, examples.labels.tolist(), examples.label_names
((['good film', 'bad film'],), [1, 0], ['0', '1'])
"""

import csv
import dataclasses
import io
import json
import os
import sys

import numpy as np

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.files import read_text_file

__all__ = ["DataLayout", "Examples", "read_examples", "make_dataset"]

# GLUE layouts: text columns, label column, label names (None = regression), header.
# Column names are the files' own headers; CoLA has no header, so it uses indices.
_GLUE_TASKS = {
    "cola": dict(
        text_columns=(3,),
        label_column=1,
        label_names=("0", "1"),
        header=False,
        display_names=("unacceptable", "acceptable"),
    ),
    "sst2": dict(
        text_columns=("sentence",), label_column="label", label_names=("0", "1"), display_names=("negative", "positive")
    ),
    "mrpc": dict(
        text_columns=("#1 String", "#2 String"),
        label_column="Quality",
        label_names=("0", "1"),
        display_names=("not_equivalent", "equivalent"),
    ),
    "qqp": dict(
        text_columns=("question1", "question2"),
        label_column="is_duplicate",
        label_names=("0", "1"),
        display_names=("not_duplicate", "duplicate"),
    ),
    # The original STS Benchmark release (sts-train.csv, sts-dev.csv): tab-separated despite
    # the name, no header, fields genre file year id score sentence1 sentence2 (+2 on some
    # 2016 rows), unbalanced quotes (quoting off). GLUE's STS-B TSV (with a header) is stsb_glue.
    "stsb": dict(
        text_columns=(5, 6), label_column=4, label_names=None, problem_type="regression", header=False, delimiter="\t"
    ),
    "stsb_glue": dict(
        text_columns=("sentence1", "sentence2"), label_column="score", label_names=None, problem_type="regression"
    ),
    "mnli": dict(
        text_columns=("sentence1", "sentence2"),
        label_column="gold_label",
        label_names=("contradiction", "entailment", "neutral"),
    ),
    "qnli": dict(
        text_columns=("question", "sentence"), label_column="label", label_names=("entailment", "not_entailment")
    ),
    "rte": dict(
        text_columns=("sentence1", "sentence2"), label_column="label", label_names=("entailment", "not_entailment")
    ),
    "wnli": dict(
        text_columns=("sentence1", "sentence2"),
        label_column="label",
        label_names=("0", "1"),
        display_names=("not_entailment", "entailment"),
    ),
}
_GLUE_TASKS["sst-2"] = _GLUE_TASKS["sst2"]
_GLUE_TASKS["sts-b"] = _GLUE_TASKS["stsb"]


@dataclasses.dataclass
class DataLayout:
    """Where text and labels are in a data file.

    Args:
        text_columns: one column (single sentences) or two (pairs), by header
            name or 0-based index.
        label_column: the label's column name or index.
        label_names: the classes, in id order; None infers them from the training
            file (sorted). Ignored for regression.
        problem_type: `"single_label"`, `"multi_label"` (label cell holds a JSON list
            or `|`-separated names) or `"regression"` (float label).
        header: the file's first row names the columns (CSV/TSV).
        task: the GLUE task name, when the layout is a GLUE one.
        display_names: names shown for the classes (same order as `label_names`)
            when the file's labels are codes, e.g. SST-2's 0/1 -> negative/positive.
        delimiter: the field separator, read with quoting off; None decides from the
            file's extension (`.csv` comma with quotes, `.jsonl`, else tab).
    """

    text_columns: tuple
    label_column: object
    label_names: tuple = None
    problem_type: str = "single_label"
    header: bool = True
    task: str = None
    display_names: tuple = None
    delimiter: str = None

    def __post_init__(self):
        self.text_columns = tuple(self.text_columns)
        if not 1 <= len(self.text_columns) <= 2:
            raise UsageError(f"give one or two text columns (a sentence or a pair), got {list(self.text_columns)}.")
        if self.label_names is not None:
            self.label_names = tuple(str(n) for n in self.label_names)
        if self.display_names is not None:
            self.display_names = tuple(str(n) for n in self.display_names)

    @classmethod
    def for_task(cls, name):
        """The layout of a GLUE task (`sst2`, `mrpc`, `rte`, `cola`, `qqp`, `stsb`, `mnli`, `qnli`, `wnli`).

        `stsb` reads the original STS Benchmark files (`sts-*.csv`), `stsb_glue` GLUE's STS-B TSV."""
        key = name.lower()
        if key not in _GLUE_TASKS:
            raise UsageError(
                f"unknown task {name!r}; known GLUE tasks: {', '.join(sorted(_GLUE_TASKS))}. "
                "For other files give --text-column and --label-column."
            )
        return cls(task=key.replace("-", ""), **_GLUE_TASKS[key])

    def to_dict(self):
        return dataclasses.asdict(self) | {
            "text_columns": list(self.text_columns),
            "label_names": list(self.label_names) if self.label_names else None,
            "display_names": list(self.display_names) if self.display_names else None,
        }

    @classmethod
    def from_dict(cls, d):
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})


@dataclasses.dataclass
class Examples:
    """Parsed examples: `texts` is a tuple of 1 or 2 lists of str; `labels` int ids
    `[n]`, multi-hot `[n, k]` (multi-label) or float `[n]` (regression)."""

    texts: tuple
    labels: np.ndarray
    label_names: list
    path: str = None

    def __len__(self):
        return len(self.texts[0])


def _file_kind(path):
    ext = os.path.splitext(path)[1].lower()
    if ext in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if ext == ".csv":
        return "csv"
    return "tsv"  # GLUE's .tsv and anything else tab-separated


def _read_rows(path, layout):
    """Rows as dicts (header / JSON keys) or lists (no header), with line numbers."""
    text = read_text_file(path, "data file")
    # The GLUE MRPC files start with a byte-order mark.
    text = text[1:] if text.startswith("\ufeff") else text
    kind = "delimited" if layout.delimiter else _file_kind(path)
    with io.StringIO(text, newline="") as f:
        if kind == "jsonl":
            rows = []
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rows.append((i, json.loads(line)))
                except ValueError as e:
                    raise InvalidInputError(
                        f"{path}:{i}: not a JSON object ({e}); JSON Lines needs one object per line."
                    ) from None
            return rows, None
        csv.field_size_limit(sys.maxsize)
        # GLUE TSVs are not quoted (MRPC sentences contain bare `"`): QUOTE_NONE as GLUE's own reader.
        if kind == "csv":
            reader = csv.reader(f)
        else:
            reader = csv.reader(f, delimiter=layout.delimiter or "\t", quoting=csv.QUOTE_NONE)
        lines = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row)]
    if not lines:
        return [], None
    if layout.header:
        header = [h.strip() for h in lines[0][1]]
        for n, row in lines[1:]:
            if len(row) > len(header):
                raise InvalidInputError(
                    f"{path}:{n}: {len(row)} columns, the header has {len(header)}"
                    f"{' (a tab inside the text?)' if kind == 'tsv' else ''}; fix the line or the header."
                )
        return lines[1:], header
    return lines, None


# Read by `finetune` (whose flags choose the columns) and by `evaluate`/`predict` (which read
# the columns saved with the model and have no such flags): the fix names the verb with its flags.
_COLUMN_FIX = (
    "Give a file with the model's columns, or choose them when fine-tuning (`bert-zoo finetune classify "
    "--text-column/--label-column` or --task)."
)


def _column_index(column, header, path):
    if isinstance(column, int) or (isinstance(column, str) and column.isdigit() and header is None):
        return int(column)
    if header is None:
        raise InvalidInputError(
            f"{path}: column {column!r} is a name but the file has no header; give a 0-based index."
        )
    if column not in header:
        raise InvalidInputError(f"{path}: no column {column!r}; the header has {header}. {_COLUMN_FIX}")
    return header.index(column)


def _parse_labels(raw, layout, label_names, path, line_numbers):
    if layout.problem_type == "regression":
        try:
            return np.asarray([float(v) for v in raw], dtype=np.float32), None
        except ValueError:
            bad = next(i for i, v in enumerate(raw) if not _is_float(v))
            raise InvalidInputError(
                f"{path}:{line_numbers[bad]}: label {raw[bad]!r} is not a number (regression)."
            ) from None
    if layout.problem_type == "multi_label":
        raw = [_split_multi(v) for v in raw]
        seen = sorted({n for names in raw for n in names})
    else:
        raw = [str(v).strip() for v in raw]
        seen = sorted(set(raw), key=_label_sort_key)
    names = list(label_names) if label_names else seen
    index = {n: i for i, n in enumerate(names)}
    if layout.problem_type == "multi_label":
        labels = np.zeros((len(raw), len(names)), dtype=np.float32)
        for row, values in enumerate(raw):
            for v in values:
                labels[row, _lookup(index, v, path, line_numbers[row])] = 1.0
        return labels, names
    labels = np.asarray([_lookup(index, v, path, line_numbers[r]) for r, v in enumerate(raw)], dtype=np.int32)
    return labels, names


def _lookup(index, value, path, line):
    if value not in index:
        raise InvalidInputError(
            f"{path}:{line}: unknown label {value!r}; the model's labels are {sorted(index)}. "
            "Fix the file or train with a file that has this label."
        )
    return index[value]


def _split_multi(value):
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    value = str(value).strip()
    if value.startswith("["):
        return [str(v) for v in json.loads(value)]
    return [v for v in value.split("|") if v]


def _label_sort_key(v):
    # Numeric labels sort numerically ("2" before "10"), names alphabetically.
    return (0, float(v), v) if _is_float(v) else (1, 0.0, v)


def _is_float(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def read_examples(path, layout, label_names=None, max_examples=None):
    """Reads and validates a data file.

    Args:
        path: `.tsv` (GLUE), `.csv` or `.jsonl` file.
        layout: `DataLayout`.
        label_names: the classes the model knows (e.g. from the training file);
            defaults to `layout.label_names` or the labels seen in this file.
        max_examples: int, keep the first N examples.

    Returns:
        `Examples`.

    Raises:
        ValueError: empty file, missing column, short row, unknown label.
    """
    rows, header = _read_rows(path, layout)
    if not rows:
        raise InvalidInputError(f"{path} has no examples (empty file or header only).")
    if max_examples:
        rows = rows[: int(max_examples)]
    line_numbers = [n for n, _ in rows]
    columns = list(layout.text_columns) + [layout.label_column]
    if _file_kind(path) == "jsonl" and not layout.delimiter:
        missing = [c for c in columns if c not in rows[0][1]]
        if missing:
            raise InvalidInputError(
                f"{path}:{rows[0][0]}: no key {missing[0]!r}; the object has {sorted(rows[0][1])}. {_COLUMN_FIX}"
            )
        values = []
        for n, obj in rows:
            try:
                values.append([obj[c] for c in columns])
            except KeyError as e:
                raise InvalidInputError(f"{path}:{n}: no key {e.args[0]!r}.") from None
    else:
        idx = [_column_index(c, header, path) for c in columns]
        need = max(idx) + 1
        values = []
        for n, row in rows:
            if len(row) < need:
                raise InvalidInputError(
                    f"{path}:{n}: {len(row)} columns, the layout needs at least {need} "
                    f"(text {list(layout.text_columns)}, label {layout.label_column!r})."
                )
            values.append([row[i] for i in idx])
    texts = tuple([str(v[i]) for v in values] for i in range(len(layout.text_columns)))
    labels, names = _parse_labels(
        [v[-1] for v in values], layout, label_names or layout.label_names, path, line_numbers
    )
    return Examples(texts=texts, labels=labels, label_names=names, path=path)


def make_dataset(
    examples, preprocessor, batch_size=32, shuffle=False, seed=0, batching="auto", boundaries=None, with_labels=True
):
    """A batched `tf.data.Dataset` of `(features, labels)` for `model.fit/evaluate`.

    Args:
        examples: `Examples`.
        preprocessor: layer mapping a string batch (or a `(text_a, text_b)` pair of
            batches) to `token_ids`/`segment_ids`/`padding_mask` of its fixed length.
        batch_size: int.
        shuffle: reshuffle every epoch (seeded); set for training.
        seed: int, shuffle seed.
        batching: `"auto"` groups examples of similar length when shuffling
            (`"by_length"`) and, in order, cuts each batch to the shortest bucket that
            holds it (`"bucketed"`, also random batches when shuffling); `"fixed"` pads
            everything to the preprocessor's length (`preprocessing.batching`).
        boundaries: bucket lengths; default from `bucketing.default_boundaries`.
        with_labels: False yields features only (for `predict`).
    """
    from keras_bert_zoo.preprocessing import bucketing
    from keras_bert_zoo.preprocessing.batching import batch_raw

    # The public helper `Task.fit` uses on raw texts, with the coarse widths the jobs were
    # measured with (docs/benchmarks.md; `jit_compile=True` compiles one program per width).
    texts = tuple(list(t) for t in examples.texts)
    sequence_length = int(getattr(preprocessor, "sequence_length", 512))
    return batch_raw(
        preprocessor,
        texts if len(texts) == 2 else texts[0],
        examples.labels if with_labels else None,
        batch_size=batch_size,
        training=shuffle,
        seed=seed,
        batching=batching,
        boundaries=boundaries or bucketing.default_boundaries(sequence_length),
    )
