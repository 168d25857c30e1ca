"""backbone_speed's reporting: medians, ratios to the first system and MFU of each system, the table, and the rows
of its record. Not a benchmark (`run.py backbone_speed` is).
"""

import statistics


def summarise(systems, train, infer, peaks, train_flops, infer_flops, train_cpu):
    """Rows of medians, ratios to the first system and MFU (against the best peak of the run); `train_flops` /
    `infer_flops`: model FLOPs per token, `train_cpu`: tokens per CPU-second of training per round."""
    peak = {dtype: max(values) for dtype, values in peaks.items()}
    ref = systems[0].name
    tr_ref = statistics.median(train[ref])
    in_ref = statistics.median(infer[ref]) if infer[ref] else None
    rows = []
    for s in systems:
        t = statistics.median(train[s.name])
        i = statistics.median(infer[s.name]) if infer[s.name] else None
        dtype = "bfloat16" if "bfloat16" in s.policy or getattr(s, "grappler_bf16", False) else "float32"
        rows.append(
            {
                "system": s.name,
                "key": getattr(s, "key", "hf"),
                "precision": dtype,
                "train_tokens_per_s": t,
                "train_rounds": train[s.name],
                "first_over_this_train": tr_ref / t,
                "train_tokens_per_cpu_s_rounds": train_cpu.get(s.name),
                "train_tflops": t * train_flops / 1e12,
                "train_mfu_fp32_peak": t * train_flops / peak["float32"],
                "train_mfu_own_peak": t * train_flops / peak[dtype],
                "infer_tokens_per_s": i,
                "infer_rounds": infer[s.name],
                "first_over_this_infer": (in_ref / i) if i else None,
                "infer_mfu_fp32_peak": (i * infer_flops / peak["float32"]) if i else None,
                "infer_mfu_own_peak": (i * infer_flops / peak[dtype]) if i else None,
            }
        )
    return rows, peak


def print_table(rows, peak, title):
    print(f"\n{title}")
    print(
        f"matmul peak (2048^3 tf.matmul, best of the run): float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, "
        f"bfloat16 {peak['bfloat16'] / 1e9:,.0f} GFLOP/s"
    )
    print(
        f"{'system':58s} {'train tok/s':>11s} {'1st/this':>8s} {'MFU':>6s} {'infer tok/s':>11s} "
        f"{'1st/this':>8s} {'MFU':>6s}"
    )
    for r in rows:
        inf = (
            f"{r['infer_tokens_per_s']:11,.0f} {r['first_over_this_infer']:8.2f} {r['infer_mfu_own_peak']:6.1%}"
            if r["infer_tokens_per_s"]
            else f"{'—':>11s} {'':8s} {'':6s}"
        )
        print(
            f"{r['system']:58s} {r['train_tokens_per_s']:11,.0f} {r['first_over_this_train']:8.2f} "
            f"{r['train_mfu_own_peak']:6.1%} {inf}"
        )
    print("MFU: achieved model FLOP/s / the matmul peak of the system's precision (bf16 rows: the bf16 peak).")


def record_rows(rows, name, batch, seq):
    """The record's rows: the first system against each other one, train and inference tokens/s, with their MFU."""
    ours, out = rows[0], []
    for r in rows[1:]:
        for what, key, mfu in (
            ("train", "train_tokens_per_s", "train_mfu_own_peak"),
            ("inference", "infer_tokens_per_s", "infer_mfu_own_peak"),
        ):
            out.append(
                {
                    "what": f"{name} {what}, batch {batch} x {seq}",
                    "unit": "tokens/s",
                    "ours": ours[key],
                    "peer": r[key],
                    "peer_name": r["system"],
                    "higher_is_better": True,
                    "note": f"MFU {ours['system']} {ours[mfu]:.1%}, {r['system']} {r[mfu]:.1%}",
                }
            )
    return out


def train_flops_per_token(shape, seq):
    """Model (matmul) FLOPs per token of one training step; see backbone_speed's docstring."""
    return 3 * forward_flops_per_token(shape, seq)


def forward_flops_per_token(shape, seq):
    h, i, layers = shape["hidden_dim"], shape["intermediate_dim"], shape["num_layers"]
    return layers * (8 * h * h + 4 * h * i + 4 * seq * h) + 2 * h * h / seq
