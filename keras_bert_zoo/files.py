"""Every output is written beside its destination and renamed into place at the end.

So a reader never sees a half-written vocabulary, config, metrics file or model
directory, a failed (or interrupted) run leaves the destination as it was, and an
existing output is replaced only when the caller says so (`overwrite=True`,
`--overwrite` on the command line).

- `write_text` / `write_json` / `write_metrics`: one file, through a temporary file
  in the same directory and `os.replace` (atomic on POSIX).
- `output_file(path, overwrite)`: a context manager yielding a temporary path to write
  a file of any kind into; renamed to `path` when the block succeeds.
- `output_dir(path, overwrite)`: the same for a directory (a preset, a SavedModel):
  the block fills a temporary sibling directory, which then takes `path`'s place.
  An existing directory is swapped out atomically where the kernel allows it
  (`renameat2(RENAME_EXCHANGE)`, Linux), else moved aside first and restored if the
  final rename fails; either way, at every instant `path` is the old complete output
  or the new complete one.
- `check_output(path, overwrite, kind)`: the checks `output_dir`/`output_file` make
  first, for callers that want them before hours of work.

Reading (`keras_bert_zoo.input_files`, whose names this module exports too): a missing
path, a directory, bytes that are not UTF-8, invalid JSON or CSV become one message naming
the file (and line) and the fix.

Modes: staged files are created 0600 by `mkstemp`; `output_file` widens them to what the
user's umask allows (0644 under umask 022) before the rename, as `open()` would have, so a
serving process under another user can read a model directory.
"""

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import tempfile

from keras_bert_zoo.errors import OutputError, OutputExistsError
from keras_bert_zoo.input_files import (
    check_input_file,
    check_text_file,
    csv_rows,
    decode_utf8,
    read_json,
    read_text_file,
)

__all__ = [
    "write_text",
    "write_json",
    "write_metrics",
    "write_npy",
    "check_input_file",
    "check_text_file",
    "read_text_file",
    "decode_utf8",
    "read_json",
    "csv_rows",
    "check_output",
    "output_file",
    "output_dir",
    "scratch_dir",
    "replace_dir",
]


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` through a temporary file and a rename."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with output_file(path, overwrite=True) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def write_json(path, obj, **dump_kwargs):
    """Writes `obj` as indented JSON to `path`, atomically."""
    write_text(path, json.dumps(obj, indent=2, **dump_kwargs) + "\n")


def write_metrics(metrics, path):
    """Writes a flat JSON object of floats and ints (`metrics.json`), atomically; returns it."""
    flat = {k: (int(v) if isinstance(v, (bool, int)) else float(v)) for k, v in metrics.items()}
    write_json(path, flat, sort_keys=True)
    return flat


def write_npy(path, array, overwrite=True):
    """Writes a numpy array as `.npy` to exactly `path` (no suffix added), atomically;
    an existing `path` only with `overwrite` (else `OutputExistsError`)."""
    import numpy as np

    with output_file(path, overwrite=overwrite, flag="--out") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, array)


def check_output(path, overwrite=False, kind="dir", flag="--out"):
    """Raises before any work when `path` cannot receive an output of `kind` ("dir"/"file").

    Raises:
        OutputExistsError: `path` exists and `overwrite` is False.
        OutputError: a file where a directory goes (or the reverse), or a parent that
            is not a directory or cannot be written.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    shown = f"{flag} {path}" if flag else path
    for_flag = f" for {flag}" if flag else ""
    if os.path.lexists(path):
        is_dir = os.path.isdir(path) and not os.path.islink(path)
        if kind == "dir" and not is_dir:
            raise OutputError(f"{shown} is an existing file, not a directory; choose a directory path{for_flag}.")
        if kind == "file" and is_dir:
            raise OutputError(f"{shown} is an existing directory; give a file path{for_flag}.")
        if not overwrite:
            what = _describe(path) if is_dir else "a file"
            raise OutputExistsError(
                f"{shown} already exists ({what}); choose a new path, or pass --overwrite "
                "(overwrite=True in Python) to replace it once the new output is complete."
            )
    ancestor = parent
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise OutputError(f"cannot write {shown}: {ancestor} is a file, not a directory; choose another path.")
    if not os.access(ancestor, os.W_OK):
        raise OutputError(f"cannot write {shown}: {ancestor} is not writable; choose a writable path.")
    return path


def _describe(path):
    """What an existing output directory holds, for the message (a model of which task, ...)."""
    config = os.path.join(path, "config.json")
    try:
        with open(config, encoding="utf-8") as f:
            task = json.load(f).get("keras_bert_zoo", {}).get("task")
        return f"a {task or 'BertBackbone'} model directory"
    except (OSError, ValueError, AttributeError):
        pass
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return "a SavedModel"
    return f"a directory of {len(os.listdir(path))} entries"


def _make_parent(path, shown):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot write {shown}: {e.strerror} ({e.filename}); choose a writable path.") from None


def _staging(path, suffix, make):
    """A hidden temporary sibling of `path` (same file system, so the rename is atomic)."""
    name = os.path.basename(path)
    try:
        return make(prefix=f".{name}.", suffix=suffix, dir=os.path.dirname(path))
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}; choose a writable path.") from None


@contextlib.contextmanager
def output_file(path, overwrite=False, flag=None):
    """Yields a temporary file path beside `path`; renames it to `path` when the block succeeds.

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.files import output_file
    >>> target = os.path.join(tempfile.mkdtemp(), "predictions.txt")
    >>> with output_file(target) as tmp:
    ...     _ = open(tmp, "w").write("positive\\n")
    >>> open(target).read()
    'positive\\n'
    """
    path = check_output(path, overwrite, kind="file", flag=flag)
    _make_parent(path, path)
    fd, tmp = _staging(path, ".partial", tempfile.mkstemp)
    os.close(fd)
    try:
        yield tmp
        if os.path.isfile(tmp):  # mkstemp's 0600 is for the staging only: the umask's mode, as open() gives
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def output_dir(path, overwrite=False, flag="--out"):
    """Yields an empty temporary directory beside `path`; it takes `path`'s place when the block succeeds.

    Nothing is written at `path` before the block has finished: an exception (or a
    Ctrl-C) inside it removes the temporary directory and leaves `path` as it was.

    Args:
        path: the output directory.
        overwrite: replace an existing `path` (only once the new output is complete);
            False raises `OutputExistsError` before anything is written.
        flag: the flag named in messages (`"--out"`).

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.files import output_dir
    >>> target = os.path.join(tempfile.mkdtemp(), "model")
    >>> with output_dir(target) as tmp:
    ...     _ = open(os.path.join(tmp, "config.json"), "w").write("{}")
    >>> os.listdir(target)
    ['config.json']
    """
    path = check_output(path, overwrite, kind="dir", flag=flag)
    _make_parent(path, f"{flag} {path}" if flag else path)
    tmp = _staging(path, ".partial", tempfile.mkdtemp)
    try:
        yield tmp
        os.chmod(tmp, 0o755 & ~_umask())  # mkdtemp's 0700 is for the staging only
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def scratch_dir():
    """A temporary directory removed afterwards: where a non-chief worker "saves"."""
    path = tempfile.mkdtemp(prefix="bert-zoo-worker-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_dir(new, path):
    """Puts directory `new` at `path`; an existing `path` is the old output until the new one is there."""
    if not os.path.lexists(path):
        os.rename(new, path)  # fails, leaving nothing, if another process created `path` meanwhile
        return
    if _exchange(new, path):  # atomic swap: `new` now holds the old output
        shutil.rmtree(new, ignore_errors=True)
        return
    aside = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old", dir=os.path.dirname(path))
    os.rmdir(aside)
    os.rename(path, aside)
    try:
        os.rename(new, path)
    except BaseException:
        os.rename(aside, path)  # put the old output back
        raise
    shutil.rmtree(aside, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a, b):
    """Swaps two paths atomically with Linux `renameat2(RENAME_EXCHANGE)`; False where unavailable."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
