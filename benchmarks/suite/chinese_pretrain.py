"""The seeds' Chinese recipe on MSRA: character vs whole-word masking from scratch, and continued pretraining.

Steps (each stage's figures are kept in `--out/stages/NAME.json`, so a rerun resumes; the record is rewritten
after every stage, so a cut-short run still reports what it measured):

1. `vocab`: a WordPiece vocabulary learned from the MSRA NER training text (`learn_vocabulary_file`, what
   `bert-zoo vocab` runs), one for both pretraining runs.
2. `pretrain_char`, `pretrain_wwm`: a 4x256 BERT (`bert_mini_uncased`'s shape) pretrained from scratch on that
   text at the same budget (steps, batch, length, learning rate, masking seed), masked-LM only (`--nsp none`):
   character masking (`--whole-word-masking` off) against whole-word masking over jieba's words.
3. `finetune_*`: each checkpoint fine-tuned on the first `--finetune-train` MSRA training sentences (1 epoch) and
   scored on the 3,000 dev sentences (entity F1, conlleval rules), one run per fine-tuning seed.
4. `continued`: a small Chinese checkpoint in HF's layout (`benchmarks/zh_checkpoint.py`) continued on the MSRA
   text with whole-word masking (`pretrain --model DIR`), then fine-tuned, against the same checkpoint fine-tuned
   directly (`--continued-seeds`, one fine-tuning seed by default: the issue asks three seeds of char vs wwm).
5. `pipeline`: the input pipeline's rate with the segmenter (jieba) and without (character masking), against the
   model's train step, both in tokens/s.

Fine-tuning reads MSRA's files as distributed: the tagger detects their BMES tags (and counts the few tags that
continue no entity, as conlleval does).

    python benchmarks/run.py chinese_pretrain                       # the recorded budget (see RECIPE)
    python benchmarks/run.py chinese_pretrain --pretrain-steps 4 --continue-steps 2 --finetune-train 64 \\
        --seeds 0 --no-record --out /tmp/zh_smoke                   # a smoke run
"""

import argparse
import json
import os
import statistics
import sys
import time

import common
from common import set_tf_threads

# The shared data beside the repository; `BERT_ZOO_DATA` points elsewhere (e.g. from a worktree).
MSRA = os.path.join(os.environ.get("BERT_ZOO_DATA") or common.DATA, "msra_ner")
RECIPE = dict(
    preset="bert_mini_uncased",  # 4 layers, 256 wide, 4 heads
    vocab_size=8000,
    sequence_length=64,  # pretraining rows: MSRA sentences average 43 characters
    batch_size=32,
    pretrain_steps=1600,
    pretrain_learning_rate=1e-3,
    continue_steps=300,
    continue_learning_rate=1e-4,
    finetune_train=10_000,
    finetune_batch_size=32,
    finetune_learning_rate=5e-4,
    finetune_sequence_length=128,
    epochs=1,
    seeds=(0, 1, 2),
    continued_seeds=(0,),  # continued vs direct: one fine-tuning seed (the issue asks 3 for char vs wwm)
    threads=2,
    sentences_per_document=10,
)


def read_msra(path):
    """[(characters, tags)] of an MSRA NER file (`char tag` a line, CRLF, blank line between sentences)."""
    sentences, chars, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.strip():
                char, tag = line.split(" ")[:2]
                chars.append(char)
                tags.append(tag)
            elif chars:
                sentences.append((chars, tags))
                chars, tags = [], []
    if chars:
        sentences.append((chars, tags))
    return sentences


def prepare_data(out):
    """The pretraining corpus (BERT format: a sentence a line, a blank line between documents) in `out/data`, and
    the NER files as distributed (the tagger reads their BMES tags as they are)."""
    data = os.path.join(out, "data")
    os.makedirs(data, exist_ok=True)
    paths = {"corpus": os.path.join(data, "corpus.txt")}
    paths.update(train=os.path.join(MSRA, "train.txt"), dev=os.path.join(MSRA, "dev.txt"))
    if os.path.exists(paths["corpus"]):
        return paths
    per_doc = RECIPE["sentences_per_document"]
    with open(paths["corpus"], "w", encoding="utf-8") as f:
        for i, (chars, _) in enumerate(read_msra(paths["train"])):
            f.write("".join(chars) + "\n" + ("\n" if i % per_doc == per_doc - 1 else ""))
    return paths


def budget():
    """The recipe a stage's figures depend on: all of RECIPE but which seeds run (each seed is a stage of its own)."""
    return {k: v for k, v in RECIPE.items() if k not in ("seeds", "continued_seeds")}


def stage(out, name, fn):
    """Runs `fn()` once: its JSON figures are kept in `out/stages/NAME.json` and reused by a rerun of the same
    budget. A stage kept from another budget is refused (its figures would be recorded under this one)."""
    path = os.path.join(out, "stages", f"{name}.json")
    if os.path.exists(path):
        figures = common.read_json(path)
        if figures.get("budget") != json.loads(json.dumps(budget())):
            raise SystemExit(
                f"{path} was measured at another budget ({figures.get('budget')}), not this run's {budget()}: "
                "give another --out, or delete that folder to start over."
            )
        return figures
    print(f"--- {name} ({common.now()})", flush=True)
    start = time.perf_counter()
    figures = dict(fn(), stage_seconds=round(time.perf_counter() - start, 1), budget=budget())
    common.write_json(path, figures)
    return figures


def learn_vocab(paths, out):
    vocab = common.lib("learn_vocabulary_file")(paths["corpus"], RECIPE["vocab_size"], os.path.join(out, "vocab.txt"))
    return {"vocabulary_size": len(vocab), "path": os.path.join(out, "vocab.txt")}


def pretrain_run(paths, out, name, whole_word, steps, learning_rate, vocab=None, model=None):
    from keras_bert_zoo import pretrain

    _, metrics = pretrain(
        paths["corpus"],
        os.path.join(out, name),
        preset=None if model else RECIPE["preset"],
        model=model,
        vocab=vocab,
        sequence_length=RECIPE["sequence_length"],
        batch_size=RECIPE["batch_size"],
        steps=steps,
        learning_rate=learning_rate,
        nsp="none",
        whole_word_masking=whole_word,
        whole_word_segmenter="auto",
        eval_every=steps,
        jit_compile=False,
        overwrite=True,
        verbose=2,
    )
    return {k: metrics[k] for k in ("train_mlm_accuracy", "train_mlm_loss", "tokens_per_second", "train_seconds")}


def finetune_run(paths, model_dir, out, seed):
    from keras_bert_zoo import finetune

    _, metrics = finetune(
        "tag",
        model_dir,
        paths["train"],
        paths["dev"],
        out,
        layout=common.lib("TaggingLayout")(),
        epochs=RECIPE["epochs"],
        batch_size=RECIPE["finetune_batch_size"],
        learning_rate=RECIPE["finetune_learning_rate"],
        sequence_length=RECIPE["finetune_sequence_length"],
        max_train_examples=RECIPE["finetune_train"],
        select="final",
        eval_every=0,
        seed=seed,
        verbose=2,
        overwrite=True,
    )
    return {k: metrics[k] for k in ("f1", "precision", "recall", "train_seconds") if k in metrics}


def pipeline_speed(paths, vocab, batches=40):
    """Batches of the pretraining input pipeline per second, with jieba's words and with characters."""
    default_max_predictions, pretraining_dataset = common.lib("default_max_predictions", "pretraining_dataset")
    figures = {}
    for name, whole_word in (("characters", False), ("jieba", True)):
        ds = pretraining_dataset(
            paths["corpus"],
            vocab,
            RECIPE["sequence_length"],
            default_max_predictions(RECIPE["sequence_length"]),
            RECIPE["batch_size"],
            nsp="none",
            whole_word_masking=whole_word,
            repeat=True,
        )
        iterator = iter(ds)
        for _ in range(3):
            next(iterator)
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        seconds = time.perf_counter() - start
        figures[f"{name}_tokens_per_second"] = batches * RECIPE["batch_size"] * RECIPE["sequence_length"] / seconds
    return figures


def segmenter_backend():
    try:
        import rjieba  # noqa: F401

        return "rjieba"
    except ImportError:
        return "jieba"


def f1_rows(stages, a, b, what, command, seeds):
    """One row comparing the fine-tuning F1 (mean over `seeds`) of runs `a` (ours) and `b` (peer)."""
    seeds = [s for s in seeds if f"finetune_{a}_{s}" in stages and f"finetune_{b}_{s}" in stages]
    if not seeds:
        return []
    f1 = {k: [stages[f"finetune_{k}_{s}"]["f1"] for s in seeds] for k in (a, b)}
    note = "; ".join(f"{k} per seed {[round(x, 4) for x in f1[k]]}" for k in (a, b))
    return [
        {
            "what": what,
            "unit": f"dev entity F1, mean of {len(seeds)} seed(s)",
            "ours": round(statistics.mean(f1[a]), 4),
            "peer": round(statistics.mean(f1[b]), 4),
            "peer_name": b,
            "higher_is_better": True,
            "note": note,
            "command": command,
        }
    ]


def record(stages, command, args):
    what = "MSRA NER from scratch: whole-word (jieba) vs character masking"
    rows = f1_rows(stages, "wwm", "char", what, command, RECIPE["seeds"])
    what = "MSRA NER: continued (wwm) then fine-tuned vs direct"
    rows += f1_rows(stages, "continued", "direct", what, command, RECIPE["continued_seeds"])
    if "pipeline" in stages and "pretrain_wwm" in stages:
        p = stages["pipeline"]
        rows.append(
            {
                "what": f"input pipeline with jieba words ({segmenter_backend()}) vs the 4x256 train step",
                "unit": "tokens/s",
                "ours": round(p["jieba_tokens_per_second"]),
                "peer": round(stages["pretrain_wwm"]["tokens_per_second"]),
                "peer_name": "train step",
                "higher_is_better": True,
                "note": f"character-masking pipeline {round(p['characters_tokens_per_second'])} tokens/s",
                "command": command,
            }
        )
    if rows and not args.no_record:
        common.write_result("chinese_pretrain", rows, command, detail={"recipe": RECIPE, "stages": stages})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="run.py chinese_pretrain", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(common.REPO, "..", "zh_pretrain_runs"))
    for key in ("pretrain_steps", "continue_steps", "finetune_train", "sequence_length"):
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=RECIPE[key])
    for key in ("pretrain_learning_rate", "continue_learning_rate"):
        parser.add_argument("--" + key.replace("_", "-"), type=float, default=RECIPE[key])
    parser.add_argument("--seeds", default=",".join(map(str, RECIPE["seeds"])))
    parser.add_argument("--continued-seeds", default=",".join(map(str, RECIPE["continued_seeds"])))
    parser.add_argument("--zh-checkpoint", default=None, help="default: benchmarks/zh_checkpoint.py's")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    RECIPE.update(
        pretrain_steps=args.pretrain_steps,
        continue_steps=args.continue_steps,
        finetune_train=args.finetune_train,
        sequence_length=args.sequence_length,
        pretrain_learning_rate=args.pretrain_learning_rate,
        continue_learning_rate=args.continue_learning_rate,
        seeds=tuple(int(s) for s in args.seeds.split(",")),
        continued_seeds=tuple(int(s) for s in args.continued_seeds.split(",")),
    )
    command = common.command_line("chinese_pretrain", argv if argv is not None else sys.argv[1:])
    set_tf_threads(RECIPE["threads"])
    out = os.path.abspath(args.out)
    paths = prepare_data(out)
    print(f"machine: {common.machine_line()}; recipe {json.dumps(RECIPE)}", flush=True)
    stages = {"vocab": stage(out, "vocab", lambda: learn_vocab(paths, out))}
    vocab = stages["vocab"]["path"]
    runs = {}
    for name, whole_word in (("char", False), ("wwm", True)):
        stages[f"pretrain_{name}"] = stage(
            out,
            f"pretrain_{name}",
            lambda n=name, w=whole_word: pretrain_run(
                paths, out, n, w, RECIPE["pretrain_steps"], RECIPE["pretrain_learning_rate"], vocab=vocab
            ),
        )
        runs[name] = os.path.join(out, name)
    stages["pipeline"] = stage(out, "pipeline", lambda: pipeline_speed(paths, vocab))
    for seed in RECIPE["seeds"]:
        for name in ("char", "wwm"):
            key = f"finetune_{name}_{seed}"
            stages[key] = stage(out, key, lambda n=name, s=seed: finetune_run(paths, runs[n], f"{out}/ner_{n}_{s}", s))
        record(stages, command, args)
    continued_stages(paths, out, args, stages)
    record(stages, command, args)
    return 0


def continued_stages(paths, out, args, stages):
    """The HF-layout Chinese checkpoint continued on the MSRA text with whole-word masking, and direct."""
    if args.zh_checkpoint:
        checkpoint = args.zh_checkpoint
    else:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from zh_checkpoint import ensure_zh_checkpoint

        checkpoint = ensure_zh_checkpoint()
    stages["pretrain_continued"] = stage(
        out,
        "pretrain_continued",
        lambda: pretrain_run(
            paths, out, "continued", True, RECIPE["continue_steps"], RECIPE["continue_learning_rate"], model=checkpoint
        ),
    )
    for seed in RECIPE["continued_seeds"]:
        for name, model in (("direct", checkpoint), ("continued", os.path.join(out, "continued"))):
            key = f"finetune_{name}_{seed}"
            stages[key] = stage(
                out, key, lambda m=model, n=name, s=seed: finetune_run(paths, m, f"{out}/ner_{n}_{s}", s)
            )
