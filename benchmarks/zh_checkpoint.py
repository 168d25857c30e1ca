"""A small Chinese BERT in HF's layout, made here from MSRA text (nothing can download Google's `bert-base-chinese`).

`ensure_zh_checkpoint()` returns its directory, built once and reused: a character vocabulary learned from the MSRA
NER training text (every character seen at least twice, lower-cased as `bert-base-chinese` reads text) plus `[PAD]
[UNK] [CLS] [SEP] [MASK]`, ASCII letters, digits and punctuation, and `##` continuations of every non-CJK piece;
a 4-layer, 256-wide, 4-head BERT (FFN 1024) pretrained from scratch with HF's `BertForMaskedLM` and
`DataCollatorForLanguageModeling` (15% masking, 80/10/10) on the MSRA sentences packed into rows of 128 pieces.
It is saved with `save_pretrained` (`model.safetensors`, `config.json`), its tokenizer's `save_pretrained`
(`vocab.txt`, `tokenizer_config.json`, ...) and `pretraining.json` (the recipe, the loss curve, the final masked-LM
loss next to ln(vocabulary), the chance level). A weak checkpoint, made to compare two implementations on one
recipe, not for quality claims: its masked-LM loss ends well below ln(vocabulary), so it knows some Chinese.
800 steps of 32 rows (a little over one pass over MSRA): the loss leaves the unigram plateau (about 6.6, where 300
steps of 8 rows ended) and ends near 5.8 against ln(4,283) = 8.36.

The folder is `$BERT_ZOO_CACHE/zh_mini-v2` (default `~/.cache/keras_bert_zoo/zh_mini-v2`), written beside it and
renamed when complete; the version in its name changes with the recipe. PyTorch only (no TensorFlow imported).

    python benchmarks/zh_checkpoint.py            # build once (about 40 CPU-minutes: 800 steps of 32 rows) or print the path
    python benchmarks/zh_checkpoint.py --steps 4 --out /tmp/zh_ckpt_smoke   # a smoke build
"""

import argparse
import collections
import json
import math
import os
import shutil
import string
import sys
import tempfile
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
# The shared data beside the repository (`../shared/data`); `BERT_ZOO_DATA` points elsewhere (e.g. from a worktree).
DATA = os.environ.get("BERT_ZOO_DATA") or os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data")
MSRA_TRAIN = os.path.join(DATA, "msra_ner", "train.txt")
VERSION = "zh_mini-v2"
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
RECIPE = dict(
    layers=4,
    hidden=256,
    heads=4,
    intermediate=1024,
    min_count=2,
    steps=800,
    batch_size=32,
    sequence_length=128,
    learning_rate=1e-3,
    warmup_ratio=0.1,
    weight_decay=0.01,
    mlm_probability=0.15,
    seed=0,
    threads=2,
)


def cache_dir():
    """Where the checkpoint lives: `$BERT_ZOO_CACHE/zh_mini-v2`, else `~/.cache/keras_bert_zoo/zh_mini-v2`."""
    root = os.environ.get("BERT_ZOO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_zoo")
    return os.path.join(root, VERSION)


def read_msra_sentences(path=MSRA_TRAIN):
    """The sentences of an MSRA NER file (one `char tag` a line, CRLF, blank line between sentences) as strings."""
    sentences, chars = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.strip():
                chars.append(line.split(" ")[0])
            elif chars:
                sentences.append("".join(chars))
                chars = []
    if chars:
        sentences.append("".join(chars))
    return sentences


def _is_cjk(ch):  # BERT's CJK ranges (tokenization.py's _is_chinese_char): each ideograph is a word of its own
    cp = ord(ch)
    ranges = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F))
    ranges += ((0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
    return any(lo <= cp <= hi for lo, hi in ranges)


def learn_vocabulary(sentences, min_count=2):
    """Special tokens, ASCII letters/digits/punctuation, every character seen `min_count` times (lower-cased, as
    `do_lower_case` reads), then `##` continuations of every piece that is neither CJK nor punctuation (so a run
    of Latin letters, digits or full-width letters splits into pieces instead of one `[UNK]`)."""
    counts = collections.Counter(ch for s in sentences for ch in s.lower() if not ch.isspace())
    ascii_pieces = list(string.ascii_lowercase + string.digits + string.punctuation)
    chars = [ch for ch, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= min_count]
    pieces = list(dict.fromkeys(ascii_pieces + chars))
    glued = [p for p in pieces if not _is_cjk(p) and not unicodedata.category(p).startswith("P")]
    glued = [p for p in glued if p not in string.punctuation]
    return SPECIAL + pieces + ["##" + p for p in glued]


def packed_rows(sentences, tokenizer, length):
    """Consecutive sentences' piece ids packed end to end into rows of at most `length` (with [CLS] ... [SEP])."""
    rows, row, room = [], [], length - 2
    for ids in tokenizer(sentences, add_special_tokens=False)["input_ids"]:
        ids = ids[:room]
        if len(row) + len(ids) > room:
            rows.append(row)
            row = []
        row = row + ids
    if row:
        rows.append(row)
    return [[tokenizer.cls_token_id, *r, tokenizer.sep_token_id] for r in rows]


def build(out, recipe=RECIPE, log=None):
    """Learns the vocabulary, pretrains the model and saves both into `out` (written whole, then renamed)."""
    import torch
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        BertTokenizer,
        DataCollatorForLanguageModeling,
        get_linear_schedule_with_warmup,
    )

    log = log or (lambda *a: print(*a, flush=True))
    torch.manual_seed(recipe["seed"])
    torch.set_num_threads(recipe["threads"])
    sentences = read_msra_sentences()
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=os.path.basename(out) + ".", dir=parent)
    vocab = learn_vocabulary(sentences, recipe["min_count"])
    with open(os.path.join(work, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(os.path.join(work, "vocab.txt"), do_lower_case=True, tokenize_chinese_chars=True)
    rows = packed_rows(sentences, tokenizer, recipe["sequence_length"])
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=recipe["hidden"],
        num_hidden_layers=recipe["layers"],
        num_attention_heads=recipe["heads"],
        intermediate_size=recipe["intermediate"],
        max_position_embeddings=512,
    )
    model = BertForMaskedLM(config)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=recipe["mlm_probability"])
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=recipe["learning_rate"])
    steps = recipe["steps"]
    scheduler = get_linear_schedule_with_warmup(optimizer, int(recipe["warmup_ratio"] * steps), steps)
    order = torch.randperm(len(rows)).tolist()
    log(f"zh checkpoint: vocabulary {len(vocab)}, {len(sentences)} sentences in {len(rows)} rows, {steps} steps")
    model.train()
    curve, start, cpu = [], time.perf_counter(), time.process_time()
    for step in range(steps):
        chosen = [order[(step * recipe["batch_size"] + i) % len(order)] for i in range(recipe["batch_size"])]
        batch = collator([{"input_ids": rows[i]} for i in chosen])
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step(), scheduler.step(), optimizer.zero_grad()
        curve.append(round(loss.item(), 4))
        if (step + 1) % 25 == 0:
            mean = sum(curve[-25:]) / 25
            log(f"step {step + 1}/{steps}: masked-LM loss {mean:.3f} ({time.perf_counter() - start:.0f} s)")
    final = sum(curve[-25:]) / len(curve[-25:])
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    about = dict(
        recipe=recipe,
        vocabulary=len(vocab),
        sentences=len(sentences),
        rows=len(rows),
        source=MSRA_TRAIN,
        final_mlm_loss=round(final, 4),
        ln_vocabulary=round(math.log(len(vocab)), 4),
        train_seconds=round(time.perf_counter() - start, 1),
        train_cpu_seconds=round(time.process_time() - cpu, 1),
        loss_curve=curve,
    )
    with open(os.path.join(work, "pretraining.json"), "w", encoding="utf-8") as f:
        json.dump(about, f, indent=1)
    if os.path.isdir(out):  # another process finished first: keep its copy
        shutil.rmtree(work)
    else:
        os.replace(work, out)
    log(f"zh checkpoint: masked-LM loss {final:.3f} (ln vocabulary {math.log(len(vocab)):.3f}) -> {out}")
    return out


def ensure_zh_checkpoint(out=None, log=None, **overrides):
    """The small Chinese checkpoint's directory, built on the first call (minutes) and reused afterwards.

    `overrides` change the recipe (e.g. `steps=4` for a smoke build; give such a build its own `out`)."""
    out = out or cache_dir()
    if os.path.isfile(os.path.join(out, "model.safetensors")) and os.path.isfile(os.path.join(out, "vocab.txt")):
        return out
    return build(out, dict(RECIPE, **overrides), log=log)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help=f"where to write (default {cache_dir()})")
    parser.add_argument("--steps", type=int, default=RECIPE["steps"])
    args = parser.parse_args(argv)
    path = ensure_zh_checkpoint(args.out, steps=args.steps)
    with open(os.path.join(path, "pretraining.json"), encoding="utf-8") as f:
        about = json.load(f)
    print(f"{path}: vocabulary {about['vocabulary']}, masked-LM loss {about['final_mlm_loss']}")


if __name__ == "__main__":
    sys.exit(main())
