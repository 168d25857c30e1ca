"""pretrain's `--only speed`: one train step of our `BertPretrainer` against HF's `BertForPreTraining` doing the
same work (see `speed_vs_hf`), in interleaved rounds; writes `OUT/speed.json` and the record `pretrain_speed`.
Not a benchmark of its own (`run.py pretrain --only speed` runs it).
"""

import os
import statistics
import time

import common

TOTAL_STEPS, WARMUP = 1000, 100  # the schedule both sides' optimizers follow (the steps timed are far fewer)


def random_batch(b, s, p, vocab):
    """One batch of random ids `(x, y)` in our pretrainer's form: `p` sorted masked positions per sequence (never
    [CLS]), the second half of each sequence segment 1."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, size=(b, s)).astype("int32")
    pos = np.sort(np.stack([rng.choice(np.arange(1, s), p, replace=False) for _ in range(b)]), 1).astype("int32")
    segments = np.zeros((b, s), "int32")
    segments[:, s // 2 :] = 1
    x = {"token_ids": ids, "segment_ids": segments, "padding_mask": np.ones((b, s), "int32"), "mask_positions": pos}
    y = {
        "mask_ids": np.take_along_axis(ids, pos, 1),
        "mask_weights": np.ones((b, p), "float32"),
        "next_sentence_labels": rng.integers(0, 2, b).astype("int32"),
    }
    return x, y


def our_systems(x, y, vocab, p, xla_only):
    """{name: one train step} of our bert_mini-shaped pretrainer, with XLA and (unless `xla_only`) without."""
    import keras

    from keras_bert_zoo import BertBackbone, BertPretrainer

    create_optimizer = common.lib("create_optimizer")
    systems = {}
    for jit in (True,) if xla_only else (True, False):
        keras.utils.set_random_seed(0)
        ours = BertPretrainer(
            backbone=BertBackbone(
                vocabulary_size=vocab, num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024
            )
        )
        ours.compile(optimizer=create_optimizer(1e-4, total_steps=TOTAL_STEPS, warmup_steps=WARMUP), jit_compile=jit)
        systems[f"ours, Keras 3 / TF, {'XLA' if jit else 'no XLA'} (MLM head at the {p} masked positions)"] = (
            lambda model=ours: model.train_on_batch(x, y)
        )
    return systems


def _make_hf(config):
    """HF's bert_mini-shaped `BertForPreTraining`, AdamW (eps 1e-6, weight decay 0.01 off LayerNorm/bias) and the
    linear warm-up/decay schedule: `(model, optimizer, scheduler)`."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.BertForPreTraining(config).train()
    decay = [q for n, q in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [q for n, q in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min((i + 1) / WARMUP, max(0.0, (TOTAL_STEPS - i) / (TOTAL_STEPS - WARMUP)))
    )
    return model, opt, sched


def _make_step(model, opt, sched, loss_fn):
    import torch

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()

    return step


def _hf_losses(x, y, vocab):
    """HF's two losses on our batch: `(gathered, default)`, each a function of the model."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    ids, pos = x["token_ids"], x["mask_positions"]
    t_common = dict(
        input_ids=torch.tensor(ids, dtype=torch.long),
        token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
        attention_mask=torch.ones(ids.shape, dtype=torch.long),
    )
    t_pos = torch.tensor(pos, dtype=torch.long)
    t_mask_ids = torch.tensor(y["mask_ids"], dtype=torch.long)
    t_weights = torch.tensor(y["mask_weights"])
    t_nsp = torch.tensor(y["next_sentence_labels"], dtype=torch.long)
    labels = np.full(ids.shape, -100)
    np.put_along_axis(labels, pos, y["mask_ids"], 1)
    t_labels = torch.tensor(labels, dtype=torch.long)

    def gathered_loss(model):
        """Ours' work: logits only at the masked positions."""
        out = model.bert(**t_common, return_dict=True)
        hidden = out.last_hidden_state
        masked = torch.gather(hidden, 1, t_pos[:, :, None].expand(-1, -1, hidden.shape[-1]))  # [b, p, hidden]
        mlm_logits = model.cls.predictions(masked)  # [b, p, vocab]
        nsp_logits = model.cls.seq_relationship(out.pooler_output)
        per_token = F.cross_entropy(mlm_logits.reshape(-1, vocab), t_mask_ids.reshape(-1), reduction="none")
        mlm = (per_token * t_weights.reshape(-1)).sum() / t_weights.sum()
        return mlm + F.cross_entropy(nsp_logits, t_nsp)

    def default_loss(model):
        """HF as users call it: logits at all positions, labels -100 off the masked ones."""
        return model(**t_common, labels=t_labels, next_sentence_label=t_nsp).loss

    return gathered_loss, default_loss


def hf_systems(x, y, vocab, threads, hf_one_thread):
    """{name: one train step} of HF's same work as ours, its default forward and (with `hf_one_thread`) the same
    work on 1 thread; the names of the first two; and both losses on the same weights `(gathered, default)`."""
    import torch
    import transformers

    b, s = x["token_ids"].shape
    p = x["mask_positions"].shape[1]
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    )
    gathered_loss, default_loss = _hf_losses(x, y, vocab)
    hf_gathered, hf_default = _make_hf(config), _make_hf(config)
    # Same loss value: the gathered head computes the default loss (dropout off, same weights).
    hf_gathered[0].eval()
    with torch.no_grad():
        losses = float(gathered_loss(hf_gathered[0])), float(default_loss(hf_gathered[0]))
    hf_gathered[0].train()
    assert abs(losses[0] - losses[1]) < 1e-4 * max(1.0, abs(losses[1])), losses
    names = (
        f"HF BertForPreTraining, PyTorch eager, MLM head at the {p} masked positions (same work as ours)",
        f"HF BertForPreTraining default forward, PyTorch eager, vocabulary logits at all {s} positions",
    )
    systems = {names[0]: _make_step(*hf_gathered, gathered_loss), names[1]: _make_step(*hf_default, default_loss)}
    if hf_one_thread:
        same_work_step = _make_step(*_make_hf(config), gathered_loss)

        def one_thread_step():
            torch.set_num_threads(1)
            try:
                same_work_step()
            finally:
                torch.set_num_threads(threads)

        systems["diagnostic: HF same work as ours, PyTorch on 1 thread"] = one_thread_step
    return systems, names, losses


def time_rounds(systems, rounds, steps):
    """{name: seconds of `steps` steps per round}, after 2 warm-up steps each, the systems interleaved per round."""
    for step in systems.values():  # compile / warm up
        for _ in range(2):
            step()
    times = {k: [] for k in systems}
    for _ in range(rounds):
        for name, step in systems.items():
            t = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append(time.perf_counter() - t)
    return times


def speed_vs_hf(
    batch_size=32,
    sequence_length=128,
    max_predictions=20,
    vocab=8000,
    rounds=8,
    steps=5,
    out_dir=None,
    xla_only=False,
    threads=2,
    hf_one_thread=True,
    command="",
    record=True,
):
    """Train-step throughput of our BertPretrainer vs HF BertForPreTraining doing the same work.

    bert_mini shape, random ids, `max_predictions` masked positions per sequence. Our
    pretrainer gathers the masked positions and computes vocabulary logits only there;
    HF's `BertForPreTraining.forward` computes them at every position. So HF is timed
    twice: "HF, MLM head at the masked positions only" runs `hf.bert(...)`, gathers the
    same positions of `sequence_output`, applies `hf.cls.predictions` to them and
    `hf.cls.seq_relationship` to the pooled output, with the same loss (mean MLM
    cross-entropy over the masked positions + NSP cross-entropy): the same work as ours.
    "HF default, logits at all positions" is `BertForPreTraining(**inputs, labels=...)`
    as users call it (labels -100 off the masked positions: the same loss value, more
    work). Same batch, length, inputs, AdamW (eps 1e-6, weight decay 0.01 off
    LayerNorm/bias), linear warm-up/decay schedule and clipping at 1.0 for all; `threads`
    (2) intra-op threads for both (TensorFlow: 2 intra-op, 1 inter-op; PyTorch:
    `torch.set_num_threads(2)`). The systems run in interleaved rounds of `steps` steps,
    so each sees the same load; we report the median and the best round and the median of
    the per-round ratios. With `hf_one_thread`, a diagnostic row runs HF's same-work step
    on 1 thread: on an oversubscribed machine PyTorch's 2-thread OpenMP regions can wait
    on a descheduled thread, and this row shows how much of the gap that is.
    """
    import keras
    import tensorflow as tf
    import torch

    # Same thread count for both: 2 intra-op threads, ops one at a time (PyTorch eager runs
    # them in sequence). Only possible before TensorFlow runs its first op in this process.
    common.set_tf_threads(threads)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    b, s, p = batch_size, sequence_length, max_predictions
    x, y = random_batch(b, s, p, vocab)
    load_before = os.getloadavg()
    systems = our_systems(x, y, vocab, p, xla_only)
    hf, hf_names, losses = hf_systems(x, y, vocab, threads, hf_one_thread)
    systems.update(hf)
    times = time_rounds(systems, rounds, steps)
    tf_threads = {
        "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
    }
    result = summarise(times, hf_names[0], dict(b=b, s=s, p=p, vocab=vocab, rounds=rounds, steps=steps))
    result.update(
        tf_threads=tf_threads,
        loadavg_before=list(load_before),
        loss_check=dict(zip(("gathered", "default"), losses, strict=True)),
    )
    print_table(result, load_before, tf_threads, losses)
    if out_dir:
        common.write_json(os.path.join(out_dir, "speed.json"), result)
        rows = record_rows(result, times, hf_names[0])
        if record:
            print(common.write_result("pretrain_speed", rows, command, source=os.path.join(out_dir, "speed.json")))
    keras.utils.clear_session()
    return result


def summarise(times, base, shape):
    """speed.json: per system the median and best round's tokens/s and the median of its per-round ratios to
    `base` (HF, same work), the shape, the threads, the load and the versions."""
    import keras
    import torch
    import transformers

    tokens = shape["steps"] * shape["b"] * shape["s"]
    result = {
        "systems": {},
        "batch_size": shape["b"],
        "sequence_length": shape["s"],
        "max_predictions": shape["p"],
        "vocab": shape["vocab"],
        "rounds": shape["rounds"],
        "steps_per_round": shape["steps"],
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "loadavg_after": list(os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "versions": {"keras": keras.__version__, "torch": torch.__version__, "transformers": transformers.__version__},
    }
    for name, ts in times.items():
        per_round_ratio = [hf_t / t for t, hf_t in zip(ts, times[base], strict=True)]  # >1: faster than HF (same work)
        result["systems"][name] = {
            "median_tokens_per_second": tokens / statistics.median(ts),
            "best_tokens_per_second": tokens / min(ts),
            "median_ratio_vs_hf_same_work": statistics.median(per_round_ratio),
            "round_seconds": ts,
        }
    return result


def print_table(result, load_before, tf_threads, losses):
    r = result
    print(
        f"\nTrain-step throughput, bert_mini shape (4 layers, hidden 256), vocab {r['vocab']}, batch "
        f"{r['batch_size']} x {r['sequence_length']}, {r['max_predictions']} masked positions per sequence; "
        f"{r['rounds']} interleaved rounds of {r['steps_per_round']} steps; torch threads {r['torch_threads']}, TF "
        f"intra-op {tf_threads['intra_op']} / inter-op {tf_threads['inter_op']}, {os.cpu_count()} cores; load "
        f"average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}; training loss of the two HF variants on the "
        f"same weights: {losses[0]:.5f} / {losses[1]:.5f}\n"
    )
    print(
        "| system | tokens/s (median round) | tokens/s (best round) | ratio to HF same work (median of per-round ratios) |"
    )
    print("|---|---|---|---|")
    for name, row in result["systems"].items():
        print(
            f"| {name} | {row['median_tokens_per_second']:,.0f} | {row['best_tokens_per_second']:,.0f} | "
            f"{row['median_ratio_vs_hf_same_work']:.2f}x |"
        )


def record_rows(result, times, base):
    """The record's rows: each of our systems' median tokens/s next to HF's same work."""
    b, s = result["batch_size"], result["sequence_length"]
    tokens = result["steps_per_round"] * b * s
    return [
        dict(
            what=f"MLM+NSP train step, bert_mini shape, batch {b} x {s}: {name}",
            unit="tokens/s",
            ours=round(r["median_tokens_per_second"]),
            peer=round(tokens / statistics.median(times[base])),
            peer_name=base,
            higher_is_better=True,
            note=f"median of per-round ratios {r['median_ratio_vs_hf_same_work']:.2f}",
        )
        for name, r in result["systems"].items()
        if name.startswith("ours")
    ]
