"""serving's reporting: each side at its best configuration on each figure, the table of a run
(`OUT/serving.json`) and its record `benchmarks/results/serving.HOSTKIND.json`. Not a benchmark (`run.py serving`
is).
"""

import json

from common import write_result


def best_of(figures, names):
    """The best of `names`' figures on each measure, and which configuration gave it."""
    pick = {"throughput": max, "p50_ms": min, "p99_ms": min}
    best = {key: choose(figures[n][key] for n in names) for key, choose in pick.items()}
    best["configs"] = {key: choose(names, key=lambda n, k=key: figures[n][k]) for key, choose in pick.items()}
    return best


def sides_at_best(figures):
    """(ours, HF) each at its best configuration on each figure: few threads win at batch 1 (a
    small matmul does not pay for a second thread's hand-off), more at batch 64."""
    return (
        best_of(figures, [n for n in figures if n.startswith("ours")]),
        best_of(figures, [n for n in figures if n.startswith("hf")]),
    )


def print_table(record):
    print(
        f"\n| task | ours sentences/s (batch {record['batch_size']}) | HF best | ours/HF | ours p50 / p99 ms "
        "(batch 1) | HF best p50 / p99 ms | HF p50 / ours p50 |"
    )
    print("|---|---|---|---|---|---|---|")
    for task, t in record["tasks"].items():
        o, h = sides_at_best(t["figures"])
        print(
            f"| {task} | {o['throughput']:.1f} | {h['throughput']:.1f} | {o['throughput'] / h['throughput']:.2f}x | "
            f"{o['p50_ms']:.1f} / {o['p99_ms']:.1f} | {h['p50_ms']:.1f} / {h['p99_ms']:.1f} | "
            f"{h['p50_ms'] / o['p50_ms']:.2f}x |"
        )


def config_name(config):  # "hf_1_threads" -> "HF transformers, 1 thread"
    side, n = config.split("_")[:2]
    return f"{'ours' if side == 'ours' else 'HF transformers'}, {n} thread{'s' if int(n) > 1 else ''}"


def record_result(detail, directory=None):
    """`benchmarks/results/serving.HOSTKIND.json` (for `run.py report`; `directory` overrides the folder)
    from a run's `OUT/serving.json`, each side at its best configuration of the run's figures."""
    with open(detail, encoding="utf-8") as f:
        record = json.load(f)
    rows, loads = [], []
    # The run's thread settings in the command, so it reproduces the run whatever the defaults are now.
    threads, inter_op = record.get("threads"), record.get("tf_inter_op")
    command = record["command"]
    for flag, value in (("--threads", threads), ("--tf-inter-op", inter_op)):
        if value is not None and flag not in command:
            command += f" {flag} {' '.join(map(str, value)) if isinstance(value, list) else value}"
    inter = f"TF inter-op {inter_op}" if inter_op else "TF inter-op = intra-op"
    for task, t in record["tasks"].items():
        o, h = sides_at_best(t["figures"])
        loads += [x for runs in t["rounds"].values() for r in runs for x in (r["load_before"], r["load_after"])]
        what = "SST-2 dev, MiniLM classifier" if task == "classify" else "CoNLL eng.testa, MiniLM tagger"
        for key, title, unit, higher in (
            ("throughput", f"batch {record['batch_size']}", "sentences/s", True),
            ("p50_ms", "batch 1 p50", "ms", False),
            ("p99_ms", "batch 1 p99", "ms", False),
        ):
            each = "; ".join(f"{config_name(n)}: {f[key]:.1f}" for n, f in t["figures"].items())
            rows.append(
                {
                    "what": f"serving {task}: {what}, {title}",
                    "unit": unit,
                    "ours": o[key],
                    "peer": h[key],
                    "peer_name": f"{config_name(h['configs'][key])} (its best)",
                    "higher_is_better": higher,
                    "note": f"each side at its best thread setting, ours here "
                    f"{config_name(o['configs'][key]).split(', ')[1]} ({inter}); every setting: {each}",
                }
            )
    return write_result(
        "serving",
        rows,
        command=command,
        source=detail,
        started=record["started"],
        load=[min(loads), max(loads)] if loads else None,
        commit=record.get("commit"),
        directory=directory,
        machine_info=record.get("machine_after", ""),
    )  # "" before 54284f9: unknown
