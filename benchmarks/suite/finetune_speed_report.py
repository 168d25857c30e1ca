"""finetune_speed's reporting: the table of one task's rounds and the record's rows. Not a benchmark
(`run.py finetune_speed` is).
"""

import common


# --- tables, records --------------------------------------------------------------------------------------
def print_task(result):
    print(
        f"\n{result['task']} ({result['data']}, first {result['first_examples']} examples, length "
        f"{result['sequence_length']}, batch {result['batch_size']}), {result['rounds']} interleaved "
        f"rounds of one epoch; load {result['loadavg_before'][0]:.1f} -> {result['loadavg_after'][0]:.1f} "
        f"({result['started'][:16]} to {result['date'][11:16]})\n"
    )
    order = result.get("order") or list(result["systems"])
    hf_names = [n for n in order if result["systems"][n]["kind"] == "hf"]
    print(
        f"| system | {result['unit']}/s (median round) | best round | padded / real tokens | "
        + " | ".join(f"ours / {n.split(', ')[-1]} HF (median of rounds)" for n in hf_names)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(hf_names))
    for name in order:
        r = result["systems"][name]
        ratios = " | ".join(f"{r['ratio_vs'][h]['median']:.2f}x" if r["kind"] == "ours" else "" for h in hf_names)
        print(
            f"| {name} | {r['median_examples_per_second']:.1f} | {r['best_examples_per_second']:.1f} | "
            f"{r['padded_over_real_tokens']:.2f} | {ratios} |"
        )


def summary_rows(results):
    rows = []
    for result in results:
        hf = {r: n for n, s in result["systems"].items() if s["kind"] == "hf" for r in [n.split(", ")[-1]]}
        for name, s in result["systems"].items():
            if s["kind"] != "ours":
                continue
            for threads, hf_name in hf.items():
                rows.append(
                    {
                        "what": f"fine-tuning {result['unit']}/s, {result['task']} ({result['data']}, batch {result['batch_size']}), {name}, "
                        f"vs HF on {threads}",
                        "unit": f"{result['unit']}/s",
                        "ours": round(s["median_examples_per_second"], 2),
                        "peer": round(result["systems"][hf_name]["median_examples_per_second"], 2),
                        "peer_name": f"HF transformers (PyTorch, {threads})",
                        "higher_is_better": True,
                        "note": f"median of per-round ratios {s['ratio_vs'][hf_name]['median']:.2f}x over "
                        f"{result['rounds']} interleaved rounds; load {result['loadavg_before'][0]:.1f}"
                        f"->{result['loadavg_after'][0]:.1f}",
                    }
                )
    return rows


def write_record(rows, command, source, started, load):
    """The summary record for `run.py report`."""
    return common.write_result("finetune_speed", rows, command=command, source=source, started=started, load=load)
