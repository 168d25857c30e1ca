"""The errors a user can cause, one family, each message naming the problem and the fix.

Every error the package raises for a user's mistake is a `BertZooError`. Its message
names the file (and the line, tensor or flag) and says what to do. The `bert-zoo`
command prints it as one line, `bert-zoo VERB: error: MESSAGE`, and exits with the
class's `exit_code`: 2 for a usage error (a flag), 1 for bad data, a bad checkpoint or
a failed write. A traceback is printed only with `bert-zoo --debug`, or for a genuine
bug (an exception outside this family and outside the standard file errors).

The classes also subclass the built-in exception a caller would catch before this
module existed: `ValueError` for bad values, `TypeError` for a value of the wrong type,
`FileNotFoundError` for a missing path, so `except ValueError` keeps working.

Which class: how the package is *called* (a flag, an argument's value or shape, a missing
or contradicting argument) is a `UsageError`; an argument of the wrong type or dtype an
`ArgumentTypeError`; what a file, text, label list or vocabulary *holds* an
`InvalidInputError`; a checkpoint or model directory a `CheckpointError`.
`tests/test_typed_errors.py` fails on a bare `raise ValueError(...)` (or `TypeError`,
`KeyError`, `RuntimeError`) anywhere in the package, outside its allow-list of internal checks.

| class | for | exit code |
|---|---|---|
| `UsageError` | a flag or argument out of range, contradicting flags | 2 |
| `ArgumentTypeError` | an argument of the wrong type (a `UsageError` and a `TypeError`) | 2 |
| `OutputExistsError` | `--out` exists and `--overwrite` was not given | 2 |
| `InvalidInputError` | a data file, vocabulary or text that cannot be used | 1 |
| `MissingPathError` | a path that does not exist (or is a directory instead of a file) | 1 |
| `CheckpointError` | a checkpoint or model directory that cannot be loaded as asked | 1 |
| `UnsafeFileError` | a pickle (or other code-running format), never opened | 1 |
| `OutputError` | `--out` cannot be written (read-only, a file where a directory goes) | 1 |

Examples:
>>> from keras_bert_zoo.errors import InvalidInputError, BertZooError
>>> try:
...     raise InvalidInputError("train.tsv:3: 2 columns, the header has 3; fix the line or the header.")
... except ValueError as e:  # still a ValueError
...     isinstance(e, BertZooError), e.exit_code
(True, 1)
"""

__all__ = [
    "BertZooError",
    "UsageError",
    "ArgumentTypeError",
    "OutputExistsError",
    "InvalidInputError",
    "MissingPathError",
    "CheckpointError",
    "UnsafeFileError",
    "OutputError",
    "exit_code_of",
    "one_line",
]


class BertZooError(Exception):
    """Base of every error caused by what the user gave (files, flags, checkpoints)."""

    exit_code = 1


class UsageError(BertZooError, ValueError):
    """A flag or argument that cannot be used as given (out of range, contradicting)."""

    exit_code = 2


class ArgumentTypeError(UsageError, TypeError):
    """An argument of the wrong type or dtype (ints where text goes, a dict for a tokenizer).

    Also a `TypeError` (and, as every `UsageError`, a `ValueError`), so the `except`
    clauses written for the builtin it replaces keep working.

    Examples:
    >>> from keras_bert_zoo.errors import ArgumentTypeError
    >>> try:
    ...     raise ArgumentTypeError("`tokenizer` must be a BertTokenizer, got dict.")
    ... except TypeError as e:
    ...     isinstance(e, ValueError), e.exit_code
    (True, 2)
    """


class OutputExistsError(UsageError):
    """`--out` already exists; it is never replaced unless `--overwrite` is given."""


class InvalidInputError(BertZooError, ValueError):
    """A data file, vocabulary or input text that cannot be used; the message names file and line."""


class MissingPathError(BertZooError, FileNotFoundError, ValueError):
    """A path that does not exist, or a directory where a file is expected (or the reverse)."""

    def __init__(self, message):
        # FileNotFoundError(msg) would treat a second argument as errno; keep the plain form.
        super().__init__(message)

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class CheckpointError(BertZooError, ValueError):
    """A checkpoint or model directory that cannot be loaded as asked; the message says why."""


class UnsafeFileError(CheckpointError):
    """A file in a format that can run code when opened (pickle); it is never opened."""


class OutputError(BertZooError, ValueError):
    """An output that cannot be written where asked (read-only path, a file in the way)."""


def exit_code_of(error):
    """The `bert-zoo` exit code for an exception a user's input caused (None: a bug).

    `BertZooError`s carry their own code; the standard errors a bad path or bad bytes
    raise (`OSError`, `UnicodeError`, `ValueError`) are data errors (1).
    """
    if isinstance(error, BertZooError):
        return error.exit_code
    # UnicodeDecodeError is a ValueError; FloatingPointError: a non-finite training loss
    # (training.loop.NonFiniteLossError), whose message names the step and the causes.
    if isinstance(error, (OSError, ValueError, FloatingPointError)):
        return 1
    return None


def one_line(error):
    """The error's message on one line (newlines folded), with the OS error's path if any."""
    if isinstance(error, OSError) and not isinstance(error, BertZooError) and error.filename:
        text = f"{error.filename}: {error.strerror or error}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())
