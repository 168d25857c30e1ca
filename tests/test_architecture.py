"""The package's shape, read from its source (ast, nothing imported).

Three rules, each with a dict of justified exceptions below; an exception that is no
longer needed fails too, so the dicts only ever shrink:

- no import cycle between modules of `keras_bert_zoo`, lazy imports inside functions
  included (a cycle that only works because one side imports late is still a cycle:
  neither module can be understood, tested or moved without the other);
- no module over `MAX_MODULE_LINES` lines;
- no function or method whose body (without its docstring) is over `MAX_BODY_LINES` lines;
- a task is one place: each task package `keras_bert_zoo/tasks/<task>/` holds its pieces,
  and no file outside it carries a word of its task in its name (`TASK_WORDS`);
- inside each task package, the data half (readers, preprocessor, windows, metrics: every
  module but `MODEL_HALF`) reaches none of the model half: neither its package's model
  modules nor `keras_bert_zoo.models` / `training` / `export` (the Keras models and layers),
  directly or through any chain of imports.

The graph has an edge `a -> b` for every `import b`, `from b import name` and
`from pkg import b` (a submodule) anywhere in `a`, relative imports resolved. Importing
`pkg.sub` also runs `pkg/__init__.py`, so `a` gets an edge to each package on the way
too, except the root `keras_bert_zoo`: its `__init__` imports the public names, so that
edge would put every module in one cycle with it (and a module's own packages, which
are already running when it is imported). A package's `__init__` that re-exports from
its submodules does import them, and gets those edges. `importlib.import_module(name)`
is not an edge: it is how a registry loads its plug-ins (`tasks.registry` its task
modules, `export.saved_model` the task registry, whose modules register their servings),
a dependency that points the other way by design.

Run `python tests/test_architecture.py` to print the graph's cycles and the long items.
"""

import ast
import pathlib
from collections import deque

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "keras_bert_zoo"
MAX_MODULE_LINES = 400
MAX_BODY_LINES = 80

# Import cycles allowed, as the set of modules of the strongly connected component -> why.
CYCLE_EXCEPTIONS = {}

# Modules allowed over MAX_MODULE_LINES (path from the repository root) -> why.
LONG_MODULES = {}

# Functions allowed a body over MAX_BODY_LINES ("path::Qualified.name") -> why.
LONG_FUNCTIONS = {}


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources():
    """{module name: (path from the repository root, parsed tree, line count)}."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found[module_name(path)] = (
            path.relative_to(ROOT).as_posix(),
            ast.parse(text, str(path)),
            len(text.splitlines()),
        )
    return found


SOURCES = _sources()


def _imported(module, node, is_package):
    """The dotted names one import statement of `module` names (modules or not)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: `.` is the package holding `module` (or `module` itself for an __init__)
        base = module.split(".")
        if not is_package:
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    return [source] + [f"{source}.{alias.name}" for alias in node.names]


def _target(name):
    """The package module `name` refers to: itself, or the module holding the attribute it names."""
    if name in SOURCES:
        return name
    parent = name.rpartition(".")[0]
    return parent if parent in SOURCES else None


def import_graph():
    """{module: {imported module: line of the first such import}} over the package's modules."""
    graph = {}
    for module, (path, tree, _) in SOURCES.items():
        is_package = path.endswith("__init__.py")
        edges = graph.setdefault(module, {})
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = _imported(module, node, is_package)
            if isinstance(node, ast.ImportFrom):
                # `from pkg import sub` imports the submodule; `from pkg import name` imports pkg.
                source, members = names[0], names[1:]
                targets = {m for m in members if m in SOURCES} or {_target(source)}
                if any(m not in SOURCES for m in members):
                    targets.add(_target(source))
            else:
                targets = {_target(name) for name in names}
            for target in targets - {None}:
                for package in _packages_on_the_way(module, target):
                    edges.setdefault(package, node.lineno)
    return graph


def _packages_on_the_way(module, target):
    """`target` and the packages whose `__init__` importing it runs: not the root, not `module`'s own."""
    parts = target.split(".")
    on_the_way = [".".join(parts[:i]) for i in range(2, len(parts))]
    names = [name for name in on_the_way if name in SOURCES and not module.startswith(name + ".")] + [target]
    return [name for name in names if name != module]


def _components(graph):
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _shortest_cycle(graph, component):
    """One shortest cycle inside `component`, as `a.py:LINE -> b.py:LINE -> ... -> a`."""
    best = None
    for start in sorted(component):
        came_from, queue = {start: None}, deque([start])
        while queue:
            node = queue.popleft()
            if start in graph[node] and (node != start):
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                path.reverse()
                if best is None or len(path) < len(best):
                    best = path
                break
            for nxt in sorted(graph[node]):
                if nxt in component and nxt not in came_from:
                    came_from[nxt] = node
                    queue.append(nxt)
    steps = [f"{SOURCES[a][0]}:{graph[a][b]} imports {b}" for a, b in zip(best, best[1:] + best[:1], strict=True)]
    return "\n    ".join(steps)


def cycle_report():
    graph = import_graph()
    return {component: _shortest_cycle(graph, component) for component in _components(graph)}


def long_modules(sources=None):
    return {path: lines for path, _, lines in (sources or SOURCES).values() if lines > MAX_MODULE_LINES}


def _body_lines(node):
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1


def long_functions(sources=None):
    found = {}

    def walk(node, path, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lines = _body_lines(child)
                if lines > MAX_BODY_LINES:
                    found[f"{path}::{name}"] = lines
                walk(child, path, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, path, prefix + child.name + ".")
            else:
                walk(child, path, prefix)

    for path, tree, _ in (sources or SOURCES).values():
        walk(tree, path, "")
    return found


def _check(found, allowed, what, describe):
    problems = [f"{describe(key, value)}" for key, value in sorted(found.items()) if key not in allowed]
    problems += [
        f"stale exception (no longer {what}; delete it): {key!r}"
        for key in sorted(allowed, key=str)
        if key not in found
    ]
    assert not problems, "\n".join(problems)


TASKS = f"{PACKAGE}.tasks"
# The modules of a task package that build, train or serve its Keras model: `model` (the
# `Task` subclass), `serving` (its `TaskServing`), `spec` (its `TaskSpec`, which names both)
# and the pretrainer's jobs (`job`: `pretrain`, `adaptation`: `continue_pretraining`).
MODEL_HALF = {"model", "serving", "spec", "job", "adaptation"}
# What the data half may not reach: the Keras models and layers and everything that runs them.
MODEL_LAYERS = tuple(
    f"{PACKAGE}.{name}" for name in ("models", "training", "export", "convert", "commands", "cli", "demo")
)
# Words naming a task (tokens of a file name, split at "_") -> the task package that owns them.
TASK_WORDS = {
    **dict.fromkeys(("tag", "tagger", "tagging", "entities", "entity", "conll"), "tagger"),
    **dict.fromkeys(("qa", "squad", "span"), "span_qa"),
    **dict.fromkeys(("choice",), "multiple_choice"),
}


def task_packages():
    """{task package: its modules (itself included)}, for every package `keras_bert_zoo.tasks.<name>`."""
    packages = {
        name
        for name, (path, _, _) in SOURCES.items()
        if path.endswith("__init__.py") and name.startswith(TASKS + ".") and name.count(".") == 2
    }
    return {package: {m for m in SOURCES if m == package or m.startswith(package + ".")} for package in packages}


def _reachable(graph, start):
    seen, queue = set(), deque([start])
    while queue:
        for nxt in graph.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def data_half_violations(graph, packages):
    """`module reaches forbidden` for each data-half module of a task package that reaches,
    through any chain of imports, a model-half module of a task package or `MODEL_LAYERS`
    (or the package root, which imports everything)."""
    model_half = {m for members in packages.values() for m in members if m.rpartition(".")[2] in MODEL_HALF}
    found = []
    for package, members in sorted(packages.items()):
        for module in sorted(members - model_half - {package}):
            bad = sorted(
                m
                for m in _reachable(graph, module)
                if m in model_half or m == PACKAGE or m.startswith(MODEL_LAYERS) and m.partition(".")[0] == PACKAGE
            )
            if bad:
                found.append(
                    f"{module} (data half) reaches {bad[:3]}: the data half of {package} "
                    f"imports nothing of its model half ({sorted(MODEL_HALF)}) nor of the models"
                )
    return found


def misplaced_task_files(paths):
    """Files (paths from the repository root) whose name carries a task word outside that task's package."""
    found = []
    for path in paths:
        parts = pathlib.PurePosixPath(path).parts
        words = set(pathlib.PurePosixPath(path).stem.split("_"))
        for word in sorted(words & set(TASK_WORDS)):
            home = f"{PACKAGE}/tasks/{TASK_WORDS[word]}"
            if not path.startswith(home + "/"):
                found.append(
                    f"{path}: its name says {word!r}, so it belongs in {home}/ ({'/'.join(parts[:-1])} "
                    "is not that task's folder)"
                )
    return found


def test_no_import_cycles():
    _check(
        cycle_report(),
        CYCLE_EXCEPTIONS,
        "a cycle",
        lambda component, path: f"import cycle among {sorted(component)}:\n    {path}",
    )


def test_modules_are_short():
    _check(
        long_modules(),
        LONG_MODULES,
        f"over {MAX_MODULE_LINES} lines",
        lambda path, lines: (
            f"{path} has {lines} lines (limit {MAX_MODULE_LINES}); split it into modules with one job each"
        ),
    )


def test_function_bodies_are_short():
    _check(
        long_functions(),
        LONG_FUNCTIONS,
        f"over {MAX_BODY_LINES} body lines",
        lambda name, lines: (
            f"{name} has a {lines}-line body without its docstring (limit "
            f"{MAX_BODY_LINES}); extract its steps into named functions"
        ),
    )


def test_the_graph_sees_lazy_relative_and_submodule_imports():
    # The rules are only as good as the graph: check it on imports of each kind the package uses.
    graph = import_graph()
    assert "keras_bert_zoo.errors" in graph["keras_bert_zoo.tasks.registry"]  # top-level `from x import name`
    assert "keras_bert_zoo.files" in graph["keras_bert_zoo.tasks.registry"]  # inside a function
    assert "keras_bert_zoo.training" in graph["keras_bert_zoo"]  # `from pkg import submodule`
    assert "keras_bert_zoo.preprocessing.preprocessor" in graph["keras_bert_zoo.preprocessing"]  # re-export
    tree = ast.parse("from . import sibling\nfrom ..models import backbone\n")
    assert _imported("keras_bert_zoo.tasks.finetuning", tree.body[0], False) == [
        "keras_bert_zoo.tasks",
        "keras_bert_zoo.tasks.sibling",
    ]
    assert _imported("keras_bert_zoo.tasks.finetuning", tree.body[1], False) == [
        "keras_bert_zoo.models",
        "keras_bert_zoo.models.backbone",
    ]
    assert _imported("keras_bert_zoo.tasks", tree.body[0], True)[0] == "keras_bert_zoo.tasks"


def test_every_task_is_a_package_with_its_model_serving_and_spec():
    packages = task_packages()
    assert sorted(p.rpartition(".")[2] for p in packages) == [
        "classifier",
        "embedder",
        "multiple_choice",
        "pretrainer",
        "span_qa",
        "tagger",
    ]
    for package, members in packages.items():
        assert {f"{package}.model", f"{package}.serving", f"{package}.spec"} <= members, package


def test_a_task_data_half_imports_nothing_of_its_model_half():
    assert data_half_violations(import_graph(), task_packages()) == []


def test_files_named_for_a_task_sit_in_its_package():
    assert misplaced_task_files([path for path, _, _ in SOURCES.values()]) == []


def test_the_task_rules_fail_when_broken():
    # A data module importing its model (through a helper), or the models, is caught; a clean one is not.
    toy = {
        f"{TASKS}.tagger": {},
        f"{TASKS}.tagger.data": {f"{TASKS}.tagger.helper": 1},
        f"{TASKS}.tagger.helper": {f"{TASKS}.tagger.model": 2},
        f"{TASKS}.tagger.model": {},
        f"{TASKS}.tagger.spec": {},
        f"{TASKS}.tagger.windows": {f"{PACKAGE}.models.backbone": 3},
        f"{TASKS}.tagger.words": {f"{PACKAGE}.preprocessing.tokenizer": 4},
    }
    packages = {f"{TASKS}.tagger": set(toy)}
    found = data_half_violations(toy, packages)
    assert [line.split()[0] for line in found] == [
        f"{TASKS}.tagger.data",
        f"{TASKS}.tagger.helper",
        f"{TASKS}.tagger.windows",
    ]
    assert misplaced_task_files(
        [
            "keras_bert_zoo/preprocessing/tag_windows.py",
            "keras_bert_zoo/metrics/squad.py",
            "keras_bert_zoo/tasks/tagger/windows.py",
            "keras_bert_zoo/preprocessing/stage.py",
            "keras_bert_zoo/models/multiple_choice.py",
        ]
    ) == [
        "keras_bert_zoo/preprocessing/tag_windows.py: its name says 'tag', so it belongs in "
        "keras_bert_zoo/tasks/tagger/ (keras_bert_zoo/preprocessing is not that task's folder)",
        "keras_bert_zoo/metrics/squad.py: its name says 'squad', so it belongs in keras_bert_zoo/tasks/span_qa/ "
        "(keras_bert_zoo/metrics is not that task's folder)",
        "keras_bert_zoo/models/multiple_choice.py: its name says 'choice', so it belongs in "
        "keras_bert_zoo/tasks/multiple_choice/ (keras_bert_zoo/models is not that task's folder)",
    ]


def test_the_checks_fail_on_a_cycle_and_on_a_stale_exception():
    toy = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}}
    assert _components(toy) == [frozenset("abc")]
    with pytest.raises(AssertionError, match="stale exception.*gone.py"):
        _check({}, {"keras_bert_zoo/gone.py": "was long"}, "long", None)


# --- benchmarks/: the same size rules ---------------------------------------------------------------------
# The benchmark scripts are read as the package is (formatted lines, bodies without docstrings), each script split
# by purpose (measuring, reporting, the HF side); at most MAX_BENCHMARK_EXCEPTIONS of each kind, each with its reason.
BENCHMARK_LONG_MODULES = {}
BENCHMARK_LONG_FUNCTIONS = {}
MAX_BENCHMARK_EXCEPTIONS = 2


def benchmark_sources():
    """{path from the repository root: (that path, parsed tree, line count)} of every script under benchmarks/."""
    found = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(ROOT).as_posix()
        found[relative] = (relative, ast.parse(text, str(path)), len(text.splitlines()))
    return found


def test_benchmark_modules_are_short():
    _check(
        long_modules(benchmark_sources()),
        BENCHMARK_LONG_MODULES,
        f"over {MAX_MODULE_LINES} lines",
        lambda path, lines: (
            f"{path} has {lines} lines (limit {MAX_MODULE_LINES}); split it by purpose (measuring, reporting, "
            "the HF side) and share what is common through benchmarks/common.py"
        ),
    )


def test_benchmark_function_bodies_are_short():
    _check(
        long_functions(benchmark_sources()),
        BENCHMARK_LONG_FUNCTIONS,
        f"over {MAX_BODY_LINES} body lines",
        lambda name, lines: (
            f"{name} has a {lines}-line body without its docstring (limit "
            f"{MAX_BODY_LINES}); extract its steps into named functions"
        ),
    )


def test_the_benchmark_rules_read_every_script_and_see_a_long_one():
    sources = benchmark_sources()
    assert {"benchmarks/run.py", "benchmarks/common.py", "benchmarks/suite/fit_speed.py"} <= set(sources)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    toy = {"benchmarks/toy.py": ("benchmarks/toy.py", ast.parse(f"def main():\n{body}\n"), MAX_MODULE_LINES + 1)}
    assert long_functions(toy) == {"benchmarks/toy.py::main": MAX_BODY_LINES + 1}
    assert long_modules(toy) == {"benchmarks/toy.py": MAX_MODULE_LINES + 1}


def test_benchmarks_have_at_most_two_exceptions_of_each_kind_each_with_a_reason():
    for exceptions in (BENCHMARK_LONG_MODULES, BENCHMARK_LONG_FUNCTIONS):
        assert len(exceptions) <= MAX_BENCHMARK_EXCEPTIONS, sorted(exceptions)
        assert all(isinstance(reason, str) and reason.strip() for reason in exceptions.values()), exceptions


if __name__ == "__main__":
    for _component, _path in cycle_report().items():
        print(f"cycle among {sorted(_component)}:\n    {_path}")
    for _name, _lines in {**long_modules(), **long_functions()}.items():
        print(f"{_lines:5d} lines  {_name}")
