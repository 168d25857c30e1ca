"""serving's two sides, each configuration in a worker process of its own: the real sentences each task serves,
our SavedModel's signature and HF's tokenizer + model as callables, and the timing of one configuration
(sentences/s at batch 64, latencies at batch 1). Not a benchmark (`run.py serving` is); the HF worker has no TF.
"""

import json
import os
import time

import common

DATA = common.DATA


def sentences(task, limit=None):
    """The real sentences each task serves (standard library only: the HF worker has no TF)."""
    if task == "classify":
        with open(os.path.join(DATA, "sst2", "dev.tsv"), encoding="utf-8") as f:
            out = [line.rstrip("\n").split("\t")[0] for line in f.readlines()[1:] if line.strip()]
    else:
        out, words = [], []
        with open(os.path.join(DATA, "conll2003", "eng.testa"), encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if not parts or parts[0] == "-DOCSTART-":
                    if words:
                        out.append(" ".join(words))
                    words = []
                else:
                    words.append(parts[0])
        out += [" ".join(words)] if words else []
    return out[:limit] if limit else out


def ours_call(task, saved, threads, inter_op):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    fn = tf.saved_model.load(saved).signatures["serving_default"]

    if task == "classify":

        def call(batch):
            out = fn(text=tf.constant(batch))
            return [s.decode() for s in out["labels"].numpy()], out["probabilities"].numpy()
    else:

        def call(batch):
            out = fn(text=tf.constant(batch))
            tags, n = out["tags"].numpy(), out["num_words"].numpy()
            return [[t.decode() for t in row[:k]] for row, k in zip(tags, n, strict=True)], np.zeros(0)

    return call


def hf_call(task, model_dir, threads):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if task == "classify":
        model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        names = [model.config.id2label[i] for i in range(model.config.num_labels)]

        def call(batch):
            with torch.no_grad():
                enc = tokenizer(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
                probs = torch.softmax(model(**enc).logits, dim=-1)
                return [names[int(i)] for i in probs.argmax(-1)], probs.numpy()

        return call
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]

    def call(batch):
        words = [t.split() for t in batch]
        with torch.no_grad():
            enc = tokenizer(
                words, is_split_into_words=True, padding=True, truncation=True, max_length=128, return_tensors="pt"
            )
            ids = model(**enc).logits.argmax(-1).tolist()
        out = []
        for row, tag_ids in enumerate(ids):
            tags, seen = ["O"] * len(words[row]), set()
            for pos, w in enumerate(enc.word_ids(row)):
                if w is not None and w not in seen:
                    seen.add(w)
                    tags[w] = names[tag_ids[pos]]
            out.append(tags)
        return out, None

    return call


def measure(call, texts, batch_size, latency_n, warmup=3):
    """Sentences/s at `batch_size` over all `texts` (in order) and per-call seconds at batch 1."""
    batches = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    for b in batches[:warmup]:
        call(b)
    start = time.perf_counter()
    for b in batches:
        call(b)
    throughput = len(texts) / (time.perf_counter() - start)
    for t in texts[:warmup]:
        call([t])
    latencies = []
    for t in texts[:latency_n]:
        s = time.perf_counter()
        call([t])
        latencies.append(time.perf_counter() - s)
    return throughput, latencies


def run_worker(args):
    texts = sentences(args.task, args.max_sentences)
    if args.worker == "ours":
        call = ours_call(args.task, args.saved, args.threads[0], args.tf_inter_op or args.threads[0])
    else:
        call = hf_call(args.task, args.model, args.threads[0])
    if args.answers:  # the agreement check: answers on all sentences at batch 64
        labels, probs = [], []
        for i in range(0, len(texts), args.batch_size):
            got, p = call(texts[i : i + args.batch_size])
            labels += got
            probs += [] if p is None else p.tolist()
        print(json.dumps({"answers": labels, "probabilities": probs}))
        return
    load = os.getloadavg()[0]
    throughput, latencies = measure(call, texts, args.batch_size, args.latency_sentences)
    print(
        json.dumps(
            {"throughput": throughput, "latencies": latencies, "load_before": load, "load_after": os.getloadavg()[0]}
        )
    )
