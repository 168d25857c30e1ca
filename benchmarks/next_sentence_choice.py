""""Which sentence comes next?": a real multiple-choice set from WikiText-2, ours and HF side by side.

The full SWAG set is not available offline, so the questions are built from real
text (../shared/data/pretrain_text/wikitext-2.valid.tokens.txt, 60 Wikipedia
articles): the context is a sentence, the right choice is the sentence that follows
it in the same paragraph, and three distractors are

- `easy`: sentences from OTHER articles (of the same split);
- `hard`: sentences from the SAME article (not the context, its neighbours or the answer).

Articles are split into train and dev (no article in both), deterministically with
`--seed`; the right answer's position is drawn uniformly, so random choice scores 0.25.
The questions are written as JSON Lines (`{"context", "choices", "label"}`) that both
sides read.

Both sides fine-tune the real all-MiniLM-L6-v2 on the same questions with the same
recipe, one after the other, each in its own process:

- ours: `keras_bert_zoo.finetune("choice", ...)` (what `bert-zoo finetune choice` calls);
- HF: transformers `BertForMultipleChoice` in PyTorch (`torch.set_num_threads(2)`), a plain
  training loop written out here (what `run_swag.py`/`Trainer` do): pairs
  `(context, choice)` tokenized with `truncation=True, max_length=128`, each batch padded
  to its longest pair (`DataCollatorForMultipleChoice`).

Recipe (conll.py's conventions): lr 5e-5, batch 16 questions (64 pairs), length 128,
AdamW (betas 0.9/0.999, epsilon 1e-6, weight decay 0.01 not on biases or LayerNorm
weights), 10% linear warm-up (`round(0.1 * total)` steps) then linear decay to 0, global
gradient clipping at 1.0, seed 0. Ours pads each batch to a length bucket, HF to the
batch's longest pair. Scores: dev accuracy of the model at the END of training. Speed:
training questions per second, training steps only (wall clock); each side also records
the CPU time its process used (`process_cpu_seconds`), since on a loaded machine the two
sides get different shares of the cores.

    python benchmarks/next_sentence_choice.py                        # easy then hard, both sides
    python benchmarks/next_sentence_choice.py --variants easy        # one variant
    python benchmarks/next_sentence_choice.py --table                # tables of finished runs
    python benchmarks/next_sentence_choice.py --train-questions 64 --dev-questions 32 --root /tmp/nsc_smoke

Writes `ROOT/RUN/VARIANT/{train,dev}.jsonl`, `ours.json`, `hf.json`, `results.json`; RUN is
`q{train questions}-e{epochs}`.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import git_commit, hf_train, minilm_path, now, read_json, uptime, versions, write_json  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIKITEXT = os.path.join(os.path.dirname(REPO), "shared", "data", "pretrain_text", "wikitext-2.valid.tokens.txt")
RECIPE = dict(learning_rate=5e-5, batch_size=16, sequence_length=128, warmup_ratio=0.1, weight_decay=0.01,
              adam_epsilon=1e-6, clip_norm=1.0, seed=0)
VARIANTS = ("easy", "hard")
MIN_WORDS = 5


# --- the questions ---------------------------------------------------------------------------
def read_articles(path=WIKITEXT):
    """`[(title, [paragraph sentences, ...]), ...]`: articles start at ` = Title = ` lines;
    each paragraph (line) is cut into sentences after ` . `, ` ? ` and ` ! `; WikiText's
    number tokens (`@-@`, `@,@`, `@.@`) are joined back; sentences under 5 words dropped."""
    articles = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.strip()
            if re.fullmatch(r"= [^=].* =", text):
                articles.append((text.strip("= "), []))
            elif text and not text.startswith("=") and articles:
                text = re.sub(r" @(.)@ ", r"\1", text)
                sentences = [s for s in re.split(r"(?<= [.!?]) (?=\S)", text) if len(s.split()) >= MIN_WORDS]
                if sentences:
                    articles[-1][1].append(sentences)
    return [(title, paragraphs) for title, paragraphs in articles if paragraphs]


def build_questions(articles, variant, rng, limit):
    """Questions from consecutive sentences of one paragraph, with 3 distractors."""
    pool = [(a, s) for a, (_, paragraphs) in enumerate(articles) for p in paragraphs for s in p]
    by_article = {}
    for a, s in pool:
        by_article.setdefault(a, []).append(s)
    pairs = [(a, p[i], p[i + 1]) for a, (_, paragraphs) in enumerate(articles) for p in paragraphs
             for i in range(len(p) - 1)]
    rng.shuffle(pairs)
    questions = []
    for a, context, answer in pairs:
        if variant == "easy":
            candidates = [s for b, s in pool if b != a]
        else:
            own = by_article[a]
            near = {context, answer}
            i = own.index(context)
            near.update(own[max(0, i - 1):i + 3])
            candidates = [s for s in own if s not in near]
        if len(candidates) < 3:
            continue
        choices = rng.sample(candidates, 3)
        label = rng.randrange(4)
        choices.insert(label, answer)
        questions.append({"context": context, "choices": choices, "label": label})
        if len(questions) >= limit:
            break
    return questions


def write_questions(out, variant, train_questions, dev_questions, seed):
    """Splits the articles 80/20 by a seeded shuffle and writes train.jsonl / dev.jsonl."""
    articles = read_articles()
    order = list(range(len(articles)))
    random.Random(seed).shuffle(order)
    cut = int(round(0.8 * len(order)))
    assert not set(order[:cut]) & set(order[cut:]), "an article is in both splits"
    split = {"train": [articles[i] for i in order[:cut]], "dev": [articles[i] for i in order[cut:]]}
    info = {}
    for name, limit in (("train", train_questions), ("dev", dev_questions)):
        rng = random.Random(f"{seed}-{variant}-{name}")
        questions = build_questions(split[name], variant, rng, limit)
        path = os.path.join(out, f"{name}.jsonl")
        os.makedirs(out, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(q) + "\n" for q in questions))
        info[name] = dict(path=path, questions=len(questions), articles=len(split[name]),
                          label_counts=[sum(q["label"] == k for q in questions) for k in range(4)])
    return info


# --- ours --------------------------------------------------------------------------------------
def run_ours(out, epochs):
    from keras_bert_zoo import finetune

    load_before, uptime_before = os.getloadavg(), uptime()
    start = time.perf_counter()
    model, metrics = finetune(
        "choice", minilm_path(), os.path.join(out, "train.jsonl"), os.path.join(out, "dev.jsonl"),
        os.path.join(out, "ours_model"), epochs=epochs, batch_size=RECIPE["batch_size"],
        learning_rate=RECIPE["learning_rate"], warmup_ratio=RECIPE["warmup_ratio"],
        sequence_length=RECIPE["sequence_length"], select="final", seed=RECIPE["seed"], verbose=2)
    record = {
        "system": "ours", "accuracy": metrics["accuracy"], "metrics": metrics,
        "train_seconds": metrics["train_seconds"], "questions_per_second": metrics["train_examples_per_second"],
        "steps": metrics["steps"], "train_questions": metrics["train_examples"],
        "dev_questions": metrics["dev_examples"], "final_train_loss": metrics["final_train_loss"],
        "wall_seconds": time.perf_counter() - start, "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()), "uptime_before": uptime_before, "uptime_after": uptime(),
        "date": now(), "git_commit": git_commit(), "versions": versions("tensorflow", "keras"),
        "metrics_json": os.path.join(out, "ours_model", "metrics.json"),
        # CPU time of the whole process (all threads: loading, tokenizing, training, dev): under a loaded
        # machine the sides get different shares of the cores, and this shows it.
        "process_cpu_seconds": time.process_time(),
    }
    write_json(os.path.join(out, "ours.json"), record)
    print(f"ours: dev accuracy {record['accuracy']:.4f}, {record['questions_per_second']:.2f} train questions/s "
          f"over {record['train_seconds']:.0f} s", flush=True)
    return record


# --- HF transformers (PyTorch) ------------------------------------------------------------------
def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _encode(tokenizer, questions, max_length):
    """run_swag.py's preprocessing: first = [context] * n, second = the choices, truncation=True."""
    first = [q["context"] for q in questions for _ in q["choices"]]
    second = [c for q in questions for c in q["choices"]]
    enc = tokenizer(first, second, truncation=True, max_length=max_length)
    n = len(questions[0]["choices"])
    return [{k: enc[k][i * n:(i + 1) * n] for k in ("input_ids", "token_type_ids", "attention_mask")}
            | {"labels": q["label"]} for i, q in enumerate(questions)]


def _collate(pad_id):
    import torch

    def collate(batch):  # DataCollatorForMultipleChoice: pad to the batch's longest pair
        length = max(len(ids) for f in batch for ids in f["input_ids"])
        out = {key: torch.tensor([[ids + [pad] * (length - len(ids)) for ids in f[key]] for f in batch])
               for key, pad in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0))}
        out["labels"] = torch.tensor([f["labels"] for f in batch])
        return out

    return collate


def run_hf(out, epochs):
    import numpy as np
    import torch
    import transformers
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer, BertForMultipleChoice

    torch.set_num_threads(2)
    seed = RECIPE["seed"]
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    transformers.set_seed(seed)
    train, dev = _read_jsonl(os.path.join(out, "train.jsonl")), _read_jsonl(os.path.join(out, "dev.jsonl"))
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    model = BertForMultipleChoice.from_pretrained(minilm_path())
    t = time.perf_counter()
    train_features = _encode(tokenizer, train, RECIPE["sequence_length"])
    tokenize_seconds = time.perf_counter() - t
    dev_features = _encode(tokenizer, dev, RECIPE["sequence_length"])
    collate = _collate(tokenizer.pad_token_id)
    loader = DataLoader(train_features, batch_size=RECIPE["batch_size"], shuffle=True,
                        generator=torch.Generator().manual_seed(seed), collate_fn=collate)
    trained = hf_train(model, loader, epochs, f"on {len(train)} questions, dev {len(dev)}", RECIPE, log_every=20)
    train_seconds = trained["train_seconds"]

    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(dev_features), 64):
            batch = collate(dev_features[start:start + 64])
            labels = batch.pop("labels")
            correct += int((model(**batch).logits.argmax(-1) == labels).sum())
    record = {
        "system": "hf", "accuracy": correct / len(dev), **trained,
        "questions_per_second": len(train) * epochs / train_seconds,
        "train_questions": len(train), "dev_questions": len(dev), "tokenize_train_seconds": tokenize_seconds,
        "uptime_after": uptime(), "date": now(), "git_commit": git_commit(),
        "versions": versions("torch", "transformers"), "torch_threads": torch.get_num_threads(),
        "tensorflow_in_process": "tensorflow" in sys.modules, "process_cpu_seconds": time.process_time(),
    }
    write_json(os.path.join(out, "hf.json"), record)
    print(f"HF: dev accuracy {record['accuracy']:.4f}, {record['questions_per_second']:.2f} train questions/s over "
          f"{train_seconds:.0f} s", flush=True)
    return record


# --- both, and the table ---------------------------------------------------------------------------
def print_table(run, variants):
    print(f"\nNext-sentence choice (WikiText-2, 4 choices), all-MiniLM-L6-v2, dev accuracy at the end of "
          f"training ({run}):\n")
    print("| variant | system | dev accuracy | random baseline | train / dev questions | steps | train s "
          "| train questions/s | load 1-min (before→after) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for variant in variants:
        for name, key in (("ours (keras_bert_zoo, TF)", "ours"), ("HF transformers (PyTorch, 2 threads)", "hf")):
            r = read_json(os.path.join(run, variant, f"{key}.json"))
            if r is None:
                print(f"| {variant} | {name} | (not run) | | | | | | |")
                continue
            print(f"| {variant} | {name} | {r['accuracy']:.4f} | 0.25 | {r['train_questions']} / "
                  f"{r['dev_questions']} | {r['steps']} | {r['train_seconds']:.0f} | "
                  f"{r['questions_per_second']:.2f} | {r['loadavg_before'][0]:.1f}→{r['loadavg_after'][0]:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description="next-sentence multiple choice on WikiText-2, ours and HF")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--train-questions", type=int, default=2000)
    parser.add_argument("--dev-questions", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="article split and question sampling")
    parser.add_argument("--only", choices=("ours", "hf"), help="run one side only (of one variant: --variants X)")
    parser.add_argument("--root", default="/tmp/bert_zoo_next_sentence")
    parser.add_argument("--table", action="store_true", help="print the table of finished runs and exit")
    args = parser.parse_args(argv)
    run = os.path.join(args.root, f"q{args.train_questions}-e{args.epochs}")
    if args.table:
        print_table(run, args.variants)
        return
    if args.only:
        for variant in args.variants:
            (run_ours if args.only == "ours" else run_hf)(os.path.join(run, variant), args.epochs)
        return
    command = " ".join([os.path.basename(sys.executable)] + sys.argv)
    for variant in args.variants:
        out = os.path.join(run, variant)
        started, uptime_start, commit_start = now(), uptime(), git_commit()
        data = write_questions(out, variant, args.train_questions, args.dev_questions, args.seed)
        print(f"{started} {variant}: {json.dumps(data)}\n{uptime_start}", flush=True)
        for side in ("ours", "hf"):  # each in a fresh process: TF and PyTorch thread pools never mixed
            subprocess.run([sys.executable, os.path.abspath(__file__), "--only", side, "--variants", variant,
                            "--epochs", str(args.epochs), "--train-questions", str(args.train_questions),
                            "--root", args.root], check=True)
        write_json(os.path.join(out, "results.json"), {
            "ours": read_json(os.path.join(out, "ours.json")), "hf": read_json(os.path.join(out, "hf.json")), "data": data,
            "recipe": {**RECIPE, "epochs": args.epochs, "variant": variant, "data_seed": args.seed,
                       "model": minilm_path(), "source": WIKITEXT},
            "command": command, "started": started, "finished": now(), "uptime_start": uptime_start,
            "uptime_end": uptime(), "cpus": os.cpu_count(), "git_commit_start": commit_start,
            "git_commit_end": git_commit()})
    print_table(run, args.variants)


if __name__ == "__main__":
    main()
