"""conll's reporting: the table of a run (`ROOT/RUN/{ours,hf}.json`), its `results.json` when the sides ran as
separate commands, and its record `benchmarks/results/conll.HOSTKIND.json`. Not a benchmark (`run.py conll` is).
"""

import os

import two_sides
from common import read_json, write_json, write_result

# REFERENCE_RESULTS.md: HF transformers, same checkpoint and recipe, another session.
HF_REFERENCE = {1: dict(f1=0.834, train_seconds=1125, sentences_per_second=12.5)}


# --- both, and the table ------------------------------------------------------------------------------
def _load_note(r):
    return f"{r['loadavg_before'][0]:.1f}→{r['loadavg_after'][0]:.1f}"


def print_table(out, epochs, threads):
    ours, hf = read_json(os.path.join(out, "ours.json")), read_json(os.path.join(out, "hf.json"))
    rows = []
    for name, r in (("ours (keras_bert_zoo, TF)", ours), (_hf_name(hf, threads), hf)):
        if r is None:
            rows.append(f"| {name} | (not run) | | | | | | | |")
            continue
        rows.append(
            f"| {name} | {r['f1']:.4f} | {r['precision']:.4f} / {r['recall']:.4f} | "
            f"{r['seqeval']['f1']:.4f} | {r['steps']} | {r['train_seconds']:.0f} | "
            f"{r['sentences_per_second']:.1f} | {_load_note(r)} | {r['date'][:16]} |"
        )
    print(f"\nCoNLL-2003, all-MiniLM-L6-v2, {epochs} epoch(s), dev (eng.testa) at the end of training ({out}):\n")
    print(
        "| system | dev entity F1 | precision / recall | F1 by seqeval (default mode) | steps | train s "
        "| train sentences/s | load 1-min (before→after) | date |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if ours and hf:
        summary = dict(
            f1_difference=ours["f1"] - hf["f1"], speed_ratio=ours["sentences_per_second"] / hf["sentences_per_second"]
        )
        print(
            f"\nours − HF dev F1: {summary['f1_difference']:+.4f}; ours/HF training speed: "
            f"{summary['speed_ratio']:.2f}x. HF could not see {hf['dev_words_unseen']} of {hf['dev_words']} dev "
            f"words at length 128 ({hf['dev_counts']['truncated_sentences']} dev sentences truncated; those "
            f'words are predicted "O"); ours reads them in windows. Ours, seqeval on our predictions '
            f"{ours['seqeval']['f1']:.4f} vs our metric {ours['f1']:.4f}."
        )
        ref = HF_REFERENCE.get(epochs)
        if ref:
            print(
                f"REFERENCE_RESULTS.md (HF, another session): dev F1 {ref['f1']}, "
                f"{ref['sentences_per_second']} sentences/s."
            )
        print(
            f"\n| CoNLL-2003 dev entity F1 (MiniLM, {epochs} epoch{'s' if epochs > 1 else ''}, end of training) "
            f"| {ours['f1']:.3f} | {hf['f1']:.3f} |"
        )
        print(
            f"| CoNLL-2003 fine-tuning, training sentences/s (MiniLM, same run) | "
            f"{ours['sentences_per_second']:.1f} | {hf['sentences_per_second']:.1f} |"
        )
        return summary
    return None


def _hf_name(hf, threads):
    threads = (hf or {}).get("torch_threads", threads)
    return f"HF transformers (PyTorch, {threads} thread{'s' if threads != 1 else ''})"


def assemble_results(out, epochs, threads):
    """`results.json` of a run whose sides ran as separate `--only` commands (e.g. at the
    same time, one core each), so that `--record` can summarise it."""
    ours, hf = read_json(os.path.join(out, "ours.json")), read_json(os.path.join(out, "hf.json"))
    summary = print_table(out, epochs, threads)
    results = {
        "ours": ours,
        "hf": hf,
        **(summary or {}),
        "command": f"python benchmarks/run.py conll --epochs {epochs} --only ours|hf (each side separately)",
        "started": min(two_sides.side_started(r) for r in (ours, hf) if r),
        "git_commit_start": (ours or {}).get("git_commit"),
    }
    write_json(os.path.join(out, "results.json"), results)
    return results


def record_result(out, epochs, threads):
    """`benchmarks/results/conll.HOSTKIND.json`  from a finished run's results.json."""
    results = read_json(os.path.join(out, "results.json"))
    if not results or not results.get("ours"):
        return None
    ours, hf = results["ours"], results.get("hf") or {}
    what = f"CoNLL-2003 (MiniLM, {epochs} epoch{'s' if epochs > 1 else ''}, end of training)"
    rows = [
        {
            "what": f"{what}: dev entity F1",
            "unit": "F1",
            "ours": ours["f1"],
            "peer": hf.get("f1"),
            "peer_name": "HF transformers",
            "higher_is_better": True,
        },
        {
            "what": f"{what}: training speed (ours: {ours.get('batching', 'padded')} batches)",
            "unit": "sentences/s",
            "ours": ours["sentences_per_second"],
            "peer": hf.get("sentences_per_second"),
            "peer_name": _hf_name(hf, threads),
            "higher_is_better": True,
        },
    ]
    loads = [r[k][0] for r in (ours, hf) if r for k in ("loadavg_before", "loadavg_after")]
    return write_result(
        "conll",
        rows,
        command=results.get("command", "python benchmarks/run.py conll"),
        source=os.path.join(out, "results.json"),
        started=results.get("started"),
        load=[min(loads), max(loads)],
        commit=results.get("git_commit_start"),
    )
