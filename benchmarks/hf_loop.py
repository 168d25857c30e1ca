"""The HF side's training, as HF's `Trainer` does it: AdamW with its weight-decay groups and linear schedule, one
step (forward, backward, clip, step), dynamic padding, and the loop over epochs. Shared by the benchmarks' PyTorch
processes (conll, squad, finetune_speed, fit_speed, lora); standard library at import (torch inside the functions).
"""

import contextlib
import os
import time

from common import uptime


def hf_optimizer(model, total_steps, recipe):
    """torch AdamW (weight decay off biases and LayerNorm weights, `recipe`'s epsilon) and
    `get_linear_schedule_with_warmup` with `round(warmup_ratio * total)` warm-up steps:
    HF `Trainer`'s recipe. Returns `(optimizer, scheduler, warmup_steps)`."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
            "weight_decay": recipe["weight_decay"],
        },
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=recipe["learning_rate"], betas=(0.9, 0.999), eps=recipe["adam_epsilon"])
    warmup = int(round(recipe["warmup_ratio"] * total_steps))
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total_steps), warmup


def hf_step(model, batch, optimizer, scheduler, clip_norm, precision=contextlib.nullcontext):
    """One HF training step (forward, backward, global-norm clip, optimizer and schedule step); returns the loss.
    `precision`: a context for the forward pass, e.g. `torch.autocast("cpu", dtype=torch.bfloat16)`."""
    import torch

    with precision():
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def pad_collate(pad_id, keys=(), pad_labels=False):
    """HF's dynamic padding (`DataCollatorWithPadding`): a `DataLoader` collate function padding each
    batch to its longest example (`input_ids` with `pad_id`, `labels` with -100 when `pad_labels`),
    `keys` stacked as they are (e.g. `start_positions`)."""
    import torch

    padded = [("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)] + [("labels", -100)] * pad_labels

    def collate(batch):
        length = max(len(f["input_ids"]) for f in batch)
        out = {
            key: torch.tensor([f[key] + [pad] * (length - len(f[key])) for f in batch], dtype=torch.long)
            for key, pad in padded
        }
        out.update({key: torch.tensor([f[key] for f in batch], dtype=torch.long) for key in keys})
        return out

    return collate


def hf_train(model, loader, epochs, what, recipe, log_every=50):
    """The HF side's training loop (what `Trainer` does): `hf_optimizer`, global clipping at
    `recipe["clip_norm"]`. Returns `steps`, `warmup_steps`, `train_seconds` (training steps
    only), `final_train_loss` and the load before/after."""
    import torch

    total = len(loader) * epochs
    optimizer, scheduler, warmup = hf_optimizer(model, total, recipe)
    print(
        f"HF: fine-tuning {what}, {epochs} epoch(s) of {len(loader)} steps (warm-up {warmup}), "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )
    load_before, uptime_before = os.getloadavg(), uptime()
    model.train()
    step, train_seconds, loss_sum = 0, 0.0, 0.0
    for epoch in range(epochs):
        t = time.perf_counter()
        for batch in loader:
            loss = hf_step(model, batch, optimizer, scheduler, recipe["clip_norm"])
            step, loss_sum = step + 1, loss_sum + loss
            if step % log_every == 0:
                print(
                    f"HF step {step}/{total} loss {loss_sum / log_every:.4f} "
                    f"({train_seconds + time.perf_counter() - t:.0f} s)",
                    flush=True,
                )
                loss_sum = 0.0
        train_seconds += time.perf_counter() - t
        print(f"HF epoch {epoch + 1}: {train_seconds:.0f} s, last loss {loss:.4f}", flush=True)
    return dict(
        steps=step,
        warmup_steps=warmup,
        train_seconds=train_seconds,
        final_train_loss=loss,
        loadavg_before=list(load_before),
        loadavg_after=list(os.getloadavg()),
        uptime_before=uptime_before,
        uptime_after=uptime(),
    )
