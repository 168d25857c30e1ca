"""Does bf16 train like float32? The training-loss curve of a short real fine-tuning run,
`--mixed-precision bf16` vs float32, next to float32's own seed-to-seed spread.

SST-2 from the real all-MiniLM-L6-v2 (`keras_bert_zoo.finetune("classify", ...)`, HF's recipe:
lr 5e-5, batch 32, 10% warm-up then linear decay, length 128, bucketing), the first
`--examples` training sentences for one epoch, dev accuracy every `--eval-every` steps and at
the end. Runs, each in its own process (the dtype policy is process-wide): float32 with seeds
0 and 1 (the noise), bf16 with seeds 0 and 1. The per-step training losses are read from
`finetune`'s `StepLog` (a subclass here records them; each run's
`model/training_curve.png` plots them too). Writes `OUT/results.json` and prints the
curves in windows of `--window` steps.

    nohup nice python benchmarks/bf16_loss.py > /tmp/bf16_loss.log 2>&1 &
    python benchmarks/bf16_loss.py --examples 640 --eval-every 10 --out /tmp/bf16_loss_smoke   # smoke
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import REPO, git_commit, minilm_path, now, read_json, uptime, write_json  # noqa: E402

DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "sst2")
RUNS = [("float32", "none", 0), ("bf16", "bf16", 0), ("float32", "none", 1), ("bf16", "bf16", 1)]


def one_run(precision, seed, examples, eval_every, out, data=DATA):
    """In this process: fine-tune, record every step's loss, write `out/run.json`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras_bert_zoo.tasks.finetuning as finetuning
    import keras_bert_zoo.training.callbacks as callbacks
    from keras_bert_zoo.preprocessing.task_data import DataLayout
    from keras_bert_zoo.training.callbacks import StepLog

    recorded = {}

    class RecordingStepLog(StepLog):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            recorded["rows"] = self.rows

    callbacks.StepLog = RecordingStepLog  # finetune imports it from there when called
    started, load = now(), uptime()
    _, metrics = finetuning.finetune(
        "classify", minilm_path(), os.path.join(data, "train.tsv"), os.path.join(data, "dev.tsv"),
        os.path.join(out, "model"), layout=DataLayout.for_task("sst2"), epochs=1, max_train_examples=examples, eval_every=eval_every, seed=seed,
        mixed_precision=precision, learning_rate=5e-5, batch_size=32, sequence_length=128, verbose=2,
        overwrite=True)
    losses = [(r["step"], float(r["loss"])) for r in recorded.get("rows", []) if "loss" in r and "step" in r]
    write_json(os.path.join(out, "run.json"), {
        "precision": precision, "seed": seed, "metrics": metrics, "losses": losses, "started": started,
        "ended": now(), "uptime_before": load, "uptime_after": uptime(),
        "dev_history": [r for r in recorded.get("rows", []) if "loss" not in r]})


def per_step(losses):
    """Keras logs the running mean of the epoch at each batch: step n's own loss is
    n * mean_n - (n - 1) * mean_(n-1) (one epoch, so n is the step)."""
    out, previous = [], 0.0
    for step, mean in losses:
        out.append(step * mean - (step - 1) * previous)
        previous = mean
    return out


def windows(losses, window):
    values = per_step(losses)
    out = []
    for start in range(0, len(values), window):
        chunk = values[start:start + window]
        out.append(sum(chunk) / len(chunk))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=6400, help="first N training sentences (200 steps of 32)")
    parser.add_argument("--summary", action="store_true", help="only print the curves of the finished runs")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--window", type=int, default=25)
    parser.add_argument("--out", default="/tmp/bert_zoo_bf16_loss")
    parser.add_argument("--data", default=DATA, help="the SST-2 folder (train.tsv, dev.tsv)")
    parser.add_argument("--run", nargs=2, default=None, help=argparse.SUPPRESS)  # PRECISION SEED (child)
    args = parser.parse_args()
    if args.run:
        precision, seed = args.run[0], int(args.run[1])
        one_run(precision, seed, args.examples, args.eval_every, os.path.join(args.out, f"{precision}_seed{seed}"),
                args.data)
        return
    started, command = now(), "python " + " ".join(sys.argv)
    for label, precision, seed in [] if args.summary else RUNS:
        run_dir = os.path.join(args.out, f"{precision}_seed{seed}")
        if read_json(os.path.join(run_dir, "run.json")):
            print(f"{label} seed {seed}: done before ({run_dir})", flush=True)
            continue
        print(f"{label} seed {seed}: {uptime()}", flush=True)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--run", precision, str(seed),
                        "--examples", str(args.examples), "--eval-every", str(args.eval_every),
                        "--out", args.out, "--data", args.data], check=True)
    runs = {f"{p}_seed{s}": read_json(os.path.join(args.out, f"{p}_seed{s}", "run.json")) for _, p, s in RUNS}
    runs = {k: r for k, r in runs.items() if r}
    curves = {k: windows(r["losses"], args.window) for k, r in runs.items()}
    print(f"\nmean training loss per {args.window} steps")
    print(" ".join(f"{k:>14s}" for k in ["steps", *curves]))
    for i in range(max(len(c) for c in curves.values())):
        cells = [f"{i * args.window + 1}-{(i + 1) * args.window}"] + [
            f"{c[i]:.4f}" if i < len(c) else "" for c in curves.values()]
        print(" ".join(f"{x:>14s}" for x in cells))
    print("\nend of training: " + ", ".join(
        f"{k}: dev accuracy {r['metrics'].get('accuracy', r['metrics'].get('dev_accuracy', float('nan'))):.4f}, "
        f"final loss (epoch mean) "
        f"{r['metrics']['final_train_loss']:.4f}, {r['metrics']['train_examples_per_second']:.0f} ex/s"
        for k, r in runs.items()))
    path = os.path.join(args.out, "results.json")
    write_json(path, {"command": command, "started": started, "ended": now(), "git_commit": git_commit(),
                      "window": args.window, "curves": curves, "runs": runs})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
