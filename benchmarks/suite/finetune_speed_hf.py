"""finetune_speed's HF side: the same first N examples as HF's recipe builds them (the fast tokenizer's features,
random batches padded to their longest, `hf_loop`'s optimizer and step), and one timed round. Not a benchmark
(`run.py finetune_speed` is).
"""

import time

import common
import hf_loop
from common import minilm_path


# --- HF: its recipe ------------------------------------------------------------------------------------
def hf_features(task, cfg, examples):
    """HF's training features of the same first `examples` examples, its collate function, the
    model class's keyword arguments and the number of examples ours read (for the check)."""
    from transformers import AutoTokenizer

    minilm = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    if task == "classify":
        DataLayout, read_examples = common.lib("DataLayout", "read_examples")

        data = read_examples(cfg["train"], DataLayout.for_task("sst2"), max_examples=examples)
        enc = tokenizer(*[list(t) for t in data.texts], truncation=True, max_length=cfg["sequence_length"])
        features = [
            dict(
                input_ids=enc["input_ids"][i],
                token_type_ids=enc["token_type_ids"][i],
                attention_mask=enc["attention_mask"][i],
                labels=int(data.labels[i]),
            )
            for i in range(len(data))
        ]
        return (
            features,
            hf_loop.pad_collate(tokenizer.pad_token_id, ("labels",)),
            dict(num_labels=len(data.label_names)),
        )
    if task == "tag":
        from suite import conll_hf

        read_tagged = common.lib("read_tagged")

        data = read_tagged(cfg["train"], max_examples=examples)
        names = list(data.label_names)
        index = {n: i for i, n in enumerate(names)}
        features, _ = conll_hf.encode_words(tokenizer, data.words, data.tags, index, cfg["sequence_length"])
        features = [{k: v for k, v in f.items() if k != "word_ids"} for f in features]
        return (
            features,
            hf_loop.pad_collate(tokenizer.pad_token_id, pad_labels=True),
            dict(num_labels=len(names), id2label=dict(enumerate(names)), label2id=index),
        )
    from suite import squad_hf

    data = squad_hf.read_squad(cfg["train"], examples)
    squad_hf.truncate_questions(tokenizer, data, cfg["options"]["max_query_length"])
    features = squad_hf.hf_train_features(tokenizer, data, cfg["sequence_length"], cfg["options"]["doc_stride"])
    return features, hf_loop.pad_collate(tokenizer.pad_token_id, ("start_positions", "end_positions")), {}


def build_hf(task, cfg, examples, total_rounds, recipe, batch_size):
    import torch
    import transformers
    from torch.utils.data import DataLoader

    features, collate, kwargs = hf_features(task, cfg, examples)
    torch.manual_seed(recipe["seed"])
    model = getattr(transformers, cfg["hf_class"]).from_pretrained(minilm_path(), **kwargs).train()
    loader = DataLoader(
        features,
        batch_size=batch_size,
        shuffle=True,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(recipe["seed"]),
    )
    optimizer, scheduler, _ = hf_loop.hf_optimizer(model, len(loader) * 2 * total_rounds, recipe)
    real = sum(sum(f["attention_mask"]) for f in features)
    padded = sum(
        b["attention_mask"].numel()
        for b in DataLoader(features, batch_size=batch_size, shuffle=True, collate_fn=collate)
    )
    return dict(
        model=model,
        loader=loader,
        optimizer=optimizer,
        scheduler=scheduler,
        examples=len(features),
        steps_per_epoch=len(loader),
        real_tokens=real,
        padded_tokens=padded,
    )


def hf_round(system, threads, clip_norm, max_steps=None):
    """One epoch (or its first `max_steps` batches) of `hf_loop.hf_train`'s step on `threads`
    threads; returns (seconds, examples)."""
    import torch

    torch.set_num_threads(threads)
    model, optimizer, scheduler = system["model"], system["optimizer"], system["scheduler"]
    t, examples = time.perf_counter(), 0
    for step, batch in enumerate(system["loader"]):
        if max_steps is not None and step >= max_steps:
            break
        examples += len(batch["input_ids"])
        hf_loop.hf_step(model, batch, optimizer, scheduler, clip_norm)  # reads the loss, as hf_train does
    return time.perf_counter() - t, examples
