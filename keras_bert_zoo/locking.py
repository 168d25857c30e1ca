"""One writer per output: an exclusive lock on `--out` for as long as a run writes it.

Without it, two runs started at once on one new `--out` both pass the "does it exist?"
check (nothing is there yet), and the one that finishes second silently replaces the
first's output; a second `finetune` would even adopt the first's live checkpoints as its
own. With it, the second run refuses at once, naming the first's process id.

The lock is `flock(LOCK_EX | LOCK_NB)` on a hidden file beside the output,
`.NAME.lock`, holding the owner's pid. It is released (and the file removed) when the
run ends, however it ends; the kernel drops it when a process dies, so a run killed with
SIGKILL leaves at most an unlocked `.NAME.lock`, which the next run takes over. Locks are
re-entrant within a process (the CLI and the library function it calls both take it).

Under `--strategy multi_worker` every worker runs the same command with the same
`--out`; only the chief writes it, so only the chief takes the lock. An output whose
parent folder does not exist yet is locked like any other: the missing folders are made
for the lock, and removed again on release when the run left nothing in them (a failed
run leaves the file system as it found it). Where the output's parent cannot be made or
written, no lock is taken: nothing can be written there, and the verb's own check reports
why in its words.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.locking import output_lock
>>> out = os.path.join(tempfile.mkdtemp(), "model")
>>> with output_lock(out):
...     sorted(os.listdir(os.path.dirname(out)))
['.model.lock']
>>> os.listdir(os.path.dirname(out))
[]
"""

import contextlib
import functools
import inspect
import os

from keras_bert_zoo.errors import OutputError

__all__ = ["OutputBusyError", "lock_path", "output_lock", "writes_output", "locks_output"]


class OutputBusyError(OutputError):
    """Another run (another process) is writing the same output right now."""


_held = {}  # lock path -> [fd, depth, folders made for it]: this process's locks


def lock_path(path):
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")


def _missing_folders(folder):
    """`folder` and its ancestors that do not exist, deepest first."""
    missing = []
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def _open_lock_file(lock, created):
    """The lock file's descriptor, making its missing folders (appended to `created`);
    None where the folder cannot be made or written."""
    for _ in range(10):  # another run may remove a folder it made between our makedirs and open
        try:
            return os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            missing = _missing_folders(os.path.dirname(lock))
            try:
                os.makedirs(os.path.dirname(lock), exist_ok=True)
            except OSError:
                return None  # an ancestor is a file or read-only: check_output says so in its words
            created.extend(d for d in missing if d not in created)
        except OSError:
            return None  # read-only: nothing can be written there anyway
    return None


def _acquire(lock, shown, created):
    import fcntl

    while True:
        fd = _open_lock_file(lock, created)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            _remove_empty(created)
            raise OutputBusyError(
                f"{shown} is being written by another run right now (pid {owner}); wait for it "
                "to finish (then pass --overwrite to replace its output), or choose another "
                "path."
            ) from None
        # The previous owner unlinks the file on release: if we locked an unlinked inode,
        # a third process may hold a fresh file at the path; start over on that one.
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _remove_empty(folders):
    """Removes the folders made for a lock, deepest first, while they are empty."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return  # the run's output (or another run's lock) is in it: it stays


@contextlib.contextmanager
def output_lock(path, flag="--out"):
    """Holds the exclusive lock on output `path` for the block (re-entrant in a process).

    Raises:
        OutputBusyError: another process holds it.
    """
    if path is None:
        yield
        return
    lock = lock_path(path)
    if lock in _held:
        _held[lock][1] += 1
    else:
        shown = f"{flag} {os.path.abspath(os.fspath(path))}" if flag else os.fspath(path)
        created = []
        fd = _acquire(lock, shown, created)
        if fd is None:
            _remove_empty(created)
            yield
            return
        _held[lock] = [fd, 1, created]
    try:
        yield
    finally:
        entry = _held[lock]
        entry[1] -= 1
        if entry[1] == 0:
            del _held[lock]
            with contextlib.suppress(OSError):
                os.remove(lock)  # before closing: a waiter then retries on a fresh file (see _acquire)
            os.close(entry[0])
            _remove_empty(entry[2])


def writes_output(strategy):
    """False on a multi-worker worker other than the chief (it never writes `--out`).

    Read from `TF_CONFIG` as `training.strategies.is_chief` does, without importing TensorFlow.
    """
    import json

    if strategy != "multi_worker" or "TF_CONFIG" not in os.environ:
        return True
    try:
        config = json.loads(os.environ["TF_CONFIG"])
        task, cluster = config.get("task", {}), config.get("cluster", {})
    except (ValueError, AttributeError):
        return True  # make_strategy reports a bad TF_CONFIG in its words
    if task.get("type") == "chief":
        return True
    return task.get("type") == "worker" and int(task.get("index", 0)) == 0 and "chief" not in cluster


def locks_output(argument="out"):
    """Decorator: the function holds `output_lock` on its `argument` while it runs
    (not on multi-worker workers other than the chief: see `writes_output`)."""

    def wrap(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked(*args, **kwargs):
            bound = signature.bind_partial(*args, **kwargs)
            writer = writes_output(bound.arguments.get("strategy", "default"))
            with output_lock(bound.arguments.get(argument) if writer else None):
                return function(*args, **kwargs)

        return locked

    return wrap
