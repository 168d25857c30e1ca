"""`keras_bert_zoo.files`: outputs appear complete or not at all, and nothing the user had is lost."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest

from keras_bert_zoo.errors import OutputError, OutputExistsError
from keras_bert_zoo.files import check_output, output_dir, output_file, replace_dir, write_text
from tests.failures.helpers import tree_hash


def _fill(path, version, files=20):
    for i in range(files):
        with open(os.path.join(path, f"part{i:02d}.txt"), "w") as f:
            f.write(f"{version}\n" * 100)
    with open(os.path.join(path, "DONE"), "w") as f:
        f.write(version)


def _state(path):
    """The version a complete output directory holds; fails on a mixed or partial one."""
    names = sorted(os.listdir(path))
    assert names == sorted([f"part{i:02d}.txt" for i in range(20)] + ["DONE"]), names
    versions = {open(os.path.join(path, n)).read().split("\n")[0] for n in names}
    assert len(versions) == 1, versions
    return versions.pop()


def _no_leftovers(parent):
    hidden = [n for n in os.listdir(parent) if n.startswith(".")]
    assert not hidden, f"temporary files left behind: {hidden}"


def test_output_dir_writes_into_place(tmp_path):
    out = str(tmp_path / "model")
    with output_dir(out) as tmp:
        assert not os.path.exists(out) and os.path.dirname(tmp) == str(tmp_path)
        _fill(tmp, "new")
    assert _state(out) == "new"
    _no_leftovers(tmp_path)


def test_existing_output_needs_overwrite(tmp_path):
    out = str(tmp_path / "model")
    os.makedirs(out)
    _fill(out, "old")
    before = tree_hash(str(tmp_path))
    with pytest.raises(OutputExistsError, match="already exists.*--overwrite"):
        with output_dir(out):
            raise AssertionError("the block must not run")
    assert tree_hash(str(tmp_path)) == before
    with output_dir(out, overwrite=True) as tmp:
        _fill(tmp, "new")
    assert _state(out) == "new"
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failure_mid_write_keeps_the_old_output(tmp_path, error):
    out = str(tmp_path / "model")
    os.makedirs(out)
    _fill(out, "old")
    before = tree_hash(str(tmp_path))
    with pytest.raises(type(error)):
        with output_dir(out, overwrite=True) as tmp:
            _fill(tmp, "new", files=7)  # half written
            raise error
    assert tree_hash(str(tmp_path)) == before
    with pytest.raises(type(error)):
        with output_dir(str(tmp_path / "fresh")) as tmp:
            _fill(tmp, "new", files=3)
            raise error
    assert not os.path.exists(tmp_path / "fresh")
    _no_leftovers(tmp_path)


def _libc(monkeypatch, files, **functions):
    """The C library `files` loads for `renameat2(RENAME_EXCHANGE)`, replaced by one holding only
    `functions`: none is a system without renameat2 (macOS, older C libraries), where the
    old output is moved aside instead."""
    monkeypatch.setattr(files.ctypes, "CDLL", lambda *args, **kwargs: types.SimpleNamespace(**functions))


def _no_space(*args):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "rename-aside"])
def test_failed_final_rename_restores_the_old_output(tmp_path, monkeypatch, exchange):
    """The swap itself fails (both strategies): the old output is back, complete."""
    import keras_bert_zoo.files as files

    out = str(tmp_path / "model")
    os.makedirs(out)
    _fill(out, "old")
    if not exchange:
        _libc(monkeypatch, files)  # no renameat2: the rename-aside path
    real_rename = os.rename
    calls = []

    def failing_rename(src, dst):
        calls.append((src, dst))
        if dst == out and src.endswith(".partial"):  # the new output's rename fails; the restore works
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(files.os, "rename", failing_rename)
    if exchange:
        _libc(monkeypatch, files, renameat2=_no_space)
    with pytest.raises(OSError):
        with output_dir(out, overwrite=True) as tmp:
            _fill(tmp, "new")
    assert _state(out) == "old"
    _no_leftovers(tmp_path)


def test_rename_aside_path_also_works(tmp_path, monkeypatch):
    import keras_bert_zoo.files as files

    _libc(monkeypatch, files)
    out = str(tmp_path / "model")
    os.makedirs(out)
    _fill(out, "old")
    with output_dir(out, overwrite=True) as tmp:
        _fill(tmp, "new")
    assert _state(out) == "new"
    _no_leftovers(tmp_path)


_WRITER = textwrap.dedent("""
    import os, sys, types
    # The package's __init__ imports TensorFlow; files.py needs only errors.py.
    package = types.ModuleType("keras_bert_zoo")
    package.__path__ = [os.path.join(sys.argv[2], "keras_bert_zoo")]
    sys.modules["keras_bert_zoo"] = package
    from keras_bert_zoo.files import output_dir
    out = sys.argv[1]
    for round in range(1_000_000):
        with output_dir(out, overwrite=True) as tmp:
            for i in range(20):
                with open(os.path.join(tmp, f"part{i:02d}.txt"), "w") as f:
                    f.write(f"v{round}\\n" * 100)
            with open(os.path.join(tmp, "DONE"), "w") as f:
                f.write(f"v{round}")
        print(round, flush=True)
""")


def test_a_kill_at_any_moment_leaves_old_or_new(tmp_path):
    """A writer replacing its output in a loop is SIGKILLed at random moments; `out` is always one
    complete version (the previous or the next), never a mix, never missing."""
    import random

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = str(tmp_path / "model")
    os.makedirs(out)
    _fill(out, "v-start")
    rng = random.Random(0)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, out, repo], stdout=subprocess.PIPE, env=env)
        proc.stdout.readline()  # at least one full replacement happened
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        version = _state(out)
        assert version.startswith("v"), version
    # A kill leaves at most a hidden staging directory beside `out`, never inside it.
    assert all(n.startswith(".model.") for n in os.listdir(tmp_path) if n != "model")


def test_output_file_is_atomic(tmp_path):
    path = str(tmp_path / "metrics.json")
    with output_file(path) as tmp:
        with open(tmp, "w") as f:
            f.write("{}")
    assert open(path).read() == "{}"
    with pytest.raises(OutputExistsError):
        with output_file(path):
            pass
    with pytest.raises(ZeroDivisionError):
        with output_file(path, overwrite=True) as tmp:
            with open(tmp, "w") as f:
                f.write('{"half": ')
            raise ZeroDivisionError("the run fails half-way through its write")
    assert open(path).read() == "{}"
    write_text(path, "new")  # the internal writer replaces
    assert open(path).read() == "new"
    _no_leftovers(tmp_path)


def test_check_output_kinds(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="is an existing file, not a directory"):
        check_output(str(tmp_path / "f"), overwrite=True)
    with pytest.raises(OutputError, match="is an existing directory; give a file path"):
        check_output(str(tmp_path), overwrite=True, kind="file")
    with pytest.raises(OutputError, match="is a file, not a directory"):
        check_output(str(tmp_path / "f" / "sub" / "out"))
    assert check_output(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" / "deeper")


def test_replace_dir_into_a_new_place(tmp_path):
    new = tmp_path / "new"
    new.mkdir()
    (new / "a").write_text("1")
    replace_dir(str(new), str(tmp_path / "dest"))
    assert (tmp_path / "dest" / "a").read_text() == "1" and not new.exists()
