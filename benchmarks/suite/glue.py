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

    python benchmarks/run.py glue sst2            # HF recipe: first 20,000 train examples, 1 epoch
    python benchmarks/run.py glue mrpc            # HF recipe: full train (3,668), 3 epochs
    python benchmarks/run.py glue rte             # HF recipe: full train (2,490), 3 epochs
    python benchmarks/run.py glue sst2_full       # longer budget: all 67,349 train examples, 1 epoch
    python benchmarks/run.py glue rte_6ep         # longer budget: 6 epochs
    python benchmarks/run.py glue sst2_scratch    # bert_tiny_uncased from random init
    python benchmarks/run.py glue rte --select best   # best of the dev evaluations (every 39 steps)
    python benchmarks/run.py glue table           # the tables of every finished run under --root
    python benchmarks/run.py glue sst2 --max-train-examples 320 --max-dev-examples 64 --root /tmp/smoke  # smoke test

STS-B too (the original STS Benchmark files, ../shared/data/stsb): `stsb` is the supervised recipe
(`finetune("classify")` with the `stsb` layout: regression, `num_classes=1`, MSE on the 0-5 score; dev
Pearson and Spearman at the end of training, 3 epochs of the recipe above), and `embeddings` the
unsupervised one: each dev pair embedded by `BertSentenceEmbedder` (what `bert-zoo evaluate-embeddings`
runs) under each pooling, the cosine correlated with the gold score (Spearman, as sentence-transformers'
`EmbeddingSimilarityEvaluator`); `--st-reference` adds sentence-transformers' own `encode` of MiniLM.

    python benchmarks/run.py glue stsb --epochs 1
    python benchmarks/run.py glue embeddings --st-reference   # --model NAME=DIR, --random-baseline NAME=DIR
    python benchmarks/run.py glue embeddings --pooling mean --max-dev-examples 50 --no-record   # smoke test
"""

import argparse
import os
import time

import common
from suite import glue_report

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
DATA = common.DATA
POOLINGS = ("mean", "cls", "pooled", "max")

# HF's recipe (REFERENCE_RESULTS.md), shared by every recipe below unless it says otherwise.
HF_RECIPE = dict(batch_size=32, learning_rate=5e-5, warmup_ratio=0.1, sequence_length=128)

# name: data folder / GLUE layout, model, the finetune() arguments, what the training data is,
# the HF reference it is comparable with (None: a different budget, no HF figure), and the
# evaluation interval used by `--select best`.
RECIPES = {
    "sst2": dict(
        task="sst2",
        model="minilm",
        args=dict(epochs=1, max_train_examples=20_000),
        data="first 20,000 of train.tsv",
        hf="sst2",
        best_eval_every=200,
    ),
    "mrpc": dict(
        task="mrpc", model="minilm", args=dict(epochs=3), data="train.tsv (3,668)", hf="mrpc", best_eval_every=58
    ),
    "rte": dict(
        task="rte", model="minilm", args=dict(epochs=3), data="train.tsv (2,490)", hf="rte", best_eval_every=39
    ),
    # Longer budgets than HF's reference runs: different recipes, never compared with HF's figure.
    "sst2_full": dict(
        task="sst2",
        model="minilm",
        args=dict(epochs=1, max_train_examples=None),
        data="all 67,349 of train.tsv (3.4x HF's data)",
        hf=None,
        best_eval_every=500,
    ),
    "rte_6ep": dict(
        task="rte",
        model="minilm",
        args=dict(epochs=6),
        data="train.tsv (2,490), 2x HF's epochs",
        hf=None,
        best_eval_every=39,
    ),
    # No pretraining: bert_tiny_uncased from random init (same uncased vocabulary), lr 1e-4.
    "sst2_scratch": dict(
        task="sst2",
        model="bert_tiny_uncased",
        args=dict(epochs=1, max_train_examples=20_000, learning_rate=1e-4),
        data="first 20,000 of train.tsv, random init, lr 1e-4",
        hf=None,
        best_eval_every=200,
    ),
    "stsb": dict(
        task="stsb",
        model="minilm",
        args=dict(epochs=3),
        data="sts-train.csv (5,749 pairs)",
        hf=None,
        best_eval_every=60,
        files=("sts-train.csv", "sts-dev.csv"),
    ),
}


def count_evaluations(steps, epochs, eval_every):
    """Dev evaluations `finetune` made: every `eval_every` steps and at each epoch end."""
    per_epoch = steps // max(epochs, 1)
    points = {per_epoch * (e + 1) for e in range(epochs)}
    if eval_every:
        points |= set(range(eval_every, steps + 1, eval_every))
    return len(points)


def run_recipe(name, root, command, select="final", **overrides):
    from keras_bert_zoo import finetune

    spec = RECIPES[name]
    overrides = {k: v for k, v in overrides.items() if v is not None}
    args = {
        **HF_RECIPE,
        **spec["args"],
        "eval_every": spec["best_eval_every"] if select == "best" else 0,  # final: dev at epoch ends only
        **overrides,
    }
    minilm = common.minilm_path()
    model = minilm if spec["model"] == "minilm" else spec["model"]
    out = glue_report.run_dir(root, name, select)
    train, dev = (os.path.join(DATA, spec["task"], f) for f in spec.get("files", ("train.tsv", "dev.tsv")))
    print(f"== {name} (select={select}): {args}", flush=True)
    load_before, started = os.getloadavg(), common.now()
    start = time.perf_counter()
    _, metrics = finetune(
        "classify",
        model,
        train,
        dev,
        out,
        layout=common.lib("DataLayout").for_task(spec["task"]),
        vocab=minilm,  # the scratch model uses the same uncased vocabulary (30,522)
        select=select,
        **args,
    )
    wall = time.perf_counter() - start
    record = {
        "recipe": name,
        "task": spec["task"],
        "model": model,
        "select": select,
        **args,
        "modified": sorted(overrides),  # arguments that differ from the named recipe
        "train": train,
        "dev": dev,
        "metrics": os.path.join(out, "metrics.json"),
        "dev_evaluations": count_evaluations(metrics["steps"], args["epochs"], args["eval_every"]),
        "wall_seconds": wall,
        "started": started,
        "date": common.now(),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "git_commit": common.git_commit(),
        "uncommitted_package_files": common.output(
            "git", "-C", common.REPO, "status", "--porcelain", "--", "keras_bert_zoo"
        ).splitlines(),
        "command": command,
    }
    common.write_json(os.path.join(out, "recipe.json"), record)
    glue_report.print_tables(root, RECIPES, [name])
    return metrics


def embeddings(args, command):
    """Unsupervised STS-B dev: per model and pooling, the Spearman of the cosine against the gold score."""
    import keras

    from keras_bert_zoo import BertSentenceEmbedder

    dev, rows = os.path.join(DATA, "stsb", "sts-dev.csv"), []
    models = [spec.partition("=") for spec in args.model or ([] if args.random_baseline else ["minilm"])]
    # The same architecture and vocabulary with random weights: what pretraining added.
    runs = [(n, p or common.minilm_path(), True) for n, _, p in models]
    runs += [(f"{n} (random init)", p, False) for n, _, p in (s.partition("=") for s in args.random_baseline or [])]
    n = args.max_dev_examples
    for name, path, load_weights in runs:
        for pooling in args.pooling:
            keras.utils.set_random_seed(0)
            embedder = BertSentenceEmbedder.from_preset(path, pooling=pooling, load_weights=load_weights)
            scores, seconds, _ = common.timed(common.lib("similarity_scores"), embedder, dev, 64, n)
            rows.append(dict(model=name, pooling=pooling, seconds=seconds, **scores))
    if args.st_reference:  # sentence-transformers' own encode of MiniLM, scored by the same correlations
        from sentence_transformers import SentenceTransformer

        pairs, st = common.lib("read_sts")(dev, max_examples=n), SentenceTransformer(common.minilm_path(), device="cpu")
        a, b = (st.encode(list(x), batch_size=64) for x in (pairs.sentences1, pairs.sentences2))
        rows.append(
            dict(
                model="minilm (sentence-transformers encode)",
                pooling="mean",
                **common.lib("similarity_correlations")(a, b, pairs.scores),
            )
        )
    print("\n| model | pooling | STS-B dev Spearman | Pearson |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['pooling']} | {r['spearman']:.4f} | {r['pearson']:.4f} |")
    ours = next((r for r in rows if r["model"] == "minilm" and r["pooling"] == "mean"), None)
    st = next((r for r in rows if "sentence-transformers" in r["model"]), None)
    if ours and not args.no_record:
        others = "; ".join(f"{r['model']} {r['pooling']} {r['spearman']:.4f}" for r in rows if r is not ours)
        row = dict(
            what="STS-B dev Spearman, mean-pooled embeddings of all-MiniLM-L6-v2",
            unit="fraction",
            ours=round(ours["spearman"], 4),
            peer=st and round(st["spearman"], 4),
            higher_is_better=True,
            peer_name=st and "sentence-transformers encode, same checkpoint",
            note=others or None,
        )
        print(common.write_result("glue_stsb", [row], command, detail=dict(rows=rows, max_dev_examples=n)))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="run.py glue", description="GLUE and STS-B runs, one recipe per command")
    parser.add_argument("recipe", choices=list(RECIPES) + ["embeddings", "table"])
    parser.add_argument("--root", default="/tmp/bert_zoo_glue")
    parser.add_argument(
        "--select",
        choices=("final", "best"),
        default="final",
        help="final: the model at the end of training (HF's figure is this); best: the best of "
        "the periodic dev evaluations (selection on dev)",
    )
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--max-train-examples", type=int)
    parser.add_argument("--max-dev-examples", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument(
        "--eval-every",
        type=int,
        help="dev evaluation interval in steps (default: epoch ends only for --select final, the recipe's for best)",
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument("--jit-compile", choices=("true", "false"))
    parser.add_argument("--record", action="store_true", help="table: also write the record benchmarks/results/glue")
    parser.add_argument("--model", action="append", help="embeddings: NAME=DIR (repeat); 'minilm' alone: the real one")
    parser.add_argument("--pooling", nargs="+", default=list(POOLINGS), choices=POOLINGS, help="embeddings")
    parser.add_argument(
        "--random-baseline",
        action="append",
        help="embeddings: NAME=DIR (repeat): the same architecture and vocabulary, random weights",
    )
    parser.add_argument("--st-reference", action="store_true", help="embeddings: sentence-transformers' encode too")
    parser.add_argument("--no-record", action="store_true", help="embeddings: print only")
    args = parser.parse_args(argv)
    command = common.command_line("glue", argv)
    if args.recipe == "embeddings":
        return embeddings(args, command)
    if args.recipe == "table":
        records = glue_report.print_tables(args.root, RECIPES)
        if args.record and records:  # each recipe ran at its own commit and time (in its row's note)
            print(
                "record:", common.write_result("glue", records, command=command, source=args.root, commit="(per row)")
            )
        return
    run_recipe(
        args.recipe,
        args.root,
        command,
        select=args.select,
        epochs=args.epochs,
        max_train_examples=args.max_train_examples,
        max_dev_examples=args.max_dev_examples,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        seed=args.seed,
        jit_compile=None if args.jit_compile is None else args.jit_compile == "true",
    )


if __name__ == "__main__":
    main()
