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
import time

import common
from common import git_commit, machine_line, minilm_path, now, uptime, versions, write_json, write_result

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DATA = common.DATA
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
SST2_LABELS = ["negative", "positive"]


def sentences(task, limit=None):
    """The real sentences each task serves (standard library only: the HF worker has no TF)."""
    if task == "classify":
        with open(os.path.join(DATA, "sst2", "dev.tsv"), encoding="utf-8") as f:
            out = [line.rstrip("\n").split("\t")[0] for line in f.readlines()[1:] if line.strip()]
    else:
        out, words = [], []
        with open(os.path.join(DATA, "conll2003", "eng.testa"), encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if not parts or parts[0] == "-DOCSTART-":
                    if words:
                        out.append(" ".join(words))
                    words = []
                else:
                    words.append(parts[0])
        out += [" ".join(words)] if words else []
    return out[:limit] if limit else out


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


# --- the two sides (each in its own process) ---------------------------------------------
def ours_call(task, saved, threads, inter_op):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    fn = tf.saved_model.load(saved).signatures["serving_default"]

    if task == "classify":

        def call(batch):
            out = fn(text=tf.constant(batch))
            return [s.decode() for s in out["labels"].numpy()], out["probabilities"].numpy()
    else:

        def call(batch):
            out = fn(text=tf.constant(batch))
            tags, n = out["tags"].numpy(), out["num_words"].numpy()
            return [[t.decode() for t in row[:k]] for row, k in zip(tags, n, strict=True)], np.zeros(0)

    return call


def hf_call(task, model_dir, threads):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if task == "classify":
        model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        names = [model.config.id2label[i] for i in range(model.config.num_labels)]

        def call(batch):
            with torch.no_grad():
                enc = tokenizer(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
                probs = torch.softmax(model(**enc).logits, dim=-1)
                return [names[int(i)] for i in probs.argmax(-1)], probs.numpy()

        return call
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]

    def call(batch):
        words = [t.split() for t in batch]
        with torch.no_grad():
            enc = tokenizer(
                words, is_split_into_words=True, padding=True, truncation=True, max_length=128, return_tensors="pt"
            )
            ids = model(**enc).logits.argmax(-1).tolist()
        out = []
        for row, tag_ids in enumerate(ids):
            tags, seen = ["O"] * len(words[row]), set()
            for pos, w in enumerate(enc.word_ids(row)):
                if w is not None and w not in seen:
                    seen.add(w)
                    tags[w] = names[tag_ids[pos]]
            out.append(tags)
        return out, None

    return call


def measure(call, texts, batch_size, latency_n, warmup=3):
    """Sentences/s at `batch_size` over all `texts` (in order) and per-call seconds at batch 1."""
    batches = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    for b in batches[:warmup]:
        call(b)
    start = time.perf_counter()
    for b in batches:
        call(b)
    throughput = len(texts) / (time.perf_counter() - start)
    for t in texts[:warmup]:
        call([t])
    latencies = []
    for t in texts[:latency_n]:
        s = time.perf_counter()
        call([t])
        latencies.append(time.perf_counter() - s)
    return throughput, latencies


def run_worker(args):
    texts = sentences(args.task, args.max_sentences)
    if args.worker == "ours":
        call = ours_call(args.task, args.saved, args.threads[0], args.tf_inter_op or args.threads[0])
    else:
        call = hf_call(args.task, args.model, args.threads[0])
    if args.answers:  # the agreement check: answers on all sentences at batch 64
        labels, probs = [], []
        for i in range(0, len(texts), args.batch_size):
            got, p = call(texts[i : i + args.batch_size])
            labels += got
            probs += [] if p is None else p.tolist()
        print(json.dumps({"answers": labels, "probabilities": probs}))
        return
    load = os.getloadavg()[0]
    throughput, latencies = measure(call, texts, args.batch_size, args.latency_sentences)
    print(
        json.dumps(
            {"throughput": throughput, "latencies": latencies, "load_before": load, "load_after": os.getloadavg()[0]}
        )
    )


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
    ours, best = sides_at_best(figures)
    return {
        "task": task,
        "model": model_dir,
        "saved_model": saved,
        "sentences": len(sentences(task, args.max_sentences)),
        "agreement": check,
        "figures": figures,
        "ours": ours,
        "hf_best": best,
        "throughput_ratio": ours["throughput"] / best["throughput"],
        "p50_speedup": best["p50_ms"] / ours["p50_ms"],
        "rounds": rounds,
    }


def main(argv=None):
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
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)
    if args.plan:
        for r in range(args.rounds):
            print(f"round {r}: " + "; ".join(_config_name(name) for name, _, _ in _round_order(_sides(args), r)))
        return
    if args.table:
        detail = os.path.join(args.out, "serving.json")
        with open(detail, encoding="utf-8") as f:
            print_table(json.load(f))
        print(f"summary: {record_result(detail, args.results)}")
        return

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

    print_table(record)
    print(f"\ndetails: {detail}")
    if not args.no_result:
        print(f"summary: {record_result(detail, args.results)}")


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


def _config_name(config):  # "hf_1_threads" -> "HF transformers, 1 thread"
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
            each = "; ".join(f"{_config_name(n)}: {f[key]:.1f}" for n, f in t["figures"].items())
            rows.append(
                {
                    "what": f"serving {task}: {what}, {title}",
                    "unit": unit,
                    "ours": o[key],
                    "peer": h[key],
                    "peer_name": f"{_config_name(h['configs'][key])} (its best)",
                    "higher_is_better": higher,
                    "note": f"each side at its best thread setting, ours here "
                    f"{_config_name(o['configs'][key]).split(', ')[1]} ({inter}); every setting: {each}",
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


if __name__ == "__main__":
    main()
