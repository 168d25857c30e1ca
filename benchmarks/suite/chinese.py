"""Chinese fine-tuning from one small Chinese checkpoint: MSRA NER entity F1 and review sentiment accuracy, and
training examples/s, ours (the user's Keras path) against HF's `BertForTokenClassification` /
`BertForSequenceClassification` on the same recipe.

The checkpoint (`benchmarks/zh_checkpoint.py`, built once into a cache folder and reused; nothing here can download
Google's `bert-base-chinese`): a 4-layer, 256-wide BERT in HF's layout with a character vocabulary learned from the
MSRA training text, pretrained briefly with HF's `BertForMaskedLM`. Weak on purpose-free grounds of time: it compares
two implementations on one recipe, it makes no quality claim.

Each task runs both sides one after the other, each in its own process (PyTorch never imports TensorFlow), 2 threads
each (`--threads`):
- ours (`suite/chinese_ours.py`): `BertTagger.from_preset(DIR, ...)` / `BertClassifier.from_preset(DIR, ...)`,
  `compile(optimizer=create_optimizer(lr))`, `fit` on the raw characters / review strings, the package's readers
  (the MSRA file's BMES tags as the reader detects them);
- HF (`suite/chinese_hf.py`): the models trained by HF `Trainer`'s recipe written out (`hf_loop.hf_train`), MSRA read
  as an HF user reads it (`M-` as `I-`: BMES as BIOES), run_ner.py's first-piece labels, dynamic padding.

Recipes (REFERENCE_RESULTS.md): AdamW (epsilon 1e-6, weight decay 0.01 off biases and LayerNorm), 10% linear warm-up
then linear decay, global clipping at 1.0, batch 32, length 128, 1 epoch, seed 0.
- NER: the first 20,000 sentences of `msra_ner/train.txt`, lr 5e-4; entity F1 on `dev.txt` (3,000 sentences) by
  seqeval's default mode (conlleval rules) for HF, the package's `entity_scores` for ours (cross-checked by seqeval).
- sentiment: the first 8,000 reviews of `zh_sentiment/train.tsv`, lr 2e-4; accuracy on `dev.tsv` (1,000 reviews).
Speed: training examples/s. Ours: the whole `fit` call; HF: its tokenization plus its training loop.

    python benchmarks/run.py chinese                          # both tasks, both sides; writes the record
    python benchmarks/run.py chinese --task sentiment         # one task (its rows of the record only)
    python benchmarks/run.py chinese --task ner --only hf     # one side (the other's JSON is kept)
    python benchmarks/run.py chinese --table                  # the tables of finished runs
    python benchmarks/run.py chinese --table --record         # ... and their record (a --no-record run's, later)
    python benchmarks/run.py chinese --max-train 64 --root /tmp/zh_smoke --no-record   # smoke (checkpoint built)

`--data-dir` (default `../shared/data`, or `$BERT_ZOO_DATA`) holds `msra_ner/` and `zh_sentiment/`; `--model DIR`
uses another checkpoint directory.
"""

import argparse
import os
import subprocess
import sys

import common
from common import now, read_json, uptime, write_json, write_result

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
TASKS = {
    "ner": dict(
        train=("msra_ner", "train.txt"),
        dev=("msra_ner", "dev.txt"),
        learning_rate=5e-4,
        max_train=20_000,
        metric="f1",
        title="MSRA NER dev entity F1",
        unit="F1",
        examples="sentences",
    ),
    "sentiment": dict(
        train=("zh_sentiment", "train.tsv"),
        dev=("zh_sentiment", "dev.tsv"),
        learning_rate=2e-4,
        max_train=8_000,
        metric="accuracy",
        title="Chinese review sentiment dev accuracy",
        unit="accuracy",
        examples="reviews",
    ),
}
RECIPE = dict(
    batch_size=32,
    sequence_length=128,
    warmup_ratio=0.1,
    weight_decay=0.01,
    adam_epsilon=1e-6,
    clip_norm=1.0,
    seed=0,
    threads=2,
)
CHECKPOINT_NAME = "small Chinese BERT (4x256, MSRA characters)"


def data_dir():
    return os.environ.get("BERT_ZOO_DATA") or common.DATA


def recipe_for(task, args):
    spec = TASKS[task]
    return dict(
        RECIPE,
        learning_rate=spec["learning_rate"],
        max_train=args.max_train or spec["max_train"],
        seed=args.seed,
        threads=args.threads,
    )


def run_side(task, side, args):
    """One side of one task in this process: trains, scores, writes `ROOT/TASK/SIDE.json`."""
    import importlib

    spec, out = TASKS[task], os.path.join(args.root, task)
    os.makedirs(out, exist_ok=True)
    module = importlib.import_module(f"suite.chinese_{side}")
    paths = [os.path.join(args.data_dir, *spec[key]) for key in ("train", "dev")]
    return getattr(module, f"run_{task}")(args.model, *paths, recipe_for(task, args), out)


def _side_command(task, side, args):
    return common.self_cmd(  # every argument a string
        "chinese",
        *("--task", task, "--only", side, "--root", args.root, "--data-dir", args.data_dir, "--model", args.model),
        *("--seed", args.seed, "--threads", args.threads),
        *(("--max-train", args.max_train) if args.max_train else ()),
    )


def _rows(task, ours, hf, command):
    spec = TASKS[task]
    rate = f"{spec['learning_rate']:.0e}".replace("e-0", "e-")
    budget = f"{ours.get('train_examples', '?'):,} {spec['examples']}, 1 epoch, lr {rate}"
    what = f"{spec['title']} ({CHECKPOINT_NAME}; {budget})"
    return [
        dict(
            what=what,
            unit=spec["unit"],
            ours=round(ours[spec["metric"]], 4),
            peer=round(hf[spec["metric"]], 4) if hf else None,
            peer_name="HF transformers",
            higher_is_better=True,
            command=command,
        ),
        dict(
            what=f"{spec['title'].rsplit(' dev ', 1)[0]} fine-tuning speed ({budget})",
            unit=f"{spec['examples']}/s",
            ours=round(ours["examples_per_second"], 1),
            peer=round(hf["examples_per_second"], 1) if hf else None,
            peer_name=f"HF transformers (PyTorch, {RECIPE['threads']} threads)",
            higher_is_better=True,
            command=command,
            note="ours: the whole `fit` call (tokenization and tracing included); "
            "HF: its tokenization plus its training loop",
        ),
    ]


def table(task, out):
    """Prints the task's table; returns `(ours, hf)` (None for a side not run)."""
    spec = TASKS[task]
    ours, hf = (read_json(os.path.join(out, f"{side}.json")) for side in ("ours", "hf"))
    print(f"\n{spec['title']} ({out}):\n")
    print(f"| system | {spec['metric']} | train {spec['examples']}/s | train s | final loss | load | date |")
    print("|---|---|---|---|---|---|---|")
    for name, r in (("ours (keras_bert_zoo, TF)", ours), ("HF transformers (PyTorch)", hf)):
        if not r:
            print(f"| {name} | (not run) | | | | | |")
            continue
        load = f"{r['loadavg_before'][0]:.1f}→{r['loadavg_after'][0]:.1f}"
        print(
            f"| {name} | {r[spec['metric']]:.4f} | {r['examples_per_second']:.1f} | {r['train_seconds']:.0f} | "
            f"{r['final_train_loss']:.4f} | {load} | {r['date'][:16]} |"
        )
    if ours and hf:
        difference = 100 * (ours[spec["metric"]] - hf[spec["metric"]])
        speed = ours["examples_per_second"] / hf["examples_per_second"]
        print(f"\nours − HF: {difference:+.2f} points; ours/HF training speed {speed:.2f}x")
    if task == "ner" and ours:
        print(f"ours, F1 by seqeval on our predictions (BMES as BIOES): {ours['f1_seqeval']:.4f}")
        same = hf and all(ours[k] == hf[k] for k in ("train_characters", "dev_characters"))
        print("the two readers " + ("read the same characters" if same else "differ (or HF not run): see the JSON"))
    return ours, hf


def record(tasks, root, command, machine_line):
    rows, loads = [], []
    for task in tasks:
        ours, hf = table(task, os.path.join(root, task))
        if ours:
            rows += _rows(task, ours, hf, command)
            loads += [r[k][0] for r in (ours, hf) if r for k in ("loadavg_before", "loadavg_after")]
    if rows:
        path = write_result(
            "chinese", rows, command, source=root, load=[min(loads), max(loads)], machine_info=machine_line
        )
        print(f"record: {path}")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run.py chinese", description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=("ner", "sentiment", "all"), default="all")
    parser.add_argument("--only", choices=("ours", "hf"), help="one side only (the other's JSON is kept)")
    parser.add_argument("--root", default="/tmp/bert_zoo_chinese", help="where the runs' JSON go (ROOT/TASK/)")
    parser.add_argument("--data-dir", default=data_dir(), help="folder holding msra_ner/ and zh_sentiment/")
    parser.add_argument("--model", help="checkpoint directory (default: zh_checkpoint.ensure_zh_checkpoint())")
    parser.add_argument("--max-train", type=int, help="first N training examples (default: each task's recipe)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads of each side")
    parser.add_argument("--table", action="store_true", help="print the tables of finished runs and exit")
    parser.add_argument("--record", action="store_true", help="with --table: also write the record")
    parser.add_argument("--no-record", action="store_true", help="do not write benchmarks/results (smoke runs)")
    return parser.parse_args(argv)


def main(argv=None):
    argv = list(sys.argv[2:] if argv is None else argv)
    args = parse_args(argv)
    tasks = list(TASKS) if args.task == "all" else [args.task]
    if args.table:
        tasks = [t for t in tasks if os.path.isdir(os.path.join(args.root, t))]
        if args.record:  # the command and host line of the run that wrote ROOT, when one run did
            run = read_json(os.path.join(args.root, "run.json")) or {}
            command = run.get("command", "python benchmarks/run.py chinese (sides run separately)")
            return record(tasks, args.root, command, run.get("machine_line"))
        return [table(task, os.path.join(args.root, task)) for task in tasks]
    if args.model is None:
        from zh_checkpoint import ensure_zh_checkpoint

        args.model = ensure_zh_checkpoint()
    if args.only:
        return [run_side(task, args.only, args) for task in tasks]
    command = common.command_line("chinese", argv)
    started, machine_line = now(), common.machine_line()
    print(f"{started}: {uptime()}\nmachine: {machine_line}", flush=True)
    for task in tasks:
        for side in ("ours", "hf"):
            subprocess.run(_side_command(task, side, args), check=True)
    run = dict(command=command, started=started, finished=now(), machine_line=machine_line)
    write_json(os.path.join(args.root, "run.json"), run)
    if not args.no_record:
        return record(tasks, args.root, command, machine_line)
    for task in tasks:
        table(task, os.path.join(args.root, task))


if __name__ == "__main__":
    main()
