"""A BERT `vocab.txt`: one token a line, the special tokens among them, read and checked.

Examples:
>>> from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary
>>> read_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"])[-1]
'the'
"""

import os

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, MissingPathError
from keras_bert_zoo.files import read_text_file

__all__ = ["SPECIAL_TOKENS", "read_vocabulary"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def read_vocabulary(vocabulary):
    """A list of tokens from a `vocab.txt` path or a list, checked for the special tokens."""
    source = "the vocabulary"
    if isinstance(vocabulary, (str, os.PathLike)):
        path = os.fspath(vocabulary)
        if os.path.isdir(path):
            path = os.path.join(path, "vocab.txt")
        if not os.path.exists(path):
            raise MissingPathError(f"vocabulary file not found: {path} (expected a vocab.txt, one token a line).")
        source = path
        # Only the line break ends a token: a vocabulary may hold tokens with spaces.
        tokens = [line.rstrip("\r") for line in read_text_file(path, "vocabulary file").split("\n")]
        if tokens and tokens[-1] == "":
            tokens = tokens[:-1]
    else:
        tokens = list(vocabulary)
    if not all(isinstance(t, str) for t in tokens):
        raise ArgumentTypeError("`vocabulary` must be a path to vocab.txt or a list of str tokens.")
    if not tokens:
        raise InvalidInputError(
            f"{source} is empty; a vocab.txt has one token a line, {' '.join(SPECIAL_TOKENS)} among them."
        )
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise InvalidInputError(
            f"{source} lacks the special token(s) {', '.join(missing)}; a BERT vocabulary needs "
            f"all of {' '.join(SPECIAL_TOKENS)}. Add them (e.g. learn_vocabulary() puts them first)."
        )
    seen = {}
    for i, t in enumerate(tokens):
        if t in seen:
            raise InvalidInputError(
                f"{source} has {t!r} twice (lines {seen[t] + 1} and {i + 1}); tokens must be unique: remove one."
            )
        seen[t] = i
    return tokens
