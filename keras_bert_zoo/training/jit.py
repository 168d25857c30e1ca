"""`jit_compile="auto"`: XLA or not for a train step, decided by measuring it on this machine.

One rule for every training path of the package (the jobs' loop and `model.fit`):

1. `True` / `False` are kept, except where they cannot work (XLA under multi-worker
   collectives on a CPU: `UsageError`); a TPU always compiles.
2. `"auto"` never picks XLA where its kernels are missing or its programs would not be
   reused: multi-worker training without GPUs (XLA_CPU has no kernel for
   `CollectiveGatherV2` / all-reduce), bf16 on a CPU (no bf16 matmul kernels in XLA's
   CPU backend; oneDNN has them), batches of varying shapes (every width compiles a
   program), and runs too short for a compile of tens of seconds to pay back.
3. Otherwise it times both: the model's own `train_step` compiled each way, on one real
   batch, a few interleaved steps each (the variables are restored afterwards, so the
   run trains exactly as if nothing had been measured), and keeps XLA only when it is
   clearly faster. On a CPU this matters: the same BERT pretraining step was 8-18x slower
   under XLA on an AVX-512 machine and 1.2x slower on an AVX2 one (docs/decisions.md,
   "bf16 training on CPU"). The decision is remembered per machine and path in
   `~/.cache/keras_bert_zoo/jit_choices.json` (`BERT_ZOO_JIT_CACHE` moves it; `off`
   measures every time), so only the first run of a kind pays for the timing.

Every decision is printed in one line saying what was chosen and why.

Examples:
>>> import keras, numpy as np
>>> from keras_bert_zoo.training.jit import choose_jit_compile
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> batch = (np.ones((8, 4), "float32"), np.ones((8, 1), "float32"))
>>> choice = choose_jit_compile(model, batch, "auto", steps=10, log=None)
>>> bool(choice), choice.reason
(False, 'a run of 10 steps is too short for an XLA compile to pay back')
>>> bool(choose_jit_compile(model, batch, True, log=None))
True
"""

import dataclasses
import hashlib
import json
import os
import statistics
import time

from keras_bert_zoo import hardware
from keras_bert_zoo.errors import UsageError

__all__ = [
    "MIN_STEPS",
    "MARGIN",
    "JitChoice",
    "static_rule",
    "resolve_jit_compile",
    "time_train_steps",
    "path_key",
    "choose_jit_compile",
]

# Below this, "auto" does not time: compiling bert_tiny's pretraining step with XLA took 20-40 s
# on a 2-core CPU, and timing compiles both kinds; at the 30% gain XLA gave bert_tiny on an AVX2
# machine (226 vs 335 ms/step) that pays back after some 400-600 steps.
MIN_STEPS = 1000
_TIMED_STEPS = 3  # interleaved timed steps of each kind, after one compiling step each
MARGIN = 0.95  # XLA is kept only when at least 5% faster: a resumed run compiles it again


@dataclasses.dataclass
class JitChoice:
    """What `choose_jit_compile` decided: `bool(choice)` is the `jit_compile` value.

    Attributes:
        enabled: bool, XLA on or off.
        reason: str, why, in words (printed).
        seconds: `{"xla": s, "plain": s}` per step when measured (or remembered), else {}.
        source: `"flag"`, `"rule"`, `"measured"` or `"remembered"`.
    """

    enabled: bool
    reason: str
    seconds: dict = dataclasses.field(default_factory=dict)
    source: str = "rule"

    def __bool__(self):
        return self.enabled

    def describe(self):
        return f"jit_compile: {'XLA' if self.enabled else 'no XLA'} ({self.reason})"


def _accelerators():
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))


def _strategy_kind(strategy):
    """`"tpu"`, `"multi_worker"`, `"mirrored"` or `"default"` from a name or a strategy object."""
    if strategy is None or isinstance(strategy, str):
        return strategy or "default"
    name = type(strategy).__name__
    if "TPU" in name:
        return "tpu"
    if "MultiWorker" in name or "CollectiveAllReduce" in name:
        return "multi_worker"
    return "mirrored" if strategy.num_replicas_in_sync > 1 else "default"


def static_rule(jit_compile, mixed_precision="none", strategy="default", steps=None, fixed_shapes=True):
    """The part of the rule that needs no timing: a `JitChoice`, or None ("measure it").

    >>> from keras_bert_zoo.training.jit import static_rule
    >>> static_rule("auto", strategy="multi_worker").enabled   # on a machine without GPUs
    False
    >>> static_rule(False).reason
    'jit_compile=False was asked for'
    """
    if not (jit_compile is True or jit_compile is False or jit_compile == "auto"):  # bool("false") is True
        raise UsageError(f"jit_compile={jit_compile!r}; use True, False or 'auto'.")
    kind = _strategy_kind(strategy)
    if kind == "tpu":
        return JitChoice(True, "a TPU runs XLA programs only")
    accelerators = _accelerators()
    if kind == "multi_worker" and not accelerators:
        if jit_compile is True:
            raise UsageError(
                "--jit-compile true cannot run under --strategy multi_worker on CPUs: XLA's CPU "
                "backend has no kernels for the cross-worker collectives (CollectiveGatherV2); "
                "use --jit-compile auto or false."
            )
        return JitChoice(False, "multi-worker on CPUs: XLA_CPU has no kernels for the collectives")
    if jit_compile != "auto":  # True or False (checked above)
        return JitChoice(bool(jit_compile), f"jit_compile={jit_compile} was asked for", source="flag")
    if mixed_precision == "bf16" and not accelerators:
        return JitChoice(False, "bf16 on a CPU: XLA has no bf16 matmul kernels there, oneDNN has")
    if not fixed_shapes:
        return JitChoice(False, "batches of varying shapes: XLA would compile a program per shape")
    if steps is not None and steps < MIN_STEPS:
        return JitChoice(False, f"a run of {steps} steps is too short for an XLA compile to pay back")
    return None


def resolve_jit_compile(jit_compile, mixed_precision="none", strategy="default", steps=None, fixed_shapes=True):
    """The `jit_compile` rule's decision when it needs no timing: True, False, or `"auto"` (time it).

    The rule is this module's (`choose_jit_compile` measures what this leaves as
    `"auto"`): a TPU always compiles; `"auto"` is never XLA for
    multi-worker training on CPUs (no XLA_CPU kernels for the collectives), for bf16 on
    a CPU (XLA's CPU backend has no bfloat16 matmul kernels, oneDNN uses the CPU's
    AVX-512 BF16 / AMX instructions: docs/decisions.md, "bf16 training on CPU"), for
    batches of varying shapes, or for runs shorter than `MIN_STEPS` steps.

    >>> from keras_bert_zoo.training.jit import resolve_jit_compile
    >>> resolve_jit_compile("auto", "none", steps=1000)
    'auto'
    >>> resolve_jit_compile(False, "bf16")
    False
    """
    choice = static_rule(jit_compile, mixed_precision, strategy, steps, fixed_shapes)
    return "auto" if choice is None else choice.enabled


def time_train_steps(model, batch, timed_steps=_TIMED_STEPS):
    """Seconds per `train_step` with and without XLA on `batch`: `{"xla", "plain", "compile_xla", "compile_plain"}`.

    The model (compiled, optimizer included) is stepped for real and then restored:
    weights, optimizer slots and step counter, dropout seed states and metrics get
    back their values, so the measurement leaves no trace on the run.
    """
    import tensorflow as tf

    from keras_bert_zoo.keras_compat import symbolic_build
    from keras_bert_zoo.training.strategies import distribute_batch

    strategy = model.distribute_strategy
    with strategy.scope():
        if not model.built or not model.optimizer.built:
            symbolic_build(model, batch)
            model.optimizer.build(model.trainable_variables)
    state = list(model.variables) + list(model.optimizer.variables) + list(model.metrics_variables)
    saved = [v.numpy() for v in state]

    def make(jit):
        inner = tf.function(model.train_step, jit_compile=jit, reduce_retracing=True)
        return tf.function(lambda data: strategy.run(inner, args=(data,)))

    data = distribute_batch(strategy, batch)
    steps, seconds, compile_seconds = {}, {"xla": [], "plain": []}, {}
    for name, jit in (("plain", False), ("xla", True)):
        steps[name] = make(jit)
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, steps[name](data))
        compile_seconds[name] = time.perf_counter() - start
    for _ in range(timed_steps):  # interleaved, so a change of load hits both alike
        for name in ("plain", "xla"):
            start = time.perf_counter()
            out = steps[name](data)
            tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
            seconds[name].append(time.perf_counter() - start)
    for variable, value in zip(state, saved, strict=True):
        variable.assign(value)
    return {
        "xla": statistics.median(seconds["xla"]),
        "plain": statistics.median(seconds["plain"]),
        "compile_xla": compile_seconds["xla"],
        "compile_plain": compile_seconds["plain"],
    }


def _cache_path():
    where = os.environ.get("BERT_ZOO_JIT_CACHE", "")
    if where.lower() == "off":
        return None
    return where or os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_zoo", "jit_choices.json")


def _machine_key():
    import platform

    import tensorflow as tf

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = cpu or next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    flags = " ".join(sorted(x for x in hardware.cpu_flags() if x.startswith(("avx", "amx", "fma"))))
    return f"{cpu}|{flags}|{os.cpu_count()} cpus|tf {tf.__version__}"


def path_key(model, batch, strategy):
    """The training path: model architecture and task, batch shapes and dtypes, precision, replicas."""
    import keras
    import tensorflow as tf

    config = {
        "class": type(model).__name__,
        "backbone": getattr(getattr(model, "backbone", None), "get_config", lambda: {})(),
        "params": int(model.count_params()),
        "batch": [f"{tuple(t.shape)}:{t.dtype.name}" for t in tf.nest.flatten(batch) if hasattr(t, "shape")],
        "policy": keras.config.dtype_policy().name,
        "replicas": model.distribute_strategy.num_replicas_in_sync,
        "strategy": _strategy_kind(strategy),
    }
    return hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _remembered(key):
    path = _cache_path()
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get(key)
    except (OSError, ValueError):
        return None  # a damaged cache is measured again, never an error


def _remember(key, entry):
    path = _cache_path()
    if not path:
        return
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        entries = {}
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                entries = json.load(f)
        entries[key] = entry
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # a read-only home: the next run measures again


def choose_jit_compile(
    model, batch, jit_compile="auto", *, mixed_precision="none", strategy=None, steps=None, fixed_shapes=True, log=print
):
    """XLA or not for `model`'s train step on batches like `batch`: the package's one rule.

    Args:
        model: a compiled Keras model (optimizer set), in its strategy's scope if any.
        batch: one real `(x, y)` batch (global; split over local replicas here).
        jit_compile: `True`, `False` or `"auto"` (see the module docstring).
        mixed_precision: `"none"`, `"bf16"` or `"fp16"`.
        strategy: a strategy name or object (default: the model's).
        steps: how many steps the run will take (None: unknown, long).
        fixed_shapes: False when batches vary in shape (bucketing): no XLA under "auto".
        log: where the one-line decision goes (`print`; None: silent).

    Returns:
        a `JitChoice` (`bool(choice)` is the value for `model.jit_compile`).
    """
    strategy = model.distribute_strategy if strategy is None else strategy
    choice = static_rule(jit_compile, mixed_precision, strategy, steps, fixed_shapes)
    if choice is None:
        key = f"{_machine_key()}|{path_key(model, batch, strategy)}"
        entry = _remembered(key)
        if entry is not None:
            choice = JitChoice(entry["xla"] < MARGIN * entry["plain"], "", entry, "remembered")
        else:
            entry = time_train_steps(model, batch)
            _remember(key, entry)
            choice = JitChoice(entry["xla"] < MARGIN * entry["plain"], "", entry, "measured")
        how = "timed at start-up" if choice.source == "measured" else "timed by an earlier run on this machine"
        choice.reason = f"{how}: {1000 * entry['xla']:.0f} ms/step with XLA, {1000 * entry['plain']:.0f} without"
    if log:
        log(choice.describe(), flush=True) if log is print else log(choice.describe())
    return choice
