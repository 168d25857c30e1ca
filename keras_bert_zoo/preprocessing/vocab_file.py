"""A BERT `vocab.txt`: one token a line, the special tokens among them, read and checked.

Examples:
>>> from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary
>>> read_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"])[-1]
'the'
"""

import os

from keras_bert_zoo.errors import ArgumentTypeError, CheckpointError, InvalidInputError, MissingPathError
from keras_bert_zoo.files import read_json, read_text_file

__all__ = ["SPECIAL_TOKENS", "read_vocabulary", "embedding_table_size", "check_vocab_txt_fits", "vocabulary_past_table"]

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


def embedding_table_size(directory):
    """`(rows, config path)` of the word-embedding table the model config beside a `vocab.txt` declares:
    `vocab_size` of HF's `config.json` or Google's `bert_config.json`, `vocabulary_size` of a KerasHub
    `config.json`. None when the directory holds no such config (a tokenizer-only preset)."""
    for name in ("config.json", "bert_config.json"):
        path = os.path.join(os.fspath(directory), name)
        if os.path.isfile(path):
            config = read_json(path, name, "restore it from the checkpoint's source")
            nested = config.get("config") if isinstance(config.get("config"), dict) else {}
            size = config.get("vocab_size", nested.get("vocabulary_size"))
            if isinstance(size, int) and not isinstance(size, bool):
                return size, path
    return None


def check_vocab_txt_fits(directory, vocabulary_size=None):
    """Refuses a checkpoint directory whose `vocab.txt` has more tokens than its embedding table.

    Token ids at or past the table's size would have no embedding: TensorFlow fails the first time
    one is looked up, deep in a `GatherV2`. This says so at load time instead, naming both files and
    both sizes. A vocabulary *smaller* than the table is normal (HF pads tables to a multiple of 8
    or 64) and passes. `vocabulary_size`: the token count when the caller has read `vocab.txt`.

    Raises:
        CheckpointError: `vocab.txt` has more tokens than the config's `vocab_size`.
    """
    vocab_path = os.path.join(os.fspath(directory), "vocab.txt")
    table = embedding_table_size(directory)
    if table is None or not os.path.isfile(vocab_path):
        return
    rows, config_path = table
    tokens = vocabulary_size if vocabulary_size is not None else len(read_vocabulary(vocab_path))
    if tokens > rows:
        raise vocabulary_past_table(vocab_path, tokens, rows, f" (vocab_size in {config_path})")


def vocabulary_past_table(vocabulary, entries, rows, where=""):
    """The `CheckpointError` for a vocabulary (`vocabulary`: how to name it) of `entries` tokens
    beside an embedding table of `rows` rows (`where`: the config that says so, if known)."""
    return CheckpointError(
        f"{vocabulary} has {entries:,} entries but the model's embedding table has {rows:,} rows{where}, so token "
        f"ids from {rows:,} up have no embedding. Use the vocab.txt the checkpoint was trained with (at most "
        f"{rows:,} lines; a smaller one is fine: HF pads tables)."
    )
