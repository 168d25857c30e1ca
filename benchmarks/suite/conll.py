"""CoNLL-2003 NER: all-MiniLM-L6-v2 fine-tuned on eng.train, scored on eng.testa, ours and HF's in one run.

Both sides get the same data and the same recipe, and are measured in the same
invocation (one after the other, each in its own process so TensorFlow and PyTorch
never share a thread pool), so their ratio is read under comparable machine load:

- ours: `keras_bert_zoo.finetune("tag", ...)` (what `bert-zoo finetune tag` calls);
- HF: transformers `BertForTokenClassification` in PyTorch (`torch.set_num_threads(2)`),
  a plain training loop written out here (what `run_ner.py`/`Trainer` do).

The recipe (REFERENCE_RESULTS.md): the real all-MiniLM-L6-v2 checkpoint, `--epochs`
(default 3), lr 5e-5, batch 32, max length 128, AdamW (betas 0.9/0.999, epsilon
1e-6 on both sides, weight decay 0.01 not on biases or LayerNorm weights),
10% linear warm-up then linear decay to 0 (`get_linear_schedule_with_warmup`, warm-up
steps `round(0.1 * total)` on both sides), global gradient clipping at norm 1.0, seed 0,
only the first word piece of a word labelled (-100 elsewhere: HF run_ner.py's rule), the
IOB1 files read as IOB2 by `keras_bert_zoo.tasks.tagger.data.read_tagged` for
BOTH sides, so the sentences, words and tags are identical.

Known differences, by design of each side (reported, not hidden):
- length 128: HF truncates (train and dev) and pads each batch to its longest
  sentence; ours reads a longer sentence in overlapping windows (train and dev) and
  packs each random batch's windows end to end into rows of 64 positions (finetune's
  default; each window attends only to itself, so the batch and its loss are the padded
  batch's: `preprocessing/packing.py`); `--batching bucketed` pads each batch to within 8
  pieces of its longest instead, `--batching by_length` groups batches by length. Words HF cannot
  see at 128 are predicted "O"; the run counts them (few on CoNLL-2003).
- the number of steps per epoch can differ by a few (ours: windows, and one partial
  batch per length bucket; HF: ceil(sentences / 32)); both are in the results.

Scores: the dev entity F1 of the model at the END of training (no best-of selection).
HF's is seqeval's `f1_score` (default mode = conlleval rules) on word-level predictions
(the first piece of each word). Ours is `keras_bert_zoo.tasks.tagger.metrics`, as returned by
`finetune`, and is cross-checked here with seqeval on the same model's predictions.
Speed: training sentences per second, training steps only (evaluation excluded; HF's
one-off tokenization of the training set is timed separately and not included).

Every run writes `ROOT/RUN/ours.json`, `ROOT/RUN/hf.json` and `ROOT/RUN/results.json`
(both sides, the ratios, the recipe, command, date, load average, git commit) and prints
a markdown table; RUN is `e{epochs}` (plus `-n{N}` with --max-train-sentences).

    python benchmarks/run.py conll --epochs 1              # both sides, 1 epoch (REFERENCE_RESULTS' HF figure)
    python benchmarks/run.py conll                         # both sides, 3 epochs (the usual recipe)
    python benchmarks/run.py conll --epochs 1 --only hf    # one side only (the other's JSON is kept if present)
    python benchmarks/run.py conll --epochs 1 --table      # the table of a finished run
    python benchmarks/run.py conll --max-train-sentences 300 --epochs 1 --root /tmp/conll_smoke --no-record  # smoke
"""

import argparse
import os
import sys
import time

import common
import hf_loop
import two_sides
from common import (
    git_commit,
    minilm_path,
    now,
    set_tf_threads,
    uptime,
    versions,
    write_json,
)
from hf_loop import hf_train
from suite import conll_hf, conll_report

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
DATA = os.path.join(common.DATA, "conll2003")
TRAIN = os.path.join(DATA, "eng.train")
DEV = os.path.join(DATA, "eng.testa")

RECIPE = dict(
    learning_rate=5e-5,
    batch_size=32,
    sequence_length=128,
    warmup_ratio=0.1,
    weight_decay=0.01,
    adam_epsilon=1e-6,
    clip_norm=1.0,
    seed=0,
    threads=2,
)


def run_dir(root, epochs, max_train, seed=0):
    return os.path.join(root, f"e{epochs}" + (f"-n{max_train}" if max_train else "") + (f"-seed{seed}" if seed else ""))


def _seqeval(true, pred):
    from seqeval.metrics import f1_score, precision_score, recall_score

    return dict(
        f1=float(f1_score(true, pred)),
        precision=float(precision_score(true, pred)),
        recall=float(recall_score(true, pred)),
    )


def _per_type(true, pred):
    """Per-type F1 with keras_bert_zoo.tasks.tagger.metrics (conlleval rules), for the table."""
    entity_scores = common.lib("entity_scores")

    scores = entity_scores(true, pred)
    return {k: v for k, v in scores.items() if k.startswith(("f1_", "support_"))}


# --- ours -------------------------------------------------------------------------------------
def run_ours(epochs, max_train, out, batching="auto"):
    set_tf_threads(RECIPE["threads"])
    from keras_bert_zoo import finetune

    entity_scores = common.lib("entity_scores")
    read_tagged = common.lib("read_tagged")
    TaggingLayout = common.lib("TaggingLayout")

    minilm = minilm_path()
    load_before, uptime_before = os.getloadavg(), uptime()
    start = time.perf_counter()
    model, metrics = finetune(
        "tag",
        minilm,
        TRAIN,
        DEV,
        os.path.join(out, "ours_model"),
        layout=TaggingLayout(),
        epochs=epochs,
        batch_size=RECIPE["batch_size"],
        learning_rate=RECIPE["learning_rate"],
        warmup_ratio=RECIPE["warmup_ratio"],
        sequence_length=RECIPE["sequence_length"],
        max_train_examples=max_train,
        select="final",
        eval_every=0,
        seed=RECIPE["seed"],
        batching=batching,
        verbose=2,
    )
    wall = time.perf_counter() - start
    # Cross-check: the same model's word predictions, scored by seqeval and by our metric again.
    dev = read_tagged(DEV, label_names=model.label_names)
    t = time.perf_counter()
    predicted = model.predict_tags(dev.words)
    predict_seconds = time.perf_counter() - t
    again = entity_scores(dev.tags, predicted)
    record = {
        "system": "ours",
        "batching": {"auto": "packed"}.get(batching, batching),
        "metrics": metrics,
        "f1": metrics["f1"],
        "precision": metrics["precision"],
        "recall": metrics["recall"],
        "seqeval": _seqeval(dev.tags, predicted),
        "f1_recomputed": again["f1"],
        "per_type": _per_type(dev.tags, predicted),
        "train_seconds": metrics["train_seconds"],
        "sentences_per_second": metrics["train_examples_per_second"],
        "steps": metrics["steps"],
        "train_sentences": metrics["train_examples"],
        "dev_sentences": len(dev),
        "dev_words": dev.num_words,
        "dev_words_unseen": 0,
        "dev_predict_seconds": predict_seconds,
        "final_train_loss": metrics["final_train_loss"],
        "wall_seconds": wall,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "uptime_before": uptime_before,
        "uptime_after": uptime(),
        "date": now(),
        "git_commit": git_commit(),
        "versions": versions("tensorflow", "keras"),
        "metrics_json": os.path.join(out, "ours_model", "metrics.json"),
    }
    write_json(os.path.join(out, "ours.json"), record)
    print(
        f"ours: dev F1 {record['f1']:.4f} (seqeval {record['seqeval']['f1']:.4f}), "
        f"{record['sentences_per_second']:.1f} train sentences/s over {record['train_seconds']:.0f} s",
        flush=True,
    )
    return record


def run_hf(epochs, max_train, out):
    import random

    import numpy as np
    import torch
    import transformers
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer, BertForTokenClassification

    # Without the package's __init__ (TensorFlow): the PyTorch process has no TensorFlow in it.
    read_tagged = common.lib("read_tagged", bare=True)
    common.lib("entity_scores", bare=True)
    torch.set_num_threads(RECIPE["threads"])
    seed = RECIPE["seed"]
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    transformers.set_seed(seed)
    minilm = minilm_path()
    train = read_tagged(TRAIN, max_examples=max_train)  # IOB1 -> IOB2, exactly as finetune reads it
    dev = read_tagged(DEV, label_names=train.label_names)
    names = list(train.label_names)
    index = {n: i for i, n in enumerate(names)}
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    model = BertForTokenClassification.from_pretrained(
        minilm, num_labels=len(names), id2label=dict(enumerate(names)), label2id=index
    )

    t = time.perf_counter()
    train_features, train_counts = conll_hf.encode_words(
        tokenizer, train.words, train.tags, index, RECIPE["sequence_length"]
    )
    tokenize_seconds = time.perf_counter() - t
    dev_features, dev_counts = conll_hf.encode_words(tokenizer, dev.words, None, index, RECIPE["sequence_length"])
    collate = hf_loop.pad_collate(tokenizer.pad_token_id, pad_labels=True)
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        [{k: v for k, v in f.items() if k != "word_ids"} for f in train_features],
        batch_size=RECIPE["batch_size"],
        shuffle=True,
        generator=generator,
        collate_fn=collate,
    )
    trained = hf_train(model, loader, epochs, f"{minilm} on {len(train)} sentences, dev {len(dev)}", RECIPE)
    train_seconds = trained["train_seconds"]

    # --- dev: word-level predictions from the first piece of each word ---------------------------
    model.eval()
    t = time.perf_counter()
    predicted = conll_hf.predict_words(model, collate, dev_features, dev.words, names)
    predict_seconds = time.perf_counter() - t
    scores = _seqeval(dev.tags, predicted)
    record = {
        "system": "hf",
        "f1": scores["f1"],
        "precision": scores["precision"],
        "recall": scores["recall"],
        "seqeval": scores,
        "per_type": _per_type(dev.tags, predicted),
        "sentences_per_second": len(train) * epochs / train_seconds,
        **trained,
        "train_sentences": len(train),
        "dev_sentences": len(dev),
        "dev_words": dev.num_words,
        "dev_words_unseen": dev_counts["words_unseen"],
        "dev_counts": dev_counts,
        "train_counts": train_counts,
        "tokenize_train_seconds": tokenize_seconds,
        "dev_predict_seconds": predict_seconds,
        "uptime_after": uptime(),
        "date": now(),
        "git_commit": git_commit(),
        "versions": versions("torch", "transformers", "seqeval"),
        "torch_threads": torch.get_num_threads(),
        "tensorflow_in_process": "tensorflow" in sys.modules,
    }
    write_json(os.path.join(out, "hf.json"), record)
    print(
        f"HF: dev F1 {record['f1']:.4f}, {record['sentences_per_second']:.1f} train sentences/s over "
        f"{train_seconds:.0f} s; {dev_counts['words_unseen']} dev words unseen at length 128",
        flush=True,
    )
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(prog="run.py conll", description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-train-sentences", type=int, help="keep the first N training sentences (smoke tests)")
    two_sides.side_options(parser, "/tmp/bert_zoo_conll", "e<epochs>-seed<N>")
    parser.add_argument(
        "--record", action="store_true", help="with --table: also write its benchmarks/results/conll.HOSTKIND.json"
    )
    parser.add_argument(
        "--batching",
        choices=("auto", "by_length", "bucketed"),
        default="auto",
        help="ours: finetune's batching: auto (packed rows), by_length (batches grouped by "
        "length), bucketed (random batches each padded to their longest, as HF's)",
    )
    args = parser.parse_args(argv)
    RECIPE.update(seed=args.seed, threads=args.threads)
    out = run_dir(args.root, args.epochs, args.max_train_sentences, args.seed)
    if args.table:
        if args.record and not os.path.exists(os.path.join(out, "results.json")):
            conll_report.assemble_results(out, args.epochs, args.threads)
        else:
            conll_report.print_table(out, args.epochs, args.threads)
        if args.record:
            print(f"record: {conll_report.record_result(out, args.epochs, args.threads)}")
        return
    if args.only == "ours":
        run_ours(args.epochs, args.max_train_sentences, out, batching=args.batching)
        return
    if args.only == "hf":
        run_hf(args.epochs, args.max_train_sentences, out)
        return
    # Both, one after the other, each in a fresh process (TF and PyTorch thread pools never mixed).
    side_args = ["--epochs", args.epochs, "--root", args.root, "--seed", args.seed, "--threads", args.threads]
    side_args += ["--max-train-sentences", args.max_train_sentences] if args.max_train_sentences else []
    recipe = dict(RECIPE, epochs=args.epochs, max_train_sentences=args.max_train_sentences, train=TRAIN, dev=DEV)
    two_sides.run_both_sides(
        "conll",
        [*map(str, side_args), "--batching", args.batching],
        out,
        lambda: conll_report.print_table(out, args.epochs, args.threads),
        dict(recipe, model=minilm_path()),
        common.command_line("conll", argv),
    )
    if not args.no_record:
        print(f"record: {conll_report.record_result(out, args.epochs, args.threads)}")


if __name__ == "__main__":
    main()
