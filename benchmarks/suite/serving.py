"""Serving raw text: our SavedModel (tokenizer in the graph) vs HF transformers, same weights.

Both sides serve the SAME real weights: all-MiniLM-L6-v2 with a fresh, seeded head
(2 labels for `classify`, the 9 CoNLL tags for `tag`), saved once by `save_to_preset`
(HF layout), which HF's `from_pretrained` loads as is. The run first checks that the
two sides give the same answers on the real sentences (max |probability difference|,
label / tag agreement), then measures from raw strings to the task's answer:

- classify, SST-2 dev sentences (872). Ours: `tf.saved_model.load(export)` and its
  `serving_default(text=...)` signature (labels + probabilities). HF: `AutoTokenizer`
  (fast, `padding=True`: the batch's longest, `max_length=128`) +
  `BertForSequenceClassification` under `torch.no_grad()`, softmax, argmax, label names.
- tag, CoNLL-2003 `eng.testa` sentences (words joined by spaces). Ours:
  `serving_default(text=...)` (words, tags and entity spans, all in the graph). HF:
  `AutoTokenizer(text.split(), is_split_into_words=True, padding=True)` +
  `BertForTokenClassification` under `torch.no_grad()`, argmax, one tag per word (its
  first piece). HF does less work here: no entity spans, no offsets.

Figures: sentences/s at batch 64 over all sentences (in file order), and p50 / p99
latency at batch 1 over the first `--latency-sentences`. Each configuration runs in
its own process (TensorFlow and PyTorch never share a thread pool): ours at each of
`--threads` (TF intra-op, and inter-op the same unless `--tf-inter-op`), HF at each of
`--hf-threads` (`torch.set_num_threads`). Each side's figure is its best configuration
on that figure (one thread usually wins at batch 1, two at batch 64: a small matmul
does not pay for a second thread's hand-off), the same rule for both. The rounds
alternate the order of the configurations (forward in even rounds, reversed in odd
ones) so all see the same load. Medians over rounds are reported.

    nice python benchmarks/run.py serving                       # both tasks, 3 rounds
    nice python benchmarks/run.py serving --tasks classify --rounds 1 --max-sentences 128 --latency-sentences 20
    python benchmarks/run.py serving --plan                     # the configurations of each round, nothing run
    python benchmarks/run.py serving --table                    # the table and summary of OUT/serving.json again

Writes `OUT/serving.json` (every round, the load, the machine; OUT defaults to
/tmp/bert_zoo_serving) and the summary `benchmarks/results/serving.HOSTKIND.json` that
`run.py report` reads (`--results DIR` writes it elsewhere, `--no-result` skips it).
"""

import argparse
import json
import os
import statistics
import subprocess

import common
from common import git_commit, machine_line, minilm_path, now, uptime, versions, write_json
from suite import serving_report, serving_sides

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
SST2_LABELS = ["negative", "positive"]


def prepare(task, out, sequence_length, seed):
    """Our model (MiniLM + a seeded fresh head) in `OUT/TASK/model` (HF layout) and its export."""
    model_dir, saved = os.path.join(out, task, "model"), os.path.join(out, task, "saved_model")
    if os.path.exists(saved):
        return model_dir, saved
    import keras

    from keras_bert_zoo import export_saved_model

    get_task = common.lib("get_task")

    keras.utils.set_random_seed(seed)
    spec = get_task(task)
    base = minilm_path()
    pre = spec.make_preprocessor(base, sequence_length, None)
    if task == "classify":
        model = spec.model_class().from_preset(base, num_classes=2, label_names=SST2_LABELS, preprocessor=pre)
    else:
        model = spec.model_class().from_preset(
            base, num_labels=len(CONLL_TAGS), label_names=CONLL_TAGS, preprocessor=pre
        )
    model.save_to_preset(model_dir)
    export_saved_model(spec.load_model(model_dir), saved)
    return model_dir, saved


# --- the driver -------------------------------------------------------------------------
def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def _worker(args, side, task, model_dir, saved, threads, answers=False):
    cmd = [
        *common.self_cmd("serving"),
        "--worker",
        side,
        "--task",
        task,
        "--model",
        model_dir,
        "--saved",
        saved,
        "--batch-size",
        str(args.batch_size),
        "--threads",
        str(threads),
        "--latency-sentences",
        str(args.latency_sentences),
    ]
    cmd += ["--tf-inter-op", str(args.tf_inter_op)] if args.tf_inter_op else []
    cmd += ["--max-sentences", str(args.max_sentences)] if args.max_sentences else []
    cmd += ["--answers"] if answers else []
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{side} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def agreement(task, ours, hf):
    """How far the two sides' answers are apart (they load the same weights)."""
    if task == "classify":
        import numpy as np

        diff = float(np.abs(np.array(ours["probabilities"]) - np.array(hf["probabilities"])).max())
        same = sum(a == b for a, b in zip(ours["answers"], hf["answers"], strict=True)) / len(ours["answers"])
        return {"max_abs_probability_difference": diff, "same_label_fraction": same}
    pairs = [
        (a, b)
        for x, y in zip(ours["answers"], hf["answers"], strict=True)
        if len(x) == len(y)
        for a, b in zip(x, y, strict=True)
    ]
    same = sum(a == b for a, b in pairs) / max(1, len(pairs))
    return {
        "same_word_tag_fraction": same,
        "sentences_compared": sum(len(x) == len(y) for x, y in zip(ours["answers"], hf["answers"], strict=True)),
    }


def _sides(args):
    """(name, side, threads) of every configuration measured: ours at each of `--threads`, then HF
    at each of `--hf-threads`. Each side's figure is its best configuration, the same rule for both."""
    # dict.fromkeys: a setting given twice is one configuration, measured once per round.
    return [(f"ours_{t}_threads", "ours", t) for t in dict.fromkeys(args.threads)] + [
        (f"hf_{t}_threads", "hf", t) for t in dict.fromkeys(args.hf_threads)
    ]


def _round_order(sides, r):
    """The configurations of round `r`: forward in even rounds, reversed in odd ones (all see the same load)."""
    return sides if r % 2 == 0 else sides[::-1]


def bench_task(args, task):
    model_dir, saved = prepare(task, args.out, args.sequence_length, args.seed)
    check = agreement(
        task,
        _worker(args, "ours", task, model_dir, saved, args.threads[0], answers=True),
        _worker(args, "hf", task, model_dir, saved, args.hf_threads[0], answers=True),
    )
    print(f"{task}: same weights, answers: {check}", flush=True)
    sides = _sides(args)
    rounds = {name: [] for name, _, _ in sides}
    for r in range(args.rounds):
        for name, side, threads in _round_order(sides, r):
            result = _worker(args, side, task, model_dir, saved, threads)
            rounds[name].append(result)
            print(
                f"{task} round {r} {name}: {result['throughput']:.1f} sentences/s at batch {args.batch_size}, "
                f"p50 {1000 * statistics.median(result['latencies']):.1f} ms at batch 1 "
                f"(load {result['load_before']:.1f} -> {result['load_after']:.1f})",
                flush=True,
            )

    def summary(name):
        lat = [x for r in rounds[name] for x in r["latencies"]]
        return {
            "throughput": statistics.median(r["throughput"] for r in rounds[name]),
            "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * _percentile(lat, 99),
        }

    figures = {name: summary(name) for name in rounds}
    ours, best = serving_report.sides_at_best(figures)
    return {
        "task": task,
        "model": model_dir,
        "saved_model": saved,
        "sentences": len(serving_sides.sentences(task, args.max_sentences)),
        "agreement": check,
        "figures": figures,
        "ours": ours,
        "hf_best": best,
        "throughput_ratio": ours["throughput"] / best["throughput"],
        "p50_speedup": best["p50_ms"] / ours["p50_ms"],
        "rounds": rounds,
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run.py serving", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=("classify", "tag"), default=["classify", "tag"])
    parser.add_argument("--out", default="/tmp/bert_zoo_serving")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency-sentences", type=int, default=200)
    parser.add_argument("--max-sentences", type=int, default=None, help="first N sentences only (smoke runs)")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[2, 1],
        help="our intra-op threads of each configuration measured (our best is our figure)",
    )
    parser.add_argument(
        "--hf-threads",
        type=int,
        nargs="+",
        default=[2, 1],
        help="torch threads of each HF configuration measured (its best is the peer figure)",
    )
    parser.add_argument(
        "--tf-inter-op",
        type=int,
        default=None,
        help="TensorFlow inter-op threads of ours (default: as each configuration's intra-op)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-result", action="store_true", help="do not write benchmarks/results/serving.HOSTKIND.json"
    )
    parser.add_argument(
        "--table", action="store_true", help="print the table of OUT/serving.json and write its summary (--results)"
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the configurations each round measures, in order, and exit (nothing is run)",
    )
    parser.add_argument(
        "--results", default=None, help="directory of the summary record serving.json (default: benchmarks/results)"
    )
    parser.add_argument("--worker", choices=("ours", "hf"), help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--saved", help=argparse.SUPPRESS)
    parser.add_argument("--answers", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return serving_sides.run_worker(args)
    if args.plan:
        for r in range(args.rounds):
            print(
                f"round {r}: "
                + "; ".join(serving_report.config_name(name) for name, _, _ in _round_order(_sides(args), r))
            )
        return
    if args.table:
        detail = os.path.join(args.out, "serving.json")
        with open(detail, encoding="utf-8") as f:
            serving_report.print_table(json.load(f))
        print(f"summary: {serving_report.record_result(detail, args.results)}")
        return
    run(args, argv)


def run(args, argv):
    """Every task's configurations in rounds, then `OUT/serving.json`, the table and the record."""
    command = common.command_line("serving", argv)
    started, uptime_start, machine_before = now(), uptime(), machine_line()
    print(f"{started} {uptime_start}", flush=True)
    tasks = {task: bench_task(args, task) for task in args.tasks}
    record = {
        "command": command,
        "started": started,
        "finished": now(),
        "uptime_start": uptime_start,
        "uptime_end": uptime(),
        "machine_before": machine_before,
        "machine_after": machine_line(),
        "commit": git_commit(),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "tf_inter_op": args.tf_inter_op,
        "sequence_length": args.sequence_length,
        "latency_sentences": args.latency_sentences,
        "versions": versions("tensorflow", "tensorflow-text", "keras", "torch", "transformers"),
        "tasks": tasks,
    }
    detail = os.path.join(args.out, "serving.json")
    write_json(detail, record)

    serving_report.print_table(record)
    print(f"\ndetails: {detail}")
    if not args.no_result:
        print(f"summary: {serving_report.record_result(detail, args.results)}")


if __name__ == "__main__":
    main()
