"""The training jobs' loop overhead: a job's step time vs the model's own `train_on_batch`.

For `pretrain` and `finetune classify` at the demo's settings (`keras_bert_zoo.demo.pipeline.BUDGETS`),
in interleaved rounds in one process:

- **job**: the job itself (`keras_bert_zoo.pretrain` / `keras_bert_zoo.finetune`) for `--steps`
  steps, timed by a callback at every step end: the wall time from one step's end to the next is
  everything the job does per step (input pipeline, Python between steps, host reads, callbacks,
  TensorBoard writes, checkpoints), evaluation excluded (it is reported on its own line);
- **step**: the same compiled model (the one the job returns) stepped with `train_on_batch` on
  batches of the same pipeline, read into memory first: the model step alone, the reference.

overhead = job / step - 1; the issue's target is at most 10 %. The first steps (tracing,
compiling) are left out of both. Prints the machine line (`../shared/tools/machine_info.py`)
and the load; on a shared machine, ratios are what to compare.

Usage:
    python benchmarks/loop_overhead.py                 # full demo budget, 2 rounds of 60 steps
    python benchmarks/loop_overhead.py --budget small --steps 40 --rounds 1
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import RESULTS, machine_line, write_json  # noqa: E402

WARMUP = 5  # steps left out: tracing and compiling


def step_ends():
    """A Keras callback recording `perf_counter()` at every train step's end, by epoch."""
    import keras

    class StepEnds(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append([])

        def on_train_batch_end(self, batch, logs=None):
            self.epochs[-1].append(time.perf_counter())

    return StepEnds()


def per_step(ends, skip_epochs=0):
    """Seconds per step from one step's end to the next within an epoch, after WARMUP steps.

    Intervals across an epoch boundary hold the evaluation and the epoch-end checkpoint;
    they are returned apart: `(seconds per step, [seconds of each epoch boundary])`.
    `skip_epochs` leaves out whole first epochs: with bucketing, the first epoch traces
    the step for new batch widths, which the reference (reusing the job's traced
    function) never pays.
    """
    intervals, boundaries, count = [], [], 0
    previous = None
    for e, epoch in enumerate(ends.epochs):
        for i, t in enumerate(epoch):
            count += 1
            if previous is not None and count > WARMUP + 1:
                if i == 0:
                    boundaries.append(t - previous)
                elif e >= skip_epochs:
                    intervals.append(t - previous)
            previous = t
    return sum(intervals) / len(intervals), boundaries


def model_step(model, batches):
    """Seconds per `train_on_batch` on in-memory batches, timed on a second pass over them.

    The first pass traces `train_on_batch`'s own step function for every batch width
    (bucketed fine-tuning batches come in several), which the job had already paid for.
    """
    for x, y in batches:
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for x, y in batches[WARMUP:]:
        model.train_on_batch(x, y)
    return (time.perf_counter() - start) / (len(batches) - WARMUP)


def prepare(root, cfg):
    from keras_bert_zoo.demo import corpus
    from keras_bert_zoo.tasks.pretraining import learn_vocabulary_file

    parts = corpus.split(corpus.labelled_paragraphs(), seed=0)
    data = {"train_text": corpus.write_pretraining_corpus(parts["train"], os.path.join(root, "pt_train.txt")),
            "dev_text": corpus.write_pretraining_corpus(parts["dev"], os.path.join(root, "pt_dev.txt")),
            "train": corpus.write_task_file(parts["train"], os.path.join(root, "train.jsonl")),
            "dev": corpus.write_task_file(parts["dev"], os.path.join(root, "dev.jsonl")),
            "vocab": os.path.join(root, "vocab.txt")}
    learn_vocabulary_file([data["train_text"]], cfg["vocab_size"], data["vocab"])
    return data


def pretrain_round(root, data, cfg, steps, index):
    import itertools

    from keras_bert_zoo import pretrain
    from keras_bert_zoo.preprocessing.pretraining_data import pretraining_dataset

    ends = step_ends()
    out = os.path.join(root, f"pretrain_{index}")
    model, metrics = pretrain(
        corpus=[data["train_text"]], out=out, preset=cfg["preset"], vocab=data["vocab"],
        sequence_length=cfg["sequence_length"], batch_size=cfg["batch_size"], steps=steps,
        learning_rate=cfg["pretrain_lr"], eval_corpus=[data["dev_text"]], eval_every=cfg["eval_every"],
        eval_batches=20, seed=1, verbose=0, callbacks=[ends], **cfg.get("pretrain_options", {}))
    job, _ = per_step(ends)
    ds = pretraining_dataset([data["train_text"]], data["vocab"], sequence_length=cfg["sequence_length"],
                             max_predictions=model.data_layout["max_predictions"], batch_size=cfg["batch_size"],
                             repeat=True, drop_remainder=True, seed=1)
    batches = list(itertools.islice(iter(ds), steps))
    alone = model_step(model, batches)
    return {"job": job, "step": alone, "jit_compile": bool(model.jit_compile), "out": out,
            "tokens_per_second": metrics["tokens_per_second"]}


def finetune_round(root, data, cfg, model_dir, epochs, index):
    import itertools

    from keras_bert_zoo import finetune
    from keras_bert_zoo.demo import corpus
    from keras_bert_zoo.preprocessing.task_data import DataLayout
    from keras_bert_zoo.tasks.registry import get_task

    ends = step_ends()
    layout = DataLayout(("text",), "label", label_names=corpus.LABELS)
    model, metrics = finetune(
        "classify", model=model_dir, train=data["train"], dev=data["dev"], out=os.path.join(root, f"ft_{index}"),
        layout=layout, epochs=epochs, batch_size=cfg["batch_size"], learning_rate=cfg["finetune_lr"],
        sequence_length=cfg["sequence_length"], seed=0, verbose=0, callbacks=[ends],
        **cfg.get("finetune_options", {}))
    spec = get_task("classify")
    examples = spec.read_data(data["train"], layout)
    ds = spec.dataset(examples, model.preprocessor, cfg["batch_size"], training=True, seed=0, batching="auto")
    steps = sum(len(e) for e in ends.epochs)
    batches = list(itertools.islice(iter(ds.repeat()), steps))
    job, boundaries = per_step(ends, skip_epochs=1 if len(ends.epochs) > 1 else 0)
    alone = model_step(model, batches)
    return {"job": job, "step": alone, "jit_compile": bool(model.jit_compile), "steps": steps,
            "epoch_end_seconds": boundaries}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", choices=("small", "full"), default="full")
    parser.add_argument("--steps", type=int, default=60, help="pretraining steps per round")
    parser.add_argument("--epochs", type=int, default=2, help="fine-tuning epochs per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(RESULTS, "loop_overhead.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from keras_bert_zoo.demo.pipeline import BUDGETS

    cfg = BUDGETS[args.budget]
    before = machine_line()
    print(before, flush=True)
    root = tempfile.mkdtemp(prefix="loop-overhead-")
    data = prepare(root, cfg)
    loads, rows = [os.getloadavg()[0]], {"pretrain": [], "finetune": []}
    for r in range(args.rounds):
        p = pretrain_round(root, data, cfg, args.steps, r)
        rows["pretrain"].append(p)
        loads.append(os.getloadavg()[0])
        f = finetune_round(root, data, cfg, p["out"], args.epochs, r)
        rows["finetune"].append(f)
        loads.append(os.getloadavg()[0])
        for name, row in (("pretrain", p), ("finetune", f)):
            print(f"round {r + 1} {name:8s}: job {1000 * row['job']:7.1f} ms/step, train_on_batch "
                  f"{1000 * row['step']:7.1f} ms/step, overhead {100 * (row['job'] / row['step'] - 1):+5.1f} % "
                  f"(XLA {row['jit_compile']}); load {os.getloadavg()[0]:.2f}", flush=True)
    summary = {}
    for name, runs in rows.items():
        ratio = statistics.median(r["job"] / r["step"] for r in runs)
        summary[name] = {"job_ms": statistics.median(1000 * r["job"] for r in runs),
                         "step_ms": statistics.median(1000 * r["step"] for r in runs),
                         "overhead_percent": 100 * (ratio - 1), "jit_compile": runs[0]["jit_compile"]}
        print(f"{name:8s}: job / train_on_batch = {ratio:.3f} (overhead {100 * (ratio - 1):+.1f} %, "
              f"median of {len(runs)} round(s))", flush=True)
    after = machine_line()
    print(after, flush=True)
    record = {"budget": args.budget, "steps": args.steps, "epochs": args.epochs, "rounds": args.rounds,
              "machine_before": before, "machine_after": after, "loads": loads, "summary": summary,
              "runs": {k: [{kk: vv for kk, vv in r.items() if kk != "out"} for r in v] for k, v in rows.items()},
              "command": "python benchmarks/loop_overhead.py " + " ".join(argv or sys.argv[1:])}
    write_json(args.out, record)
    print(json.dumps(summary, indent=1))
    return record


if __name__ == "__main__":
    main()
