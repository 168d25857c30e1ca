"""One interpreter where keras_bert_zoo cannot be imported, shared by the SavedModel tests.

Each export test checks that its SavedModel serves in a process that has only tensorflow and
tensorflow_text, as a serving machine. Starting such a process costs a TensorFlow import
(10-20 s quiet, a minute on a loaded 2-core host) and seven tests need one, so the first call
starts it and every call after sends its script there. Every script still runs the check that
`keras_bert_zoo` is not importable and asserts it is not in `sys.modules`; a script that raises
fails its test with the traceback, and the process's stdout is each script's own.
"""

import atexit
import json
import os
import selectors
import subprocess
import sys
import tempfile
import textwrap

from tests.helpers import REPO_ROOT

# Runs in each script's own globals: the package is installed editable, so drop its import hook
# and the repo from the path, then prove the package cannot be imported.
PRELUDE = textwrap.dedent(f"""
    import sys
    sys.meta_path[:] = [f for f in sys.meta_path if "keras_bert_zoo" not in repr(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "keras_bert_zoo" not in repr(h)]
    sys.path[:] = [p for p in sys.path if "keras_bert_zoo" not in p and p not in ("", {REPO_ROOT!r})]
    sys.path_importer_cache.clear()
    try:
        import keras_bert_zoo  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit("keras_bert_zoo is importable in the fresh process; the test would prove nothing")
""")

# The server: one JSON request a line on stdin ({"code", "cwd"}), one JSON reply a line on the
# stdout it started with ({"ok", "stdout", "error"}); scripts print into a buffer of their own.
SERVER = PRELUDE + textwrap.dedent("""
    import contextlib, io, json, os, traceback
    replies = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        os.chdir(request["cwd"])
        out, ok, error = io.StringIO(), True, ""
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(request["code"], "<script>", "exec"), {"__name__": "__main__"})
        except BaseException:  # SystemExit included: the test gets it, the server goes on
            ok, error = False, traceback.format_exc()
        replies.write(json.dumps({"ok": ok, "stdout": out.getvalue(), "error": error}) + "\\n")
        replies.flush()
""")

_server = None
_stderr = None  # a file, not a pipe: nothing drains a pipe between requests, and a full one would hang


def _start():
    global _server, _stderr
    _stderr = tempfile.TemporaryFile("w+")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    _server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=_stderr,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    atexit.register(_stop, _server)


def _stop(server):
    if server.poll() is None:
        server.kill()
    server.wait()


def stop():
    """Ends the shared process (~600 MB resident once it has served the export tests); the next
    `run_serving_script` would start a new one. `tests/export/conftest.py` calls it when the
    export tests are done, so the rest of the run does not carry it."""
    global _server, _stderr
    if _server is not None:
        _stop(_server)
        _stderr.close()
        _server = _stderr = None


def run_serving_script(script, cwd, timeout=600):
    """Runs `script` (Python source, dedented here) with `cwd` as working directory in the shared
    process without keras_bert_zoo; returns what it printed. A failing script fails the test."""
    if _server is None or _server.poll() is not None:
        _start()
    code = PRELUDE + textwrap.dedent(script)
    _server.stdin.write(json.dumps({"code": code, "cwd": str(cwd)}) + "\n")
    _server.stdin.flush()
    with selectors.DefaultSelector() as selector:
        selector.register(_server.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout)
    line = _server.stdout.readline() if ready else ""
    if not line:  # died or hung: its stderr says why
        _stop(_server)
        _stderr.seek(0)
        raise AssertionError(f"the serving process gave no answer in {timeout} s:\n{_stderr.read()[-3000:]}")
    reply = json.loads(line)
    assert reply["ok"], reply["error"][-3000:]
    return reply["stdout"]
