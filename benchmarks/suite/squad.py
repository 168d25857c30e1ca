"""SQuAD v1.1 span QA: all-MiniLM-L6-v2 fine-tuned on squad/train.json, scored on squad/dev.json, ours and HF's.

Same questions, windows and recipe; one side after the other, each in its own process:
- ours: `keras_bert_zoo.finetune("qa", ...)` (`bert-zoo finetune qa`), `stride_mode="overlap"`;
- HF: `BertForQuestionAnswering` in PyTorch, the features, training loop and post-processing of
  HF's `run_qa.py` / `utils_qa.py` written out here (no `Trainer`, no `datasets`).

Recipe (REFERENCE_RESULTS.md): question at most 64 word pieces (Google's `max_query_length`;
cut questions counted); windows of `--sequence-length` (256), consecutive windows overlapping by
`--overlap` (128; HF's `stride`); `--epochs` (1), batch 32, lr 5e-5, AdamW (epsilon 1e-6, weight
decay 0.01 off biases and LayerNorm), 10% linear warm-up then linear decay, clipping at 1.0, seed
0. A window without the first gold answer is labelled [CLS]; train labels from the FIRST gold
answer (run_qa.py). Post-processing: top-20 starts x top-20 ends per window, spans outside the
passage, reversed or over 30 tokens dropped, best start + end logit over the question's windows.
HF's features: `tokenizer(question.lstrip(), context, truncation="only_second", max_length, stride,
return_overflowing_tokens=True, return_offsets_mapping=True)` (fast tokenizer), run_qa.py's offset
rules, DYNAMIC padding (run_qa.py's default pads to 256: same logits, slower); run_qa.py has no
max-context filter (Google's run_squad.py and ours have one): a named difference.

Scores: dev EM and F1 of the model at the END of training, both sides' `{id: answer}` scored by
the official v1.1 rules (`keras_bert_zoo.tasks.span_qa.metrics`, tested against the official script).
Speed: training windows/s over the training steps only; the sides run one after the other (see
their load): side by side, interleaved, is `run.py finetune_speed --task qa`.
Writes `ROOT/RUN/{ours,hf,results}.json` and `predictions_*.json` (RUN: `s{length}-e{epochs}`,
`-n{N}` with --max-train-questions) and the record `benchmarks/results/squad.HOSTKIND.json`.

    python benchmarks/run.py squad                         # both sides, 256 / 1 epoch (REFERENCE_RESULTS' HF figure)
    python benchmarks/run.py squad --sequence-length 384 --epochs 2   # the full recipe (hours on 2 cores)
    python benchmarks/run.py squad --only hf               # one side only (the other's JSON is kept if present)
    python benchmarks/run.py squad --table                 # the table of a finished run
    python benchmarks/run.py squad --max-train-questions 64 --max-dev-questions 32 --root /tmp/squad_smoke --no-record
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
    read_json,
    set_tf_threads,
    uptime,
    versions,
    write_json,
    write_result,
)
from hf_loop import hf_train
from suite import squad_hf

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
TRAIN, DEV = (os.path.join(common.DATA, "squad", f"{split}.json") for split in ("train", "dev"))
RECIPE = dict(
    learning_rate=5e-5,
    batch_size=32,
    warmup_ratio=0.1,
    weight_decay=0.01,
    adam_epsilon=1e-6,
    clip_norm=1.0,
    seed=0,
    threads=2,
    max_query_length=64,
    n_best_size=20,
    max_answer_length=30,
)
HF_REFERENCE = {
    (256, 1): dict(
        exact_match=0.280,
        f1=0.444,
        windows=9027,
        train_seconds=1974,  # REFERENCE_RESULTS
        windows_per_second=4.6,
    )
}


def run_dir(root, sequence_length, epochs, max_train, seed=0):
    return os.path.join(
        root,
        f"s{sequence_length}-e{epochs}" + (f"-n{max_train}" if max_train else "") + (f"-seed{seed}" if seed else ""),
    )


def score(dataset_path, predictions, ids=None):
    """SQuAD v1.1 exact match and F1 (`keras_bert_zoo.tasks.span_qa.metrics`, the official script's rules) of
    `predictions` ({id: text}) over the file's questions, or over `ids` (the first N dev questions)."""
    squad_scores = common.lib("squad_scores")
    keep = set(ids) if ids is not None else None
    golds = {
        e["id"]: e["answers"]["text"] for e in squad_hf.read_squad(dataset_path) if keep is None or e["id"] in keep
    }
    scores = squad_scores(predictions, golds)
    return dict(exact_match=float(scores["exact_match"]), f1=float(scores["f1"]), questions=len(golds))


def run_hf(sequence_length, overlap, epochs, max_train, max_dev, out):
    import random

    import numpy as np
    import torch
    import transformers
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer, BertForQuestionAnswering

    torch.set_num_threads(RECIPE["threads"])
    seed = RECIPE["seed"]
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    transformers.set_seed(seed)
    minilm = minilm_path()
    train, dev = squad_hf.read_squad(TRAIN, max_train), squad_hf.read_squad(DEV, max_dev)
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    assert tokenizer.is_fast and tokenizer.padding_side == "right"
    model = BertForQuestionAnswering.from_pretrained(minilm)

    t = time.perf_counter()
    cut_train = squad_hf.truncate_questions(tokenizer, train, RECIPE["max_query_length"])
    train_features = squad_hf.hf_train_features(tokenizer, train, sequence_length, overlap)
    tokenize_seconds = time.perf_counter() - t
    cut_dev = squad_hf.truncate_questions(tokenizer, dev, RECIPE["max_query_length"])
    dev_features = squad_hf.hf_eval_features(tokenizer, dev, sequence_length, overlap)
    labelled = sum(f["start_positions"] != 0 for f in train_features)
    collate = hf_loop.pad_collate(tokenizer.pad_token_id, ("start_positions", "end_positions"))
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        train_features, batch_size=RECIPE["batch_size"], shuffle=True, generator=generator, collate_fn=collate
    )
    trained = hf_train(
        model,
        loader,
        epochs,
        f"{minilm} on {len(train)} questions ({len(train_features)} windows of <= {sequence_length}, "
        f"overlap {overlap}; {labelled} contain the answer), dev {len(dev)} questions "
        f"({len(dev_features)} windows)",
        RECIPE,
        log_every=20,
    )

    # --- dev: logits per window, run_qa.py's post-processing, official scoring -----------------------
    t = time.perf_counter()
    predictions = squad_hf.hf_dev_predictions(
        model, tokenizer, dev, dev_features, RECIPE["n_best_size"], RECIPE["max_answer_length"]
    )
    predict_seconds = time.perf_counter() - t
    write_json(os.path.join(out, "predictions_hf.json"), predictions)
    scores = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    return _side_record(
        out,
        "hf",
        scores,
        trained,
        len(train_features) * epochs,
        dict(
            train_windows=len(train_features),
            train_windows_with_answer=labelled,
            train_questions=len(train),
            dev_windows=len(dev_features),
            questions_cut_at_64=dict(train=cut_train, dev=cut_dev),
            warmup_steps=trained["warmup_steps"],
            padding="dynamic (longest window of each batch)",
            tokenize_train_seconds=tokenize_seconds,
            dev_predict_seconds=predict_seconds,
            versions=versions("torch", "transformers", "tokenizers"),
            torch_threads=torch.get_num_threads(),
            tensorflow_in_process="tensorflow" in sys.modules,
        ),
    )


def _side_record(out, side, scores, trained, windows, extra):
    """`OUT/SIDE.json`: the side's dev scores, its training speed and load, and `extra`."""
    record = dict(
        system=side,
        exact_match=scores["exact_match"],
        f1=scores["f1"],
        dev_questions=scores["questions"],
        train_seconds=trained["train_seconds"],
        windows_per_second=windows / trained["train_seconds"],
        steps=trained["steps"],
        final_train_loss=trained["final_train_loss"],
        date=now(),
        git_commit=git_commit(),
        predictions=os.path.join(out, f"predictions_{side}.json"),
        **{k: trained.get(k) for k in ("loadavg_before", "loadavg_after", "uptime_before", "uptime_after")},
        **extra,
    )
    write_json(os.path.join(out, f"{side}.json"), record)
    print(
        f"{side}: dev EM {record['exact_match']:.4f} / F1 {record['f1']:.4f}, {record['windows_per_second']:.2f} "
        f"train windows/s over {record['train_seconds']:.0f} s",
        flush=True,
    )
    return record


# --- ours ------------------------------------------------------------------------------------------
def run_ours(sequence_length, overlap, epochs, max_train, max_dev, out):
    set_tf_threads(RECIPE["threads"])
    from keras_bert_zoo import finetune

    minilm = minilm_path()
    dev = squad_hf.read_squad(DEV, max_dev)
    load_before, uptime_before = os.getloadavg(), uptime()
    start = time.perf_counter()
    model, metrics = finetune(
        "qa",
        minilm,
        TRAIN,
        DEV,
        os.path.join(out, "ours_model"),
        doc_stride=overlap,
        stride_mode="overlap",
        max_query_length=RECIPE["max_query_length"],
        epochs=epochs,
        batch_size=RECIPE["batch_size"],
        learning_rate=RECIPE["learning_rate"],
        warmup_ratio=RECIPE["warmup_ratio"],
        sequence_length=sequence_length,
        max_train_examples=max_train,
        max_dev_examples=max_dev,
        select="final",
        eval_every=0,
        seed=RECIPE["seed"],
        verbose=2,
    )
    wall = time.perf_counter() - start
    load_after_train, uptime_after_train = os.getloadavg(), uptime()
    # The same model's answers, written in the official form and scored by the official rules written out here.
    t = time.perf_counter()
    answers = model.predict_answers(
        [e["question"] for e in dev],
        [e["context"] for e in dev],
        n_best=RECIPE["n_best_size"],
        max_answer_length=RECIPE["max_answer_length"],
    )
    predict_seconds = time.perf_counter() - t
    predictions = {e["id"]: a["answer"] for e, a in zip(dev, answers, strict=True)}
    write_json(os.path.join(out, "predictions_ours.json"), predictions)
    official = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    windows = _train_windows(model, metrics, max_train)
    trained = dict(
        metrics,
        loadavg_before=list(load_before),
        loadavg_after=list(load_after_train),
        uptime_before=uptime_before,
        uptime_after=uptime_after_train,
    )
    return _side_record(
        out,
        "ours",
        official,
        trained,
        windows * epochs,
        dict(
            metrics=metrics,
            finetune_exact_match=metrics.get("exact_match"),
            finetune_f1=metrics.get("f1"),
            train_windows=windows,
            train_questions=metrics["train_examples"],
            wall_seconds=wall,
            padding="length buckets (each batch cut to the bucket holding its longest window)",
            dev_predict_seconds=predict_seconds,
            versions=versions("tensorflow", "keras", "tensorflow-text"),
            metrics_json=os.path.join(out, "ours_model", "metrics.json"),
        ),
    )


def _train_windows(model, metrics, max_train):
    """Training windows of ours (to turn steps into windows/s): finetune's count, or recounted."""
    if metrics.get("train_windows"):
        return int(metrics["train_windows"])
    make_qa_windows = common.lib("make_qa_windows")

    train = squad_hf.read_squad(TRAIN, max_train)
    return len(make_qa_windows(model.preprocessor, [e["question"] for e in train], [e["context"] for e in train]))


def print_table(out, sequence_length, epochs):
    ours, hf = read_json(os.path.join(out, "ours.json")), read_json(os.path.join(out, "hf.json"))
    print(
        f"\nSQuAD v1.1, all-MiniLM-L6-v2, windows of {sequence_length} (overlap 128), {epochs} epoch(s), dev at the "
        f"end of training, official v1.1 rules ({out}):\n\n| system | dev EM | dev F1 | train windows | steps | "
        "train s | train windows/s | load 1-min (before→after) | date |\n|---|---|---|---|---|---|---|---|---|"
    )
    for name, r in (("ours (keras_bert_zoo, TF)", ours), ("HF transformers (PyTorch)", hf)):
        load = f"{r['loadavg_before'][0]:.1f}→{r['loadavg_after'][0]:.1f}" if r and r.get("loadavg_before") else "?"
        print(
            f"| {name} | (not run) |"
            if r is None
            else f"| {name} | {r['exact_match']:.4f} | {r['f1']:.4f} | {r['train_windows']:,} | {r['steps']} | "
            f"{r['train_seconds']:.0f} | {r['windows_per_second']:.2f} | {load} | {r['date'][:16]} |"
        )
    summary = {}
    if ours and hf:
        summary.update(
            exact_match_difference=ours["exact_match"] - hf["exact_match"],
            f1_difference=ours["f1"] - hf["f1"],
            speed_ratio=ours["windows_per_second"] / hf["windows_per_second"],
        )
        print(
            f"\nours − HF dev EM: {summary['exact_match_difference']:+.4f}, F1: {summary['f1_difference']:+.4f}; "
            f"ours/HF training windows/s: {summary['speed_ratio']:.2f}x (one process after the other: see the load)."
        )
    ref = HF_REFERENCE.get((sequence_length, epochs))
    if ref:
        print(
            f"REFERENCE_RESULTS.md (HF, another session): dev EM {ref['exact_match']} / F1 {ref['f1']}, "
            f"{ref['windows']:,} windows, {ref['windows_per_second']} windows/s."
        )
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(prog="run.py squad", description=__doc__.split("\n")[0])
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument(
        "--overlap",
        type=int,
        default=128,
        help="tokens shared by consecutive windows (HF's stride; ours: stride_mode='overlap')",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-train-questions", type=int, help="keep the first N training questions (smoke tests)")
    parser.add_argument("--max-dev-questions", type=int, help="keep the first N dev questions (smoke tests)")
    two_sides.side_options(parser, "/tmp/bert_zoo_squad", "s<len>-e<epochs>-seed<N>")
    args = parser.parse_args(argv)
    RECIPE.update(seed=args.seed, threads=args.threads)
    out = run_dir(args.root, args.sequence_length, args.epochs, args.max_train_questions, args.seed)
    side_args = (args.sequence_length, args.overlap, args.epochs, args.max_train_questions, args.max_dev_questions, out)
    if args.table:
        return print_table(out, args.sequence_length, args.epochs)
    if args.only:
        return (run_ours if args.only == "ours" else run_hf)(*side_args)
    # Both, one after the other, each in a fresh process (TF and PyTorch thread pools never mixed).
    passed = [a for a in (sys.argv[2:] if argv is None else argv) if a not in ("--table", "--no-record")]
    recipe = dict(
        RECIPE,
        epochs=args.epochs,
        sequence_length=args.sequence_length,
        overlap=args.overlap,
        max_train_questions=args.max_train_questions,
        max_dev_questions=args.max_dev_questions,
        train=TRAIN,
        dev=DEV,
    )
    two_sides.run_both_sides(
        "squad",
        passed,
        out,
        lambda: print_table(out, args.sequence_length, args.epochs),
        dict(recipe, model=minilm_path()),
        common.command_line("squad", passed),
    )
    if not args.no_record:
        print(f"record: {record_result(out)}")


def record_result(out):
    """`benchmarks/results/squad.HOSTKIND.json` from a finished run's results.json."""
    results = read_json(os.path.join(out, "results.json"))
    if not results or not results.get("ours"):
        return None
    ours, hf = results["ours"], results.get("hf") or {}
    recipe = results.get("recipe", {})
    what = (
        f"SQuAD v1.1 dev (MiniLM, {recipe.get('epochs', '?')} epoch(s), windows of "
        f"{recipe.get('sequence_length', '?')})"
    )
    rows = [
        {
            "what": f"{what}: {name}",
            "unit": "fraction",
            "ours": ours.get(key),
            "peer": hf.get(key),
            "peer_name": "HF transformers",
            "higher_is_better": True,
        }
        for name, key in (("exact match", "exact_match"), ("F1", "f1"))
    ]
    return write_result(
        "squad",
        rows,
        command=results.get("command", "python benchmarks/run.py squad"),
        source=os.path.join(out, "results.json"),
        started=results.get("started"),
        commit=results.get("git_commit_start"),
    )


if __name__ == "__main__":
    main()
