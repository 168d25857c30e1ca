"""Every error a user can cause is a typed `keras_bert_zoo.errors` error (issue #25).

An AST scan of every module in `keras_bert_zoo/`: a `raise` of a builtin `ValueError`,
`TypeError`, `KeyError` or `RuntimeError` fails the test, so the `bert-zoo` command never
falls back to the generic exit code (or a traceback) for a mistake the user made. The few
that stay bare are listed in `ALLOWED` with the reason; an entry that no longer matches a
raise fails too, so the list cannot go stale.
"""

import ast
import os

import pytest

import keras_bert_zoo

BUILTINS = {"ValueError", "TypeError", "KeyError", "RuntimeError"}
PACKAGE = os.path.dirname(os.path.abspath(keras_bert_zoo.__file__))
ROOT = os.path.dirname(PACKAGE)

# "path:function" (the function's dotted name in its module, "<module>" at the top level,
# "*" for every function of the file) -> why the raise stays a builtin.
ALLOWED = {
    "keras_bert_zoo/models/task.py:default_optimizer": (
        "internal: `import keras_bert_zoo.models.task` runs keras_bert_zoo/__init__.py first, which "
        "imports keras_bert_zoo.training and registers the optimizer, so only a broken package gets here"
    ),
    "keras_bert_zoo/preprocessing/tokenizer.py:BertTokenizer.token_to_id": (
        "the mapping protocol: an unknown token is a KeyError, as `dict[token]` (callers catch it)"
    ),
    "keras_bert_zoo/models/loading.py:_hook": (
        "internal: the hooks are registered by `import keras_bert_zoo`, so only a broken package gets here"
    ),
    "keras_bert_zoo/tasks/registry.py:_discover": (
        "internal: two task modules of this package declaring one name is a bug of the package"
    ),
}


def _raised_name(node):
    """`ValueError` for `raise ValueError(...)` or `raise ValueError`; None otherwise."""
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return target.id if isinstance(target, ast.Name) else None


def bare_raises(path):
    """`(function, line, class)` for every raise of a builtin in BUILTINS in one module."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, scope + [child.name])
                continue
            if isinstance(child, ast.Raise) and child.exc is not None and _raised_name(child) in BUILTINS:
                found.append((".".join(scope) or "<module>", child.lineno, _raised_name(child)))
            visit(child, scope)

    visit(tree, [])
    return found


def scan(package=PACKAGE):
    """`{"path:function": [(line, class), ...]}` over every module of the package."""
    hits = {}
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(package)).replace(os.sep, "/")
                for function, line, cls in bare_raises(path):
                    hits.setdefault(f"{rel}:{function}", []).append((line, cls))
    return hits


def _allowed(key):
    path = key.split(":", 1)[0]
    return key in ALLOWED or f"{path}:*" in ALLOWED


def test_no_bare_builtin_raises():
    hits = scan()
    bare = [
        f"{key.split(':')[0]}:{line}: raise {cls} in {key.split(':', 1)[1]}"
        for key, where in sorted(hits.items())
        if not _allowed(key)
        for line, cls in where
    ]
    assert not bare, (
        "raise the keras_bert_zoo.errors class instead (UsageError for a flag or argument, "
        "ArgumentTypeError for a wrong type, InvalidInputError for bad data, CheckpointError for a "
        "bad checkpoint), or list a genuine internal check in ALLOWED with the reason:\n" + "\n".join(bare)
    )


def test_allow_list_is_not_stale():
    hits = scan()
    files = {key.split(":", 1)[0] for key in hits}
    stale = [
        key
        for key in ALLOWED
        if (key.endswith(":*") and key[:-2] not in files) or (not key.endswith(":*") and key not in hits)
    ]
    assert not stale, f"these ALLOWED entries match no bare raise any more; remove them: {stale}"


def test_allow_list_reasons():
    assert all(isinstance(reason, str) and reason.strip() for reason in ALLOWED.values())


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f():\n    raise ValueError('x')\n", [("f", 2, "ValueError")]),
        ("class A:\n    def g(self):\n        raise TypeError\n", [("A.g", 3, "TypeError")]),
        ("raise KeyError('k')\n", [("<module>", 1, "KeyError")]),
        ("def f():\n    def inner():\n        raise RuntimeError('r')\n", [("f.inner", 3, "RuntimeError")]),
        ("from keras_bert_zoo.errors import UsageError\nraise UsageError('u')\n", []),
        ("try:\n    pass\nexcept ValueError:\n    raise\n", []),  # a re-raise keeps the caught class
    ],
)
def test_scanner_finds_bare_raises(tmp_path, source, expected):
    path = tmp_path / "module.py"
    path.write_text(source)
    assert bare_raises(str(path)) == expected
