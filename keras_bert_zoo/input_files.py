"""Reading data files: a missing path, a directory, or bytes that are not UTF-8 become one
message naming the file (and line) and the fix.

`check_input_file(path, what)` and `read_text_file(path, what)` do the checks; every
structured reader goes through them: `read_json(path, what, fix)` (invalid JSON ->
`FILE:LINE: not valid JSON (...)`, a list where an object belongs -> one line too) and
`csv_rows(path, ...)` (an unclosed quote or a runaway field -> `FILE:LINE`). The names are
exported by `keras_bert_zoo.files` too, beside the writers.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.input_files import read_json
>>> path = os.path.join(tempfile.mkdtemp(), "config.json")
>>> _ = open(path, "w").write('{"hidden_size": 8,}')
>>> read_json(path, "checkpoint config")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_bert_zoo.errors.InvalidInputError: ...config.json:1: not valid JSON at column 19 (Expecting property name enclosed in double quotes); restore the file (or download it again).
"""

import json
import os

from keras_bert_zoo.errors import InvalidInputError, MissingPathError

__all__ = ["check_input_file", "check_text_file", "read_text_file", "decode_utf8", "read_json", "csv_rows"]


def check_input_file(path, what="data file"):
    """`path` as a str, checked to be an existing regular file (else `MissingPathError`)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise MissingPathError(f"{what} {path} is a directory; give the file inside it.")
    if not os.path.exists(path):
        raise MissingPathError(f"{what} {path} does not exist; check the path.")
    return path


# A line longer than this is not a sentence or a document: a corpus without line breaks,
# or a binary file. Reading it would take gigabytes of tokenizer memory for nothing.
_MAX_LINE_BYTES = 10 * 2**20


def check_text_file(path, what="corpus file", max_line_bytes=_MAX_LINE_BYTES):
    """Checks that `path` is an existing text file: no NUL bytes, no line over `max_line_bytes`.

    Reads the file once in 1 MB chunks (so a 100 MB line costs no 100 MB string).
    Raises `MissingPathError` or an `InvalidInputError` naming the file and line.
    """
    path = check_input_file(path, what)
    line, run = 1, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(2**20)
            if not chunk:
                return path
            if b"\x00" in chunk:
                line += chunk.count(b"\n", 0, chunk.index(b"\x00"))
                raise InvalidInputError(f"{path}:{line}: binary data (NUL bytes), not text; give a UTF-8 text file.")
            pieces = chunk.split(b"\n")
            for i, piece in enumerate(pieces):
                run += len(piece)
                if run > max_line_bytes:
                    raise InvalidInputError(
                        f"{path}:{line}: a line longer than {max_line_bytes // 2**20} MB; a corpus has one sentence "
                        "(or one document) per line: add the line breaks (or check it is the right file)."
                    )
                if i < len(pieces) - 1:
                    line, run = line + 1, 0


def read_text_file(path, what="data file"):
    """The UTF-8 text of `path`; a missing path or non-UTF-8 bytes raise one clear error.

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.files import read_text_file
    >>> bad = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> _ = open(bad, "wb").write(b"ok\\nsecond line \\xff\\n")
    >>> read_text_file(bad)
    Traceback (most recent call last):
    ...
    keras_bert_zoo.errors.InvalidInputError: ...:2: not UTF-8 text (byte 0xff at offset 15); ...
    """
    path = check_input_file(path, what)
    with open(path, "rb") as f:
        data = f.read()
    return decode_utf8(data, path)


def decode_utf8(data, path):
    """`data` decoded as UTF-8, or an `InvalidInputError` naming `path`, the line and the byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidInputError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or check it is the right file."
        ) from None


def read_json(path, what="JSON file", fix="restore the file (or download it again)", expect=dict):
    """The JSON value of `path`, of type `expect` (None: any), or one error naming file and line.

    Args:
        path: the file.
        what: how messages name it when it is missing ("config.json", "SQuAD file").
        fix: what the user can do, ending the message ("give a SQuAD v1.1/v2.0 file").
        expect: the type the top level must have (`dict`, `list`), or None.

    Raises:
        MissingPathError: no such file.
        InvalidInputError: not UTF-8, not JSON (with the line of the error), or not an `expect`.
    """
    text = read_text_file(path, what)
    text = text[1:] if text.startswith("\ufeff") else text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{path}:{e.lineno}: not valid JSON at column {e.colno} ({e.msg}); {fix}.") from None
    if expect is not None and not isinstance(value, expect):
        wanted = {dict: "a JSON object ({...})", list: "a JSON list ([...])"}.get(expect, expect.__name__)
        raise InvalidInputError(f"{path}: holds a JSON {_json_kind(value)}, not {wanted}; {fix}.")
    return value


def _json_kind(value):
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, (int, float)) else "null"
    )


def csv_rows(path, what="data file", **reader_options):
    """`(line, row)` of every row of a CSV/TSV file (`csv.reader` options), read as UTF-8 text.

    The line is where the row starts. `csv.Error` (an unclosed quote swallowing the rest of
    the file, a NUL byte) becomes one `InvalidInputError` naming the file and that line:
    the row that opened the runaway field, not where the reader gave up.
    """
    import csv
    import io
    import sys

    text = read_text_file(path, what)
    text = text[1:] if text.startswith("\ufeff") else text
    csv.field_size_limit(min(sys.maxsize, _MAX_LINE_BYTES))
    # strict: a quote left open at the end of the file is an error, not one field holding
    # every line after it (which non-strict csv returns without a word).
    reader_options.setdefault("strict", True)
    reader = csv.reader(io.StringIO(text, newline=""), **reader_options)
    rows, start = [], 1
    try:
        for row in reader:
            rows.append((start, row))
            start = reader.line_num + 1
    except csv.Error as e:
        quote = (
            ""
            if reader_options.get("quoting") == csv.QUOTE_NONE
            else ' (an unclosed quote? a field that opens with " must close with ")'
        )
        raise InvalidInputError(
            f"{path}:{start}: cannot be read as CSV: {e}{quote}; fix the row, or check it is the right file."
        ) from None
    return rows
