"""STS Benchmark files: sentence pairs with a gold similarity score (0-5).

Two layouts are read:

- the original release (`sts-train.csv`, `sts-dev.csv`, `sts-test.csv`): tab-separated,
  no header, fields `genre file year id score sentence1 sentence2`; some 2016 rows carry
  two more fields (their sources), which are ignored. The sentences hold unbalanced
  quotes, so quoting is off (a `"` is text), and one training sentence holds a
  control character (`\\x12` for an apostrophe), kept as it is;
- GLUE's `STS-B/*.tsv`: a header row naming `sentence1`, `sentence2` and `score`.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.tasks.embedder.data import read_sts
>>> path = os.path.join(tempfile.mkdtemp(), "sts-dev.csv")
>>> _ = open(path, "w").write('main-captions\\tMSRvid\\t2012test\\t0000\\t5.000\\tA "man.\\tA man.\\n')
>>> pairs = read_sts(path)
>>> pairs.sentences1, pairs.sentences2, pairs.scores.tolist()
(['A "man.'], ['A man.'], [5.0])
"""

import dataclasses

import numpy as np

from keras_bert_zoo.errors import InvalidInputError

__all__ = ["SimilarityPairs", "read_sts"]

_ORIGINAL_FIELDS = ("genre", "file", "year", "id", "score", "sentence1", "sentence2")
_SCORE, _SENTENCE1, _SENTENCE2 = 4, 5, 6  # the fields read in the original layout


@dataclasses.dataclass
class SimilarityPairs:
    """`sentences1[i]`, `sentences2[i]` and their gold `scores[i]` (float32 `[n]`)."""

    sentences1: list
    sentences2: list
    scores: np.ndarray
    path: str = None

    def __len__(self):
        return len(self.scores)


def read_sts(path, max_examples=None):
    """Reads an STS-B file (original release or GLUE TSV) into `SimilarityPairs`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a row with too few fields or a score that is not a number (naming
            the file and line), or a file without pairs.
    """
    from keras_bert_zoo.files import read_text_file

    # Not UTF-8 (a binary or Latin-1 file) -> one error naming the file and line.
    text = read_text_file(path, "STS file")
    text = text[1:] if text.startswith("\ufeff") else text
    s1, s2, scores = [], [], []
    columns = (_SCORE, _SENTENCE1, _SENTENCE2)
    # Split on "\n" only: a stray \r or control character is text.
    for number, line in enumerate(text.split("\n"), 1):
        fields = line.rstrip("\r\n").split("\t")
        if number == 1 and {"sentence1", "sentence2", "score"} <= {c.strip() for c in fields}:
            header = [c.strip() for c in fields]  # GLUE's STS-B TSV
            columns = tuple(header.index(c) for c in ("score", "sentence1", "sentence2"))
            continue
        if not line.strip():
            continue
        if len(fields) <= max(columns):
            raise InvalidInputError(
                f"{path}:{number}: {len(fields)} tab-separated fields; an STS-B row has "
                f"{len(_ORIGINAL_FIELDS)} ({' '.join(_ORIGINAL_FIELDS)}) or a GLUE header."
            )
        score, a, b = (fields[i] for i in columns)
        try:
            scores.append(float(score))
        except ValueError:
            raise InvalidInputError(
                f"{path}:{number}: score {score!r} is not a number (field {columns[0] + 1})."
            ) from None
        s1.append(a)
        s2.append(b)
        if max_examples and len(scores) >= max_examples:
            break
    if not scores:
        raise InvalidInputError(f"{path} has no sentence pairs (empty file or header only); give an STS-B file.")
    return SimilarityPairs(s1, s2, np.asarray(scores, np.float32), path)
