"""Fine-tuning speed per task on real data: ours vs HF transformers on the same recipe, side by side.

For each task, the same first N real training examples go through:

- ours: the pipeline `keras_bert_zoo.finetune` runs, call for call: the task's `read_data`,
  `make_preprocessor`, `build_model` (the real all-MiniLM-L6-v2 checkpoint), its training
  `dataset(...)` with the task's default batching (tag and qa: packed rows; also
  `batching="bucketed"`, random batches padded to their longest as HF's; tag: `"by_length"`),
  `create_optimizer` + `compile()` (no XLA, finetune's default), and the library's training
  loop (`keras_bert_zoo.training.loop.train`, with finetune's `StepLog`); one round is one
  epoch over the N examples, timed as finetune times its steps (`StepLog.train_seconds`:
  each step from fetching its batch to its logged loss);
- HF: transformers `BertForSequenceClassification` / `BertForTokenClassification` /
  `BertForQuestionAnswering` in PyTorch (eager), HF's recipe: the fast tokenizer's features
  (classify: `truncation=True, max_length=128`; tag: run_ner.py's first-piece labels,
  `benchmarks/conll.py`; qa: run_qa.py's windows, `benchmarks/squad.py`), random batches
  (`DataLoader(shuffle=True)`) padded to the batch's longest, torch `AdamW` + linear
  warm-up/decay + clipping at 1.0 (`hf_loop.hf_optimizer`, the loop of `hf_loop.hf_train`);
  one round is one epoch over the same N examples, timed end to end (batches included).
  Rows at 1 thread (whole epochs) and at 2 threads (`torch.set_num_threads(2)`; only the
  first `--hf-steps` random batches of each round: on this shared 2-core machine
  PyTorch's 2-thread OpenMP regions wait on descheduled threads and a step can take a
  minute). 1 thread is HF's faster setting here, so the ratio against it is the honest one.

Recipe (both): lr 5e-5, batch 32, AdamW (epsilon 1e-6, weight decay 0.01 not on biases or
LayerNorm weights), 10% linear warm-up then linear decay, clip 1.0; classify SST-2 at length
128, tag CoNLL-2003 (`eng.train`, IOB1 read as IOB2) at 128, qa SQuAD v1.1 at 256 with 128
pieces of overlap (HF's `stride=128`) and questions of at most 64 pieces.

Rounds are interleaved (ours, HF 2 threads, HF 1 thread, ours, ...) in ONE process
(TensorFlow 2 intra-op / 1 inter-op threads; the frameworks never run at once), so load
from other jobs hits all systems alike; the ratio per task is the median of the per-round
ratios. Before timing, every system runs one untimed round (ours: traces every bucket shape
of an epoch). Examples are sentences (classify, tag: windows, which at 128 pieces are the
sentences but for a handful) and windows (qa), never padded tokens; the padding each side
pays (padded / real tokens) is reported too.

    python benchmarks/run.py finetune_speed                      # all three tasks (each in its own process)
    python benchmarks/run.py finetune_speed --task tag --rounds 2 --examples 128   # one task, small
    python benchmarks/run.py finetune_speed --table              # the table of the last run

Writes `OUT/TASK.json` per task, `OUT/finetune_speed.json` (all, with the command, dates,
load, commit, versions) and the summary record `benchmarks/results/finetune_speed.HOSTKIND.json`
read by `run.py report`; prints a markdown table.
"""

import argparse
import os
import statistics
import subprocess
import time

import common
from common import (
    git_commit,
    now,
    read_json,
    set_tf_threads,
    uptime,
    versions,
    write_json,
)
from suite import finetune_speed_hf, finetune_speed_ours, finetune_speed_report

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# PyTorch's OpenMP workers spin while waiting by default; on a shared 2-core machine they then
# fight TensorFlow's threads and HF on 2 threads ran 20-40x slower (benchmarks/backbone_speed.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

DATA = common.DATA
RECIPE = dict(
    learning_rate=5e-5, batch_size=32, warmup_ratio=0.1, weight_decay=0.01, adam_epsilon=1e-6, clip_norm=1.0, seed=0
)
# task -> data, length, finetune's task options, default examples per round, batchings of ours, HF class.
TASKS = {
    "classify": dict(
        data="SST-2",
        train=os.path.join(DATA, "sst2", "train.tsv"),
        sequence_length=128,
        options={},
        examples=512,
        batchings=("auto",),
        hf_class="BertForSequenceClassification",
        unit="sentences",
    ),
    "tag": dict(
        data="CoNLL-2003",
        train=os.path.join(DATA, "conll2003", "eng.train"),
        sequence_length=128,
        options={},
        examples=256,
        batchings=("auto", "bucketed", "by_length"),
        hf_class="BertForTokenClassification",
        unit="sentences",
    ),
    "qa": dict(
        data="SQuAD v1.1",
        train=os.path.join(DATA, "squad", "train.json"),
        sequence_length=256,
        # 128 questions, not 32: the first 32 share a few long passages (windows of ~250 pieces,
        # which no packing can pair), unlike the training set as a whole.
        options=dict(doc_stride=128, stride_mode="overlap", max_query_length=64),
        examples=128,
        batchings=("auto", "bucketed"),
        hf_class="BertForQuestionAnswering",
        unit="windows",
        # Batch 16, not the recipe's 32: with both frameworks in one process, 32 x 256 was
        # killed for memory on this shared machine (as in `squad.py --only speed`); the
        # work per window is the same.
        batch_size=16,
    ),
}


def batch_size(task):
    return TASKS[task].get("batch_size", RECIPE["batch_size"])


# --- one task, interleaved rounds --------------------------------------------------------------------------
def run_task(task, examples, rounds, threads, out, xla=False, hf_steps=None, coarse=True):
    """Interleaved rounds of every system on `task`'s first `examples` examples; writes
    `OUT/TASK.json`. `hf_steps` caps HF's rounds on `threads` threads at that many batches
    (its 2-thread steps can take a minute each on this loaded machine); its rate is then
    over the batches it ran (random batches of the same examples)."""
    set_tf_threads(threads)
    import keras
    import tensorflow as tf
    import torch
    import transformers

    torch.set_num_threads(threads)
    cfg = TASKS[task]
    load_before, uptime_before, started = os.getloadavg(), uptime(), now()
    systems = build_systems(task, examples, threads, rounds + 1, xla, hf_steps, coarse)
    warmup = warm_up(task, systems)
    times, counts = timed_rounds(task, systems, rounds)
    result = {
        "task": task,
        "data": cfg["data"],
        "train_file": cfg["train"],
        "first_examples": examples,
        "unit": cfg["unit"],
        "sequence_length": cfg["sequence_length"],
        "options": cfg["options"],
        "recipe": RECIPE,
        "batch_size": batch_size(task),
        "order": list(systems),
        "rounds": rounds,
        "threads": threads,
        "hf_steps_cap": hf_steps,
        "systems": {},
        "tf_threads": {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        },
        "started": started,
        "date": now(),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "uptime_before": uptime_before,
        "uptime_after": uptime(),
        "git_commit": git_commit(),
        "cpus": os.cpu_count(),
        "versions": {
            "keras": keras.__version__,
            "tensorflow": tf.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    }
    add_rates(result, systems, times, counts, warmup)
    write_json(os.path.join(out, f"{task}.json"), result)
    finetune_speed_report.print_task(result)
    return result


def build_systems(task, examples, threads, total, xla, hf_steps, coarse):
    """{name: (kind, system, round function)}: ours per batching (and XLA), the tag diagnostic, HF per threads."""
    cfg = TASKS[task]
    systems = {}  # name -> (kind, system, round function)
    for batching in cfg["batchings"]:
        label = (
            "default batches" + (", packed" if task in ("tag", "qa") else "")
            if batching == "auto"
            else f'batching="{batching}"'
        )
        for jit in (False, True) if xla else (False,):
            system = finetune_speed_ours.build_ours(
                task, cfg, examples, batching, total, RECIPE, batch_size(task), jit_compile=jit
            )
            systems[f"ours ({label}{', XLA' if jit else ''})"] = (
                "ours",
                system,
                lambda s=system: finetune_speed_ours.ours_round(s),
            )
    if task == "tag" and coarse:
        system = finetune_speed_ours.build_ours(
            task, cfg, examples, "auto", total, RECIPE, batch_size(task), coarse=True
        )
        systems["diagnostic: ours, random batches cut to coarse buckets (before)"] = (
            "ours",
            system,
            lambda s=system: finetune_speed_ours.ours_round(s),
        )
    hf = finetune_speed_hf.build_hf(task, cfg, examples, total, RECIPE, batch_size(task))
    for n in sorted({threads, 1}, reverse=True):
        cap = hf_steps if n > 1 else None
        systems[f"HF {cfg['hf_class']}, {n} thread{'s' if n > 1 else ''}"] = (
            "hf",
            hf,
            lambda n=n, cap=cap: finetune_speed_hf.hf_round(hf, n, RECIPE["clip_norm"], cap),
        )
    return systems


def warm_up(task, systems):
    """{name: seconds of its warm-up}: ours traces every shape of an epoch, HF runs 2 steps."""
    warmup = {}
    for name, (kind, system, _) in systems.items():  # warm-up: ours traces every shape of an epoch
        t = time.perf_counter()
        if kind == "ours":
            finetune_speed_ours.ours_round(system)
        else:
            finetune_speed_hf.hf_round(system, 1, RECIPE["clip_norm"], max_steps=2)
        warmup[name] = time.perf_counter() - t
        print(f"{task}: warm-up {name}: {warmup[name]:.1f} s", flush=True)
    return warmup


def timed_rounds(task, systems, rounds):
    """`(times, counts)`: per system the seconds and examples of each round, the systems interleaved."""
    cfg = TASKS[task]
    times, counts = {name: [] for name in systems}, {name: [] for name in systems}
    for r in range(rounds):
        for name, (_, _, round_function) in systems.items():
            seconds, n = round_function()
            times[name].append(seconds)
            counts[name].append(n)
        print(
            f"{task}: round {r + 1}/{rounds}: "
            + ", ".join(f"{n} {counts[n][-1] / times[n][-1]:.2f}" for n in systems)
            + f" {cfg['unit']}/s; load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    return times, counts


def add_rates(result, systems, times, counts, warmup):
    """Each system's rates and, for ours, the per-round ratios to each HF row, into `result["systems"]`."""
    hf_names = [n for n in systems if systems[n][0] == "hf"]
    rates = {name: [n / t for n, t in zip(counts[name], times[name], strict=True)] for name in systems}
    for name, (kind, system, _) in systems.items():
        row = {
            "kind": kind,
            "examples_per_epoch": system["examples"],
            "steps_per_epoch": system["steps_per_epoch"],
            "round_seconds": times[name],
            "round_examples": counts[name],
            "warmup_seconds": warmup[name],
            "median_examples_per_second": statistics.median(rates[name]),
            "best_examples_per_second": max(rates[name]),
            "padded_over_real_tokens": system["padded_tokens"] / max(system["real_tokens"], 1),
        }
        if kind == "ours":
            row["examples_read"] = system["read"]
            for hf_name in hf_names:  # per-round ratio: > 1 is ours faster
                ratios = [a / b for a, b in zip(rates[name], rates[hf_name], strict=True)]
                row.setdefault("ratio_vs", {})[hf_name] = {"median": statistics.median(ratios), "per_round": ratios}
        result["systems"][name] = row


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run.py finetune_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("all", *TASKS), default="all")
    parser.add_argument(
        "--examples",
        type=int,
        default=None,
        help="first N training examples per round (default per task: "
        + ", ".join(f"{t} {c['examples']}" for t, c in TASKS.items())
        + "; qa: questions)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--hf-steps",
        type=int,
        default=2,
        help="batches per round of HF on --threads threads (its 1-thread rounds run whole epochs)",
    )
    parser.add_argument(
        "--no-coarse",
        action="store_true",
        help="tag: skip the diagnostic row of random batches cut to the coarse buckets",
    )
    parser.add_argument("--xla", action="store_true", help="also ours compiled with XLA (diagnostic rows)")
    parser.add_argument("--out", default="/tmp/bert_zoo_finetune_speed")
    parser.add_argument("--table", action="store_true", help="print the tables of the last run")
    parser.add_argument(
        "--no-record", action="store_true", help="do not write benchmarks/results/finetune_speed.HOSTKIND.json"
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    command = common.command_line("finetune_speed", argv)

    if args.table:
        for task in TASKS:
            result = read_json(os.path.join(args.out, f"{task}.json"))
            if result:
                finetune_speed_report.print_task(result)
        return
    if args.task != "all":
        run_task(
            args.task,
            args.examples or TASKS[args.task]["examples"],
            args.rounds,
            args.threads,
            args.out,
            args.xla,
            args.hf_steps,
            not args.no_coarse,
        )
        return
    run_all(args, command)


def run_all(args, command):
    """Every task, each in its own process, then `OUT/finetune_speed.json`, the tables and the record."""
    # Each task in its own process: one task's TensorFlow graphs and PyTorch memory never add to the next's.
    started, load_before, results = now(), os.getloadavg()[0], []
    for task in TASKS:
        cmd = (
            [
                *common.self_cmd("finetune_speed"),
                "--task",
                task,
                "--rounds",
                str(args.rounds),
                "--threads",
                str(args.threads),
                "--hf-steps",
                str(args.hf_steps),
                "--out",
                args.out,
            ]
            + (["--xla"] if args.xla else [])
            + (["--no-coarse"] if args.no_coarse else [])
            + (["--examples", str(args.examples)] if args.examples else [])
        )
        print(f"\n=== {task}: {' '.join(cmd)}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            print(f"{task}: FAILED (see above)", flush=True)
            continue
        results.append(read_json(os.path.join(args.out, f"{task}.json")))
    combined = {
        "command": command,
        "started": started,
        "date": now(),
        "git_commit": git_commit(),
        "loadavg": [load_before, os.getloadavg()[0]],
        "tasks": {r["task"]: r for r in results},
        "versions": versions("tensorflow", "keras", "torch", "transformers"),
    }
    path = os.path.join(args.out, "finetune_speed.json")
    write_json(path, combined)
    print("\n" + "=" * 80)
    for result in results:
        finetune_speed_report.print_task(result)
    print(f"\nresults: {path}")
    if not args.no_record and results:
        print(
            f"summary: {finetune_speed_report.write_record(finetune_speed_report.summary_rows(results), command, path, started, combined['loadavg'])}"
        )


if __name__ == "__main__":
    main()
