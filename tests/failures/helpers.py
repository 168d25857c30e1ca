"""What every failure case checks: exit code, one error line, no traceback, nothing written."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

from keras_bert_zoo.cli import main

ERROR_LINE = re.compile(r"^bert-zoo( [\w-]+)*: error: \S")


def tree_hash(path):
    """A digest of every name, mode and byte under `path` (hidden files included); None if absent."""
    if not os.path.lexists(path):
        return None
    digest = hashlib.sha256()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            digest.update(f.read())
        return digest.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            digest.update(f"{rel}\0{st.st_mode:o}\0".encode())
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def run_cli(argv, capsys):
    """`bert-zoo ARGV` in this process: `(exit code, stdout, stderr)`."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_failure(code, err, expected_code, pattern):
    """The documented exit code, and stderr ends in exactly one `bert-zoo ...: error: ...` line matching `pattern`."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.match(line)]
    assert len(errors) == 1 and lines[-1] == errors[0], f"expected one final error line, got:\n{err}"
    assert re.search(pattern, errors[0]), f"{pattern!r} not in {errors[0]!r}"
    assert code == expected_code, (code, err)
    return errors[0]


def run_bert_zoo(argv, timeout=240):
    """The real `bert-zoo` console script in a subprocess: `(exit code, stdout, stderr)`."""
    script = shutil.which("bert-zoo")
    command = [script] if script else [sys.executable, "-m", "keras_bert_zoo.cli"]
    env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(command + [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env)
    return done.returncode, done.stdout, done.stderr


FLAG = re.compile(r"(?<![\w`-])--[a-z][\w-]*|(?<=`)--[a-z][\w-]*")
NAMED_VERB = re.compile(r"`bert-zoo ([\w-]+)(?: ([a-z]+))?[^`]*`")


def _options(argv):
    """The option strings `bert-zoo ARGV[0] [TASK]` accepts."""
    import argparse

    from keras_bert_zoo.cli import build_parser

    parser = build_parser(argv)
    for word in argv[:2]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        parser = sub.choices[word]
    return {o for a in parser._actions for o in a.option_strings}


def check_suggested_flags(argv, line):
    """Every `--flag` an error line suggests exists on the verb that printed it, unless the line
    names the verb it belongs to (`` `bert-zoo finetune qa --version-2-with-negative` ``)."""
    argv = [str(a) for a in argv]
    own = _options(argv)
    elsewhere = set()
    for verb, task in NAMED_VERB.findall(line):
        elsewhere |= _options([verb, task] if task else [verb])
    wrong = sorted({f for f in FLAG.findall(line) if f not in own and f not in elsewhere})
    assert not wrong, f"the error suggests {wrong}, which `bert-zoo {' '.join(argv[:2])}` does not have: {line}"


def check_case(root, args, code, pattern, capsys):
    """One failure-table case: `bert-zoo ARGS` fails as documented (`check_failure`), every flag
    its line suggests exists (`check_suggested_flags`), and nothing under `root` changed."""
    before = tree_hash(root)
    exit_code, _, err = run_cli(args, capsys)
    check_suggested_flags(args, check_failure(exit_code, err, code, pattern))
    assert tree_hash(root) == before, "the failed run changed files"
