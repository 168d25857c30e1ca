"""bf16 vs float32 training speed of our backbone + 2-class head, and where the time goes.

Systems (any of `backbone_speed.SYSTEMS`; default: float32 with and without XLA, mixed_bfloat16
with and without XLA) are measured in interleaved rounds of `--steps` training steps. The
figure is bf16 (the setting `jit_compile="auto"` picks: no XLA on a CPU) over the FASTER float32
setting of the same round, the median over rounds; the matmul peaks (float32, bfloat16) are
measured in the same rounds.

`--profile`: after the rounds, the TensorFlow profiler traces `--steps` steps of each non-XLA
system, and the op time is grouped: matmuls (oneDNN MatMul/BatchMatMul), dropout's random
numbers, casts, the optimizer (ops under the optimizer's name scope), the rest by op type.
Op times are summed over threads (ops run concurrently), so the shares are of op time.

    nice python benchmarks/bf16_speed.py --preset bert_mini_uncased --rounds 5 --steps 4 --profile
    nice python benchmarks/bf16_speed.py --preset bert_base_uncased --rounds 3 --steps 2
"""

import argparse
import collections
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backbone_speed import RESULTS, build_systems, measure, shape_of, summarise, summary_record  # noqa: E402
from common import git_commit, now, uptime, versions, write_json  # noqa: E402

MATMULS = {"_MklMatMul", "_MklFusedMatMul", "MatMul", "_MklBatchMatMulV2", "BatchMatMulV2", "BatchMatMulV3",
           "_MklNativeFusedMatMul", "_MklNativeMatMul", "_MklNativeBatchMatMulV2"}


def category(name, op_type):
    lowered = name.lower()
    if "optimizer" in lowered or "adam" in lowered or "clip" in lowered:
        return "optimizer (AdamW, clipping)"
    if op_type in MATMULS:
        return "matmul"
    if op_type.startswith("StatelessRandom") or "dropout" in lowered:
        return "dropout (random numbers, mask)"
    if op_type == "Cast":
        return "cast"
    if "layer_norm" in lowered or "layernorm" in lowered:
        return "LayerNorm (fwd+bwd)"
    if "gelu" in lowered or op_type in ("Erf", "Erfc"):
        return "GELU (fwd+bwd)"
    if "softmax" in lowered:
        return "softmax (fwd+bwd)"
    if "embedding" in lowered or op_type in ("GatherV2", "UnsortedSegmentSum", "ResourceGather"):
        return "embeddings (gather, scatter)"
    return "other"


def profile(system, steps):
    """`{category: seconds per step}` and `{op type: seconds per step}` of `steps` training steps."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="bf16_profile_")
    try:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        system.model.fit(system.dataset, steps_per_epoch=steps, epochs=1, verbose=0)
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    by_category, by_type = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                # TensorFlow op events are "scope/op_name:OpType"; skip executor/runtime events.
                if ":" not in name or "::" in name or "/" not in name:
                    continue
                op_type = name.rsplit(":", 1)[1]
                seconds = event.duration_ps / 1e12 / steps
                by_category[category(name, op_type)] += seconds
                by_type[op_type] += seconds
    return {"wall_seconds_per_step": wall / steps, "op_seconds_per_step": sum(by_type.values()),
            "categories": dict(by_category.most_common()), "op_types": dict(by_type.most_common(25))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bert_mini_uncased")
    parser.add_argument("--layers", type=int, default=None,
                        help="the preset's width with this many layers (fewer layers: a larger share of "
                             "embeddings and optimizer, so a lower bound on the full model's bf16 ratio)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="training steps per measurement")
    parser.add_argument("--systems", default="ours_nojit,ours,ours_bf16,ours_bf16_xla")
    parser.add_argument("--bf16", default="ours_bf16", help="the bf16 system of the headline ratio")
    parser.add_argument("--profile", action="store_true", help="op-level profile of each non-XLA system")
    parser.add_argument("--json", default=None, help="default /tmp/bf16_speed_PRESET_SEQ.json")
    parser.add_argument("--no-summary", action="store_true", help="do not write benchmarks/results/ records")
    args = parser.parse_args()
    started, load_before, uptime_before = now(), os.getloadavg(), uptime()
    command = "python " + " ".join(sys.argv)
    names = args.systems.split(",")
    shape = shape_of(args.preset, args.layers)
    systems = build_systems(names, shape, args.batch, args.seq)
    by_key = {s.key: s for s in systems}
    train, infer, peaks = measure(systems, args.rounds, args.steps)
    rows, peak = summarise(systems, train, infer, peaks, shape, args.seq)

    fp32 = [s for s in systems if s.policy == "float32" and not getattr(s, "grappler_bf16", False)]
    bf16 = by_key[args.bf16]
    per_round = [train[bf16.name][r] / max(train[s.name][r] for s in fp32) for r in range(args.rounds)]
    best_fp32 = max(fp32, key=lambda s: statistics.median(train[s.name]))
    print(f"\n{args.preset}{f' ({args.layers} layers)' if args.layers else ''}, batch {args.batch} x {args.seq}, training; medians of {args.rounds} interleaved rounds "
          f"of {args.steps} steps; load before: {uptime_before}; after: {uptime()}")
    print(f"matmul peak: float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, bfloat16 {peak['bfloat16'] / 1e9:,.0f} "
          f"GFLOP/s (bf16/fp32 {peak['bfloat16'] / peak['float32']:.2f})")
    for r in rows:
        print(f"  {r['system']:58s} {r['train_tokens_per_s']:9,.0f} tok/s  MFU {r['train_mfu_own_peak']:6.1%} "
              f"(of fp32 peak {r['train_mfu_fp32_peak']:6.1%})  rounds {[round(x) for x in r['train_rounds']]}")
    print(f"bf16 ({bf16.name}) / the faster float32 of each round: {[round(x, 2) for x in per_round]}, "
          f"median {statistics.median(per_round):.2f}")
    cpu = measure.train_cpu
    per_round_cpu = [cpu[bf16.name][r] / max(cpu[s.name][r] for s in fp32) for r in range(args.rounds)]
    for s in systems:
        print(f"  {s.name:58s} {statistics.median(cpu[s.name]):9,.0f} tokens per CPU-second  "
              f"rounds {[round(x) for x in cpu[s.name]]}")
    print(f"same, per CPU-second (the process's CPU time, unaffected by waiting for a core): "
          f"{[round(x, 2) for x in per_round_cpu]}, median {statistics.median(per_round_cpu):.2f}")

    profiles = {}
    if args.profile:
        for s in systems:
            if s.model.jit_compile:
                continue
            profiles[s.key] = p = profile(s, args.steps)
            total = p["op_seconds_per_step"]
            print(f"\nprofile {s.name}: wall {p['wall_seconds_per_step'] * 1e3:,.0f} ms/step, op time "
                  f"{total * 1e3:,.0f} ms/step (summed over threads)")
            for name, seconds in p["categories"].items():
                print(f"  {name:34s} {seconds * 1e3:8.1f} ms  {seconds / total:6.1%}")
            print("  top op types: " + ", ".join(f"{k} {v * 1e3:.0f}" for k, v in list(p["op_types"].items())[:12]))

    path = args.json or f"/tmp/bf16_speed_{args.preset}_{args.seq}.json"
    write_json(path, {
        "command": command, "started": started, "ended": now(), "git_commit": git_commit(),
        "uptime_before": uptime_before, "uptime_after": uptime(), "preset": args.preset, "shape": shape,
        "layers": args.layers, "batch": args.batch, "seq": args.seq, "rounds": args.rounds, "steps": args.steps,
        "matmul_peak_flops": peak, "matmul_peak_rounds": peaks, "rows": rows,
        "bf16_system": bf16.name, "bf16_over_best_fp32_per_round": per_round,
        "bf16_over_best_fp32_median": statistics.median(per_round), "profiles": profiles,
        "bf16_over_best_fp32_per_cpu_second_per_round": per_round_cpu,
        "bf16_over_best_fp32_per_cpu_second_median": statistics.median(per_round_cpu),
        "versions": versions("tensorflow", "keras"),
    })
    print(f"results: {path}")
    if not args.no_summary:
        layers = f"_{args.layers}layers" if args.layers else ""
        name = f"bf16_speed_{args.preset}{layers}_{args.seq}"
        row = {"what": f"bf16 training, {args.preset}{layers} {args.batch} x {args.seq}", "unit": "tokens/s",
               "ours": statistics.median(train[bf16.name]), "peer": statistics.median(train[best_fp32.name]),
               "peer_name": f"ours float32 ({best_fp32.name})", "higher_is_better": True,
               "note": f"median of per-round ratios {statistics.median(per_round):.2f} (wall), "
                       f"{statistics.median(per_round_cpu):.2f} (per CPU-second)"}
        write_json(os.path.join(RESULTS, f"{name}.json"),
                   summary_record(name, [row], command, path, started, load_before))


if __name__ == "__main__":
    main()
