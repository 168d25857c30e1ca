"""The demo's budget over seeds: its wall time, its start-up estimate and the quality it prints.

`bert-zoo demo` promises its run within 10 minutes on 2 cores at "the same quality as before"
(issue 28). One run per budget cannot show what a budget gives: runs of one budget and seed
already differ by more than budgets do. This runs `keras_bert_zoo.demo.run_demo` for every
(budget, seed), each in its own process, one after the other (rounds interleave the budgets), and
prints per budget the mean and spread of what the demo prints: held-out MLM accuracy, best dev
accuracy and test accuracy against the majority baseline, with the wall time and the estimate
printed at start (estimate / time).

- `full`: `keras_bert_zoo.demo.pipeline.BUDGETS["full"]` as `bert-zoo demo` runs it (1,200
  pretraining steps at 32 x 128 and 15 fine-tuning epochs, scaled down by `fit_to_time` on a
  machine too slow for them; each run records its `budget_scale`);
- `short`: 500 steps and 10 epochs, the budget `"full"` had from a3b9aad to 6ac9385 (in the record
  `demo_budget.json` of 2026-12-05, made before the change, these two are called `issue` and `full`).

    python benchmarks/demo_budget.py --budgets full,short --seeds 0,1,2

Writes `benchmarks/results/demo_budget.json` (or `--out`) and prints a table.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The budget "full" had before it went back to the issue's, differing only in these.
SHORT_BUDGET = dict(pretrain_steps=500, eval_every=250, finetune_epochs=10)
REPORTED = ("heldout_mlm_accuracy", "dev_accuracy", "test_accuracy", "test_majority_baseline", "total_seconds",
            "estimated_seconds", "pretrain_step_seconds_at_start", "budget_scale")


def worker(budget, seed, out):
    from keras_bert_zoo.demo import pipeline

    if budget == "short":  # never scaled: no TIME_LIMITS entry
        pipeline.BUDGETS["short"] = {**pipeline.BUDGETS["full"], **SHORT_BUDGET}
        pipeline.FIXED_STEPS["short"] = pipeline.FIXED_STEPS["full"]
    load = os.getloadavg()
    start = time.perf_counter()
    metrics = pipeline.run_demo(out, budget=budget, seed=seed, verbose=0)
    record = {k: metrics[k] for k in REPORTED}
    record.update(budget=budget, seed=seed, wall_seconds=time.perf_counter() - start,
                  loadavg_before=list(load), loadavg_after=list(os.getloadavg()))
    print("RESULT " + json.dumps(record), flush=True)


def run_one(budget, seed, scratch):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", budget, "--seed", str(seed),
           "--scratch", os.path.join(scratch, f"{budget}_{seed}")]
    return common.run_worker(cmd, f"demo {budget} seed {seed}")


def summarize(runs):
    out = {}
    for budget in dict.fromkeys(r["budget"] for r in runs):
        mine = [r for r in runs if r["budget"] == budget]
        row = {"runs": len(mine)}
        for key in ("heldout_mlm_accuracy", "dev_accuracy", "test_accuracy", "wall_seconds", "total_seconds"):
            values = [r[key] for r in mine]
            row[key] = dict(mean=statistics.fmean(values), sd=statistics.stdev(values) if len(values) > 1 else 0.0,
                            values=values)
        row["estimate_over_time"] = [r["estimated_seconds"] / r["total_seconds"] for r in mine]
        row["majority_baseline"] = mine[0]["test_majority_baseline"]
        out[budget] = row
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="full,short")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default=os.path.join(common.REPO, "benchmarks", "results", "demo_budget.json"))
    parser.add_argument("--worker", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scratch", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.seed, args.scratch)
    budgets, seeds = args.budgets.split(","), [int(s) for s in args.seeds.split(",")]
    started, machine_before, runs = common.now(), common.machine_line(), []
    with tempfile.TemporaryDirectory() as scratch:
        for seed in seeds:
            for budget in budgets:
                result = run_one(budget, seed, scratch)
                runs.append(result)
                print(f"{budget} seed {seed}: {result['total_seconds']:.0f} s (estimated "
                      f"{result['estimated_seconds']:.0f}), MLM {result['heldout_mlm_accuracy']:.3f}, dev "
                      f"{result['dev_accuracy']:.3f}, test {result['test_accuracy']:.3f}, load "
                      f"{result['loadavg_before'][0]:.1f}-{result['loadavg_after'][0]:.1f}", flush=True)
    summary = summarize(runs)
    record = dict(command="python benchmarks/demo_budget.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  started=started, finished=common.now(), machine_before=machine_before,
                  machine_after=common.machine_line(), commit=common.git_commit(), short_budget=SHORT_BUDGET,
                  runs=runs, summary=summary)
    common.write_json(args.out, record)
    print("\n| budget | runs | held-out MLM acc | dev acc (best epoch) | test acc | demo s | estimate / time |")
    print("|---|---|---|---|---|---|---|")
    for budget, row in summary.items():
        cells = [f"{row[k]['mean']:.3f} ± {row[k]['sd']:.3f}"
                 for k in ("heldout_mlm_accuracy", "dev_accuracy", "test_accuracy")]
        ratio = ", ".join(f"{x:.2f}" for x in row["estimate_over_time"])
        print(f"| {budget} | {row['runs']} | {' | '.join(cells)} | {row['total_seconds']['mean']:.0f} | {ratio} |")
    print(f"(majority-class baseline on test: {next(iter(summary.values()))['majority_baseline']:.3f})")


if __name__ == "__main__":
    main()
