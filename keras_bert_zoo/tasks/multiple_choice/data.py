"""Multiple-choice data: SWAG CSV and JSON Lines -> `ChoiceExamples` -> `tf.data`.

- SWAG CSV (the original release's columns): `sent1`, `sent2`, `ending0`..`ending3`,
  `label`. As HF's `run_swag.py`, the context is `sent1` and choice *i* is
  `sent2 + " " + ending_i` (`sent2` is the start of the next sentence, e.g. "A drum line").
- JSON Lines: one object per line, `{"context": str, "choices": [str, ...], "label": int}`.

Every question of a file must have the same number of choices (the model sees
`[batch, num_choices, seq]`). Errors name the file and the line.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.tasks.multiple_choice.data import read_choices
>>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
>>> _ = open(path, "w").write('{"context": "He sat down.", "choices": ["He ate.", "Blue sky."], "label": 0}\\n')
>>> examples = read_choices(path)
>>> examples.contexts, examples.choices, examples.labels.tolist()
(['He sat down.'], [['He ate.', 'Blue sky.']], [0])
"""

import dataclasses
import json
import os
import re

import numpy as np

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.files import csv_rows, read_text_file

__all__ = ["ChoiceExamples", "read_choices", "make_choice_dataset"]

_SWAG_COLUMNS = ("sent1", "sent2")


@dataclasses.dataclass
class ChoiceExamples:
    """Questions: `contexts` (n strings), `choices` (n lists of `num_choices` strings) and
    `labels` (int `[n]`, the right choice's index; None when unlabelled)."""

    contexts: list
    choices: list
    labels: np.ndarray = None
    path: str = None

    def __post_init__(self):
        if self.labels is not None:
            self.labels = np.asarray(self.labels, dtype=np.int32)

    def __len__(self):
        return len(self.contexts)

    @property
    def num_choices(self):
        return len(self.choices[0]) if self.choices else 0

    def check(self):
        """Raises a ValueError naming the first question that does not fit."""
        where = self.path or "input"
        if len(self.contexts) != len(self.choices):
            raise InvalidInputError(f"{where}: {len(self.contexts)} contexts but {len(self.choices)} lists of choices.")
        if not self.contexts:
            raise InvalidInputError(f"{where}: no questions; give at least one context with its choices.")
        for i, row in enumerate(self.choices):
            if len(row) != self.num_choices:
                raise InvalidInputError(
                    f"{where}: question {i} has {len(row)} choices, the first has {self.num_choices}; "
                    "every question needs the same number of choices."
                )
        if self.num_choices < 2:
            raise InvalidInputError(f"{where}: a question needs at least 2 choices, got {self.num_choices}.")
        if self.labels is not None:
            if len(self.labels) != len(self.contexts):
                raise InvalidInputError(f"{where}: {len(self.labels)} labels for {len(self.contexts)} questions.")
            bad = np.flatnonzero((self.labels < 0) | (self.labels >= self.num_choices))
            if bad.size:
                raise InvalidInputError(
                    f"{where}: question {bad[0]} has label {self.labels[bad[0]]}; labels are choice "
                    f"indices 0..{self.num_choices - 1}."
                )
        return self


def _read_swag(path, max_examples):
    rows = [(n, row) for n, row in csv_rows(path, "SWAG file") if row]
    header = [h.strip() for h in rows[0][1]] if rows else []
    endings = sorted((h for h in header if re.fullmatch(r"ending\d+", h)), key=lambda h: int(h[6:]))
    missing = [c for c in _SWAG_COLUMNS if c not in header] + ([] if endings else ["ending0"])
    if missing:
        raise InvalidInputError(
            f"{path}:1: no column {missing[0]!r}; a SWAG CSV has sent1, sent2, ending0.., "
            f"label (the header has {header})."
        )
    labelled = "label" in header
    contexts, choices, labels = [], [], []
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise InvalidInputError(
                f"{path}:{line}: the row has {len(row)} fields, the header {len(header)}; "
                "fix the row (a comma inside an unquoted field?)."
            )
        values = dict(zip(header, row, strict=True))
        # HF run_swag.py: first = sent1; second = f"{sent2} {ending_i}".
        contexts.append(values["sent1"])
        choices.append([f"{values['sent2']} {values[e]}" for e in endings])
        if labelled:
            labels.append(_label(values["label"], len(endings), path, line))
        if max_examples and len(contexts) >= max_examples:
            break
    return contexts, choices, (labels if labelled else None)


def _label(value, num_choices, path, line):
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"\d+", text) or int(text) >= num_choices:
        raise InvalidInputError(f"{path}:{line}: label {value!r} is not a choice index (0..{num_choices - 1}).")
    return int(text)


def _read_jsonl(path, max_examples):
    contexts, choices, labels = [], [], []
    content = read_text_file(path, "data file")  # not UTF-8 -> FILE:LINE, as every reader
    content = content[1:] if content.startswith("\ufeff") else content
    for line, text in enumerate(content.split("\n"), 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InvalidInputError(
                f"{path}:{line}: not a JSON object ({e}); JSON Lines needs one object per line."
            ) from None
        if not isinstance(obj, dict) or "context" not in obj or "choices" not in obj:
            raise InvalidInputError(
                f'{path}:{line}: needs an object with "context", "choices" (and "label" for '
                "training), got " + (f"keys {sorted(obj)}" if isinstance(obj, dict) else repr(obj)[:60])
            )
        row = obj["choices"]
        if not isinstance(row, list) or len(row) < 2 or not all(isinstance(c, str) for c in row):
            raise InvalidInputError(f'{path}:{line}: "choices" must be a list of at least 2 strings.')
        if choices and len(row) != len(choices[0]):
            raise InvalidInputError(
                f"{path}:{line}: {len(row)} choices, earlier lines have {len(choices[0])}; every "
                "question of a file needs the same number of choices."
            )
        if not isinstance(obj["context"], str):
            raise InvalidInputError(f'{path}:{line}: "context" must be a string.')
        if "label" in obj:
            labels.append(_label(obj["label"], len(row), path, line))
        elif labels:
            raise InvalidInputError(f'{path}:{line}: no "label", earlier lines have one.')
        contexts.append(obj["context"])
        choices.append(row)
        if max_examples and len(contexts) >= max_examples:
            break
    if labels and len(labels) != len(contexts):
        raise InvalidInputError(f'{path}: the first lines have no "label" but later ones do; label every line.')
    return contexts, choices, (labels or None)


def read_choices(path, max_examples=None, require_labels=True):
    """Reads and validates a multiple-choice file (`.csv`: SWAG; `.jsonl`/`.json`: JSON Lines).

    Args:
        path: the file.
        max_examples: keep the first N questions.
        require_labels: raise when the file has no labels (training and evaluation).

    Returns:
        `ChoiceExamples`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file {path!r} does not exist.")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".csv":
        contexts, choices, labels = _read_swag(path, max_examples)
    elif ext in (".jsonl", ".json", ".ndjson"):
        contexts, choices, labels = _read_jsonl(path, max_examples)
    else:
        raise InvalidInputError(
            f"{path}: unknown multiple-choice format {ext!r}; use a SWAG .csv or a .jsonl file with "
            "context, choices and label."
        )
    if not contexts:
        raise InvalidInputError(f"{path} has no questions (empty file or header only).")
    if labels is None and require_labels:
        raise InvalidInputError(
            f'{path} has no labels (SWAG: a "label" column; JSONL: a "label" key); training and '
            "evaluation need the right choice's index."
        )
    return ChoiceExamples(contexts=contexts, choices=choices, labels=labels, path=path).check()


def make_choice_dataset(
    examples, preprocessor, batch_size=32, shuffle=False, seed=0, batching="auto", boundaries=None, with_labels=True
):
    """A batched `tf.data.Dataset` of `(features, labels)`, features `[batch, num_choices, width]`.

    Tokenization runs once (TF ops, big batches) and the int features are cached.
    With `batching="auto"`, training batches group questions of similar length (the
    longest choice of each) and every batch is cut to the shortest bucket width that
    holds it; `"bucketed"`, `"fixed"` and `"packed"` (each `(context, choice)` pair
    a sequence of its own in shared rows) as `preprocessing.batching.batch_raw`.

    Args:
        examples: `ChoiceExamples`.
        preprocessor: a `MultipleChoicePreprocessor`.
        batch_size: questions per batch.
        shuffle: reshuffle every epoch (seeded); set for training.
        with_labels: False yields features only (for `predict`); labels may then be None.
    """
    from keras_bert_zoo.preprocessing import bucketing
    from keras_bert_zoo.preprocessing.batching import batch_raw

    examples.check()
    # The public helper `BertMultipleChoice.fit` uses on raw text, at the coarse widths
    # the job was measured with.
    labels = examples.labels if with_labels and examples.labels is not None else None
    if with_labels and labels is None:
        labels = np.zeros(len(examples), np.int32)
    return batch_raw(
        preprocessor,
        (list(examples.contexts), [list(c) for c in examples.choices]),
        labels,
        batch_size=batch_size,
        training=shuffle,
        seed=seed,
        batching=batching,
        boundaries=boundaries or bucketing.default_boundaries(int(preprocessor.sequence_length)),
    )
