"""The HF side of the Chinese benchmark (`suite/chinese.py`), in PyTorch without TensorFlow: `BertForTokenClassification`
on MSRA NER and `BertForSequenceClassification` on the reviews, from the small Chinese checkpoint, trained by the HF
loop the other benchmarks use (`hf_loop`: `Trainer`'s AdamW groups, linear warm-up and decay, global clipping).

The MSRA file is read here as an HF user reads it (one `char tag` a line, blank line between sentences; `M-` read as
`I-`: BMES as BIOES), independently of the package's reader; the run records the sentences and tags it read so the
two sides' data can be compared. The reviews are read with the package's TSV reader (no TensorFlow), as the conll
benchmark's HF side does, so both sides see the same texts.
"""

import os
import random
import sys
import time

import common
from common import git_commit, now, uptime, versions, write_json
from hf_loop import hf_train, pad_collate


def read_msra(path, max_sentences=None):
    """`(sentences, tags)` of an MSRA NER file: each sentence a list of characters, its tags with `M-` read as `I-`."""
    sentences, tags, chars, labels = [], [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts:
                chars.append(parts[0])
                labels.append("I-" + parts[-1][2:] if parts[-1].startswith("M-") else parts[-1])
            elif chars:
                sentences.append(chars), tags.append(labels)
                chars, labels = [], []
    if chars:
        sentences.append(chars), tags.append(labels)
    return sentences[:max_sentences], tags[:max_sentences]


def _setup(recipe):
    import numpy as np
    import torch
    import transformers

    torch.set_num_threads(recipe["threads"])
    random.seed(recipe["seed"]), np.random.seed(recipe["seed"]), torch.manual_seed(recipe["seed"])
    transformers.set_seed(recipe["seed"])


def _loader(features, recipe, pad_id, pad_labels):
    """Shuffled batches padded to their longest (`labels` padded with -100 for tagging, stacked for classes)."""
    import torch
    from torch.utils.data import DataLoader

    return DataLoader(
        features,
        batch_size=recipe["batch_size"],
        shuffle=True,
        generator=torch.Generator().manual_seed(recipe["seed"]),
        collate_fn=pad_collate(pad_id, keys=() if pad_labels else ("labels",), pad_labels=pad_labels),
    )


def _finish(record, out, recipe):
    record.update(
        uptime_after=uptime(),
        date=now(),
        git_commit=git_commit(),
        versions=versions("torch", "transformers", "seqeval"),
        torch_threads=recipe["threads"],
        tensorflow_in_process="tensorflow" in sys.modules,
    )
    write_json(os.path.join(out, "hf.json"), record)
    return record


def run_ner(model_dir, train_path, dev_path, recipe, out):
    """HF run_ner.py written out: first piece of each character labelled, -100 elsewhere; seqeval on dev."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    from suite.conll_hf import encode_words, predict_words  # HF run_ner.py's word handling, as conll writes it
    from transformers import AutoTokenizer, BertForTokenClassification

    _setup(recipe)
    words, tags = read_msra(train_path, recipe["max_train"])
    dev_words, dev_tags = read_msra(dev_path)
    names = ["O"] + sorted({t for s in tags for t in s} - {"O"})
    index = {n: i for i, n in enumerate(names)}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertForTokenClassification.from_pretrained(
        model_dir, num_labels=len(names), id2label=dict(enumerate(names)), label2id=index
    )
    t = time.perf_counter()
    features, train_counts = encode_words(tokenizer, words, tags, index, recipe["sequence_length"])
    tokenize_seconds = time.perf_counter() - t
    dev_features, dev_counts = encode_words(tokenizer, dev_words, None, index, recipe["sequence_length"])
    loader = _loader(
        [{k: v for k, v in f.items() if k != "word_ids"} for f in features], recipe, tokenizer.pad_token_id, True
    )
    trained = hf_train(model, loader, 1, f"{model_dir} on {len(words)} MSRA sentences", recipe)
    t = time.perf_counter()
    collate = pad_collate(tokenizer.pad_token_id, pad_labels=True)
    model.eval()
    predicted = predict_words(model, collate, dev_features, dev_words, names)
    record = dict(
        system="hf",
        task="ner",
        f1=float(f1_score(dev_tags, predicted)),
        precision=float(precision_score(dev_tags, predicted)),
        recall=float(recall_score(dev_tags, predicted)),
        label_names=names,
        examples_per_second=len(words) / (trained["train_seconds"] + tokenize_seconds),
        **trained,
        tokenize_train_seconds=tokenize_seconds,
        dev_predict_seconds=time.perf_counter() - t,
        train_examples=len(words),
        train_characters=sum(map(len, words)),
        dev_examples=len(dev_words),
        dev_characters=sum(map(len, dev_words)),
        dev_counts=dev_counts,
        train_counts=train_counts,
    )
    print(f"HF NER: dev entity F1 {record['f1']:.4f}, {record['examples_per_second']:.1f} sentences/s", flush=True)
    return _finish(record, out, recipe)


def run_sentiment(model_dir, train_path, dev_path, recipe, out):
    """HF run_glue.py written out: `[CLS] review [SEP]` truncated to the length, accuracy on dev."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    read_examples, layout_class = common.lib("read_examples", "DataLayout", bare=True)
    _setup(recipe)
    layout = layout_class.for_task("sst2")
    train = read_examples(train_path, layout, max_examples=recipe["max_train"])
    dev = read_examples(dev_path, layout, label_names=train.label_names)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    t = time.perf_counter()
    encoded = tokenizer(train.texts[0], truncation=True, max_length=recipe["sequence_length"])
    features = [
        dict(input_ids=i, token_type_ids=s, attention_mask=m, labels=int(y))
        for i, s, m, y in zip(
            encoded["input_ids"], encoded["token_type_ids"], encoded["attention_mask"], train.labels, strict=True
        )
    ]
    tokenize_seconds = time.perf_counter() - t
    loader = _loader(features, recipe, tokenizer.pad_token_id, False)
    trained = hf_train(model, loader, 1, f"{model_dir} on {len(features)} reviews", recipe)
    t = time.perf_counter()
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(dev.labels), 64):
            batch = tokenizer(
                dev.texts[0][start : start + 64],
                truncation=True,
                max_length=recipe["sequence_length"],
                padding=True,
                return_tensors="pt",
            )
            predicted = model(**batch).logits.argmax(-1).numpy()
            correct += int(
                sum(int(p) == int(y) for p, y in zip(predicted, dev.labels[start : start + 64], strict=True))
            )
    record = dict(
        system="hf",
        task="sentiment",
        accuracy=correct / len(dev.labels),
        examples_per_second=len(features) / (trained["train_seconds"] + tokenize_seconds),
        **trained,
        tokenize_train_seconds=tokenize_seconds,
        dev_predict_seconds=time.perf_counter() - t,
        train_examples=len(features),
        dev_examples=len(dev.labels),
        train_truncated=sum(len(f["input_ids"]) >= recipe["sequence_length"] for f in features),
    )
    print(f"HF sentiment: dev accuracy {record['accuracy']:.4f}, {record['examples_per_second']:.1f} reviews/s")
    return _finish(record, out, recipe)
