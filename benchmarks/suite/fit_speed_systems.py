"""fit_speed's systems, each the script a user of that library writes, run in a worker process of its own: ours
(`fit` on raw text, then `evaluate` and `predict`), KerasHub's `fit`, HF's training loop and dev pass. Also the
data they read (`FILES`, `read`, shared with int8) and their dev score. Not a benchmark (`run.py fit_speed` is).
"""

import contextlib
import os
import time

import common
import hf_loop

DATA = common.DATA


FILES = {
    "classify": (os.path.join(DATA, "sst2", "train.tsv"), os.path.join(DATA, "sst2", "dev.tsv")),
    "tag": (os.path.join(DATA, "conll2003", "eng.train"), os.path.join(DATA, "conll2003", "eng.testa")),
}


BATCH, LENGTH, EVAL_BATCH = 32, 128, 64


DEV_EXAMPLES = None  # all; a worker's `--dev-examples`
PREDICT_BATCH = EVAL_BATCH  # a worker's `--predict-batch`: `predict`'s batch (two calls timed)
SHAPE = "minilm"  # a worker's `--shape`

# Model shapes besides all-MiniLM-L6-v2's own checkpoint: random weights of that shape (speed only; the dev
# score means nothing), MiniLM's uncased vocabulary and tokenizer.
SHAPES = {"bert_base": dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072)}


READ = {}  # path -> what `read` returns, for a worker on an older package (`--data FILE`, read by today's)


def read(task, path, n=None):
    """Raw examples: (texts, labels, label_names) for classify, (words, tags, names) for tag."""
    if path in READ:
        return READ[path]
    if task == "classify":
        DataLayout, read_examples = common.lib("DataLayout", "read_examples")

        data = read_examples(path, DataLayout.for_task("sst2"), max_examples=n)
        return list(data.texts[0]), [int(v) for v in data.labels], list(data.label_names)
    read_tagged = common.lib("read_tagged")

    data = read_tagged(path, max_examples=n)
    return data.words, data.tags, list(data.label_names)


def accuracy(task, true, pred):
    if task == "classify":
        return sum(int(a == b) for a, b in zip(true, pred, strict=True)) / len(true)
    from seqeval.metrics import f1_score

    return float(f1_score(true, pred))


# --- workers: one system, one process -----------------------------------------------------------------
def run_ours(task, n, seed, batching="auto", jit_compile=None, eval_batching="auto", policy=None):
    import keras
    import numpy as np

    if policy:  # what a user writes for bf16: the global policy, before the model is built
        keras.mixed_precision.set_global_policy(policy)

    from keras_bert_zoo import BertClassifier, BertPreprocessor, BertTagger, TaggingPreprocessor

    minilm = common.minilm_path()
    x, y, names = read(task, FILES[task][0], n)
    dev_x, dev_y, _ = read(task, FILES[task][1], DEV_EXAMPLES)
    keras.utils.set_random_seed(seed)
    # from the checkpoint, or (another --shape) a random backbone of that shape
    source = minilm if SHAPE not in SHAPES else _random_backbone()
    make = BertClassifier.from_preset if source is minilm else BertClassifier
    if task == "classify":
        model = make(source, num_classes=2, preprocessor=BertPreprocessor.from_preset(minilm, sequence_length=LENGTH))
    else:
        model = (BertTagger.from_preset if source is minilm else BertTagger)(
            source,
            num_labels=len(names),
            label_names=names,
            preprocessor=TaggingPreprocessor.from_preset(minilm, sequence_length=LENGTH),
        )
    model.compile(**({} if jit_compile is None else {"jit_compile": jit_compile}))
    _, fit_s, fit_cpu_s = common.timed(model.fit, x, y, batch_size=BATCH, epochs=1, verbose=0, batching=batching)
    _, evaluate_s, evaluate_cpu_s = common.timed(
        model.evaluate, dev_x, dev_y, batch_size=EVAL_BATCH, verbose=0, batching=eval_batching
    )
    # predict twice: the first call of the process (its trace and graph optimisation) and a second one
    if task == "classify":
        call = lambda: model.predict(dev_x, batch_size=PREDICT_BATCH, verbose=0, batching=eval_batching)  # noqa: E731
    else:
        call = lambda: model.predict_tags(dev_x, batch_size=PREDICT_BATCH)  # noqa: E731
    pred, predict_s, predict_cpu_s = common.timed(call)
    _, predict2_s, predict2_cpu_s = common.timed(call)
    if task == "classify":
        pred = np.argmax(pred, -1).tolist()
    return dict(
        fit_s=fit_s,
        evaluate_s=evaluate_s,
        predict_s=predict_s,
        predict2_s=predict2_s,
        predict2_cpu_s=predict2_cpu_s,
        predict_batch=PREDICT_BATCH,
        shape=SHAPE,
        fit_cpu_s=fit_cpu_s,
        evaluate_cpu_s=evaluate_cpu_s,
        predict_cpu_s=predict_cpu_s,
        train_examples=len(y),
        dev_examples=len(dev_y),
        dev_score=accuracy(task, dev_y, pred),
    )


def _random_backbone():
    from keras_bert_zoo import BertBackbone

    return BertBackbone(vocabulary_size=30522, max_sequence_length=512, **SHAPES[SHAPE])


def run_keras_hub(task, n, seed):
    import keras
    import keras_hub

    x, y, _ = read(task, FILES[task][0], n)
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522,
        num_layers=6,
        num_heads=12,
        hidden_dim=384,
        intermediate_dim=1536,
        max_sequence_length=512,
    )
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=os.path.join(common.minilm_path(), "vocab.txt"), lowercase=True
    )
    pre = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=pre)
    model.compile()
    t = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    return dict(fit_s=time.perf_counter() - t, train_examples=len(y))


def _hf_features(task, tokenizer, index, texts, labels):
    """HF's training features: the fast tokenizer's (classify), run_ner.py's first-piece labels (tag)."""
    from suite import conll_hf

    if task == "classify":
        enc = tokenizer(texts, truncation=True, max_length=LENGTH)
        return [
            dict(
                input_ids=enc["input_ids"][i],
                token_type_ids=enc["token_type_ids"][i],
                attention_mask=enc["attention_mask"][i],
                labels=labels[i],
            )
            for i in range(len(texts))
        ]
    rows, _ = conll_hf.encode_words(tokenizer, texts, labels, index, LENGTH)
    return rows


def _hf_dev(model, collate, dev, precision):
    """The dev pass (predict's and evaluate's work): the model under no_grad in batches of EVAL_BATCH, dynamic
    padding, the loss read; the argmax of each row."""
    import torch

    model.eval()
    pred = []
    with torch.no_grad():
        for start in range(0, len(dev), EVAL_BATCH):
            batch = collate(dev[start : start + EVAL_BATCH])
            with precision():
                out = model(**batch)
            out.loss.item()
            pred.extend(out.logits.argmax(-1).tolist())
    return pred


def _first_piece_tags(word_ids, pred, words_of, names):
    """Tag of each word from its first piece; words cut by truncation get "O"."""
    tags = []
    for ids, row, words in zip(word_ids, pred, words_of, strict=True):
        seen, out = {}, ["O"] * len(words)
        for pos, w in enumerate(ids):
            if w is not None and w not in seen:
                seen[w] = True
                out[w] = names[row[pos]]
        tags.append(out)
    return tags


def run_hf(task, n, seed, threads, autocast=False):
    import torch
    import transformers
    from torch.utils.data import DataLoader

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    # HF at its best on a bf16 host: one `torch.autocast` around the forward passes (train and dev).
    precision = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext
    minilm = common.minilm_path()
    x, y, names = read(task, FILES[task][0], n)
    dev_x, dev_y, _ = read(task, FILES[task][1], DEV_EXAMPLES)
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    recipe = dict(learning_rate=5e-5, weight_decay=0.01, adam_epsilon=1e-6, warmup_ratio=0.1)
    kind = transformers.BertForSequenceClassification if task == "classify" else transformers.BertForTokenClassification
    labels = 2 if task == "classify" else len(names)
    if SHAPE in SHAPES:  # random weights of the shape, as ours
        shape = SHAPES[SHAPE]
        config = transformers.BertConfig(
            num_hidden_layers=shape["num_layers"],
            num_attention_heads=shape["num_heads"],
            hidden_size=shape["hidden_dim"],
            intermediate_size=shape["intermediate_dim"],
            num_labels=labels,
        )
        model = kind(config)
    else:
        model = kind.from_pretrained(minilm, num_labels=labels)
    collate = (
        transformers.DataCollatorWithPadding if task == "classify" else transformers.DataCollatorForTokenClassification
    )(tokenizer)
    index = {n_: i for i, n_ in enumerate(names or [])}

    t, c = time.perf_counter(), time.process_time()  # the whole user script: tokenize, batch, train
    train = _hf_features(task, tokenizer, index, x, y)
    train = [{k: v for k, v in f.items() if k != "word_ids"} for f in train]
    loader = DataLoader(train, batch_size=BATCH, shuffle=True, collate_fn=collate)
    optimizer, scheduler, _ = hf_loop.hf_optimizer(model, len(loader), recipe)
    model.train()
    for batch in loader:
        hf_loop.hf_step(model, batch, optimizer, scheduler, 1.0, precision=precision)
    fit_s, fit_cpu_s = time.perf_counter() - t, time.process_time() - c

    t, c = time.perf_counter(), time.process_time()  # dev: tokenizer + model (predict's and evaluate's work)
    dev = _hf_features(task, tokenizer, index, dev_x, dev_y)
    word_ids = [f.pop("word_ids", None) for f in dev]
    pred = _hf_dev(model, collate, dev, precision)
    eval_s, eval_cpu_s = time.perf_counter() - t, time.process_time() - c
    if task == "tag":
        pred = _first_piece_tags(word_ids, pred, dev_x, names)
    return dict(
        fit_s=fit_s,
        evaluate_s=eval_s,
        predict_s=eval_s,
        fit_cpu_s=fit_cpu_s,
        evaluate_cpu_s=eval_cpu_s,
        predict_cpu_s=eval_cpu_s,
        train_examples=len(y),
        dev_examples=len(dev_y),
        dev_score=accuracy(task, dev_y, pred),
        threads=threads,
        shape=SHAPE,
    )


SYSTEMS = {
    "ours": lambda task, n, seed: run_ours(task, n, seed),
    "ours_bucketed": lambda task, n, seed: run_ours(task, n, seed, batching="bucketed"),
    "ours_packed": lambda task, n, seed: run_ours(task, n, seed, batching="packed"),
    "ours_by_length": lambda task, n, seed: run_ours(task, n, seed, batching="by_length"),
    "ours_xla": lambda task, n, seed: run_ours(task, n, seed, jit_compile=True),
    "ours_packed_everywhere": lambda task, n, seed: run_ours(task, n, seed, batching="packed", eval_batching="packed"),
    "ours_bf16": lambda task, n, seed: run_ours(task, n, seed, policy="mixed_bfloat16"),
    "keras_hub": run_keras_hub,
    "hf": lambda task, n, seed: run_hf(task, n, seed, threads=2),
    "hf1": lambda task, n, seed: run_hf(task, n, seed, threads=1),
    "hf_bf16": lambda task, n, seed: run_hf(task, n, seed, threads=2, autocast=True),
    "hf1_bf16": lambda task, n, seed: run_hf(task, n, seed, threads=1, autocast=True),
}


# `ours` / `ours_bf16` on Keras' other backends: the worker sets KERAS_BACKEND before anything imports
# keras (every other system runs on TensorFlow, whatever the caller's environment says).
KERAS_BACKENDS = {"ours_jax": "jax", "ours_torch": "torch", "ours_jax_bf16": "jax", "ours_torch_bf16": "torch"}
for _name, _backend in KERAS_BACKENDS.items():
    SYSTEMS[_name] = SYSTEMS["ours_bf16" if _name.endswith("_bf16") else "ours"]
