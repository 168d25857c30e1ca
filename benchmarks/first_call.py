"""What the first `fit` / `evaluate` / `predict` call of a process costs beyond the model's work.

The user's script as most Keras users write it: `BertClassifier` (all-MiniLM-L6-v2) +
`BertPreprocessor(sequence_length=128)`, `compile(optimizer, loss, metrics=["accuracy"])`,
`fit` on the first `--train` SST-2 sentences (batch 32), then `evaluate` and `predict` on the
872 dev sentences (batch 64), each twice: the second call has nothing left to trace, so
first - second is the one-time cost (tracing, graph optimisation, input-pipeline set-up).
Also counts how often Keras traced the train and test steps (a step whose first trace creates
variables is traced twice). Each round runs every `--repos` checkout in its own process
(rounds interleaved), so a change can be timed against the code before it:

    git worktree add /tmp/before HEAD~1
    python benchmarks/first_call.py --repos .,/tmp/before --rounds 2

Writes `benchmarks/results/first_call.json` (or `--out`) and prints a table.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DATA = os.path.join(common.REPO, "..", "shared", "data", "sst2")


def worker(train_n):
    import csv

    import keras
    import numpy as np

    from keras_bert_zoo import BertClassifier, BertPreprocessor

    def read(name, n=None):
        with open(os.path.join(DATA, name), encoding="utf-8") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
        rows = rows[:n] if n else rows
        return [r[0] for r in rows], np.array([int(r[1]) for r in rows])

    x, y = read("train.tsv", train_n)
    dev_x, dev_y = read("dev.tsv")
    keras.utils.set_random_seed(0)
    minilm = common.minilm_path()
    model = BertClassifier.from_preset(minilm, num_classes=2,
                                       preprocessor=BertPreprocessor.from_preset(minilm, sequence_length=128))
    model.compile(optimizer=keras.optimizers.AdamW(5e-5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    traces = {"train": 0, "test": 0}
    train_step, test_step = model.train_step, model.test_step
    model.train_step = lambda data: (traces.__setitem__("train", traces["train"] + 1), train_step(data))[1]
    model.test_step = lambda data: (traces.__setitem__("test", traces["test"] + 1), test_step(data))[1]
    out = {}
    t = time.perf_counter()
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    out["fit_s"] = time.perf_counter() - t
    for call in (1, 2):
        t = time.perf_counter()
        model.evaluate(dev_x, dev_y, batch_size=64, verbose=0)
        out[f"evaluate_{call}_s"] = time.perf_counter() - t
        t = time.perf_counter()
        model.predict(dev_x, batch_size=64, verbose=0)
        out[f"predict_{call}_s"] = time.perf_counter() - t
    out.update(train_traces=traces["train"], test_traces=traces["test"])
    print("RESULT " + json.dumps(out), flush=True)


def run_one(repo, train_n):
    env = {**os.environ, "PYTHONPATH": os.path.abspath(repo), "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--train", str(train_n)]
    return common.run_worker(cmd, repo, env=env, cwd=os.path.abspath(repo))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", default=".", help="comma-separated checkouts; the first is the one measured")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--train", type=int, default=320, help="SST-2 training sentences for fit")
    parser.add_argument("--out", default=os.path.join(common.REPO, "benchmarks", "results", "first_call.json"))
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.train)
    repos = args.repos.split(",")
    started, machine_before, runs = common.now(), common.machine_line(), []
    for r in range(args.rounds):
        for repo in repos:
            result = dict(run_one(repo, args.train), repo=repo, round=r, commit=subprocess.run(
                ["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip())
            runs.append(result)
            print(json.dumps(result), flush=True)
    keys = ("fit_s", "evaluate_1_s", "evaluate_2_s", "predict_1_s", "predict_2_s", "train_traces", "test_traces")
    summary = {repo: {k: statistics.median(x[k] for x in runs if x["repo"] == repo) for k in keys} for repo in repos}
    common.write_json(args.out, dict(command="python benchmarks/first_call.py " + " ".join(
        argv if argv is not None else sys.argv[1:]), started=started, finished=common.now(),
        machine_before=machine_before, machine_after=common.machine_line(), commit=common.git_commit(), runs=runs,
        summary=summary))
    print("\n| checkout | fit s | evaluate 1st / 2nd s | predict 1st / 2nd s | train / test step traces |")
    print("|---|---|---|---|---|")
    for repo, s in summary.items():
        print(f"| {repo} | {s['fit_s']:.2f} | {s['evaluate_1_s']:.2f} / {s['evaluate_2_s']:.2f} | "
              f"{s['predict_1_s']:.2f} / {s['predict_2_s']:.2f} | {s['train_traces']:g} / {s['test_traces']:g} |")


if __name__ == "__main__":
    main()
