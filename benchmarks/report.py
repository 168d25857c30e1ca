"""One report of every benchmark: ours vs each peer, the ratio per row, where and when.

Reads the summary record each benchmark writes through `common.write_result`
(`benchmarks/results/NAME.json`: the rows, the command, the detailed JSON it came
from, the machine and its load, the date) and writes `benchmarks/REPORT.md` and a
PNG chart of the ratios (`benchmarks/report.png`; matplotlib, the `plot` extra). A
benchmark without a record is listed as "not run" with the command that makes one.

    python benchmarks/report.py
    python benchmarks/report.py --results /tmp/results --out /tmp/REPORT.md --chart /tmp/report.png

The ratio column says how many times better ours is (ours / peer when higher is
better, e.g. sentences/s or F1; peer / ours when lower is better, e.g. latency), so
above 1 is ours ahead. Figures from different benchmarks come from different runs
(each record gives its own date, command and load); only the two sides of one row
were measured side by side.
"""

import argparse
import datetime
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import REPO, RESULTS, machine  # noqa: E402

# Every benchmark of the suite and the command that writes its record, in report order.
SUITE = [
    ("serving", "raw-text serving vs HF transformers (SST-2, CoNLL)", "nice python benchmarks/serving.py"),
    ("backbone_speed", "backbone train / inference throughput vs KerasHub, HF",
     "nice python benchmarks/backbone_speed.py"),
    ("glue", "GLUE fine-tuning vs HF (quality and speed)", "nice python benchmarks/glue.py sst2"),
    ("conll", "CoNLL-2003 tagging vs HF (entity F1 and speed)", "nice python benchmarks/conll.py"),
    ("squad", "SQuAD v1.1 span QA vs HF (EM / F1 and speed)", "nice python benchmarks/squad.py"),
    ("next_sentence_choice", "multiple choice vs HF", "nice python benchmarks/next_sentence_choice.py"),
    ("input_pipeline", "pretraining input pipeline throughput", "nice python benchmarks/input_pipeline.py"),
    ("adaptive_pretraining", "task-adaptive MLM before fine-tuning vs fine-tuning directly (5 seeds)",
     "nice python benchmarks/adaptive_pretraining.py"),
    ("lora", "LoRA (rank 8) vs full fine-tuning and vs HF PEFT, SST-2 (3 seeds)", "nice python benchmarks/lora.py"),
]


def load_records(directory):
    """`{name: record}` of every `NAME.json` in `directory` (unreadable files are reported, not fatal)."""
    records = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            if not isinstance(record.get("rows"), list):
                raise ValueError("no 'rows' list")
        except (OSError, ValueError) as e:
            print(f"warning: skipping {path}: {e}", file=sys.stderr)
            continue
        record["_path"] = path
        records[name] = record
    return records


def ratio(row):
    """How many times better ours is than the peer (None without a peer figure)."""
    ours, peer = row.get("ours"), row.get("peer")
    if ours is None or peer is None or not ours or not peer:
        return None
    return ours / peer if row.get("higher_is_better", True) else peer / ours


def _number(x):
    if x is None:
        return "—"
    if isinstance(x, int) or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.1f}"


def _relative(path):
    if not path:
        return "—"
    path = os.path.abspath(path)
    return os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else path


def _load(record):
    if record.get("run_load"):
        low, high = record["run_load"]
        return f"1-minute load {low:.1f} to {high:.1f} during the run"
    load = (record.get("machine") or {}).get("loadavg")
    return f"load {load[0]:.1f} when recorded" if load else "load ?"


def markdown(records, chart=None, when=None):
    """The report's text: the machine, then one table per benchmark (or "not run")."""
    here = machine()
    when = when or datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    lines = [
        "# Benchmark report",
        "",
        f"Written {when} by `python benchmarks/report.py` from `benchmarks/results/*.json`. "
        f"Machine: {here['cpu'] or 'unknown CPU'}, {here['cores']} cores (shared; load average "
        f"{', '.join(f'{x:.2f}' for x in here['loadavg'])} when the report was written).",
        "",
        "**ours/peer** is how many times better ours is (ours ÷ peer when higher is better, peer ÷ ours for "
        "times such as latency): above 1 means ours is ahead. The two sides of a row were measured side by side "
        "unless its ratio is marked \"not side by side\" (then it is left out of the chart); each benchmark gives "
        "its own run (date, load, command, detailed JSON).",
        "",
    ]
    if chart:
        lines += [f"![ours/peer per row]({os.path.basename(chart)})", ""]
    names = [n for n, _, _ in SUITE] + sorted(set(records) - {n for n, _, _ in SUITE})
    described = {n: (d, c) for n, d, c in SUITE}
    for name in names:
        description, command = described.get(name, (name, ""))
        lines.append(f"## {name}: {description}")
        lines.append("")
        record = records.get(name)
        if record is None:
            variants = sorted(n for n in records if n.startswith(f"{name}_"))
            if variants:  # one record per configuration (e.g. backbone_speed_PRESET_SEQ): listed below
                lines += [f"Recorded per configuration: {', '.join(variants)} (sections below).", ""]
            else:
                lines += [f"not run (`{command}` writes `benchmarks/results/{name}.json`).", ""]
            continue
        m = record.get("machine") or {}
        lines += [f"Run started {record.get('started') or '?'}, recorded {record.get('date', '?')} (commit "
                  f"{record.get('commit') or '?'}), {m.get('cpu') or '?'}, "
                  f"{m.get('cores', '?')} cores, {_load(record)}; command `{record.get('command', '?')}`; "
                  f"source `{_relative(record.get('source'))}` (summary `{_relative(record['_path'])}`).", ""]
        if record.get("machine_line"):  # CPU flags and matmul GFLOP/s, when the record has them
            lines += [f"Machine when recorded: `{record['machine_line']}`.", ""]
        lines += ["| row | unit | ours | peer | peer figure | ours/peer | command | source |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in record["rows"]:
            r = ratio(row)
            shown = "—" if r is None else f"{r:.2f}×"
            if r is not None and not row.get("side_by_side", True):
                shown = f"({shown}, not side by side)"
            lines.append(f"| {row.get('what', '?')} | {row.get('unit', '')} | {_number(row.get('ours'))} | "
                         f"{row.get('peer_name') or '—'} | {_number(row.get('peer'))} | {shown} | "
                         f"`{row.get('command') or record.get('command', '?')}` | "
                         f"`{_relative(row.get('source') or record.get('source'))}` |")
            if row.get("note"):
                lines.append(f"| ↳ {row['note']} | | | | | | | |")
        lines.append("")
    return "\n".join(lines)


def chart_bars(records):
    """`(label, ratio)` of every row with a ratio measured side by side."""
    return [(f"{name}: {row.get('what', '?')}", ratio(row)) for name, record in records.items()
            for row in record["rows"] if ratio(row) is not None and row.get("side_by_side", True)]


def write_chart(records, path):
    """A horizontal bar chart of every row's ours/peer ratio (PNG); returns its number of bars
    (0, and no file, when nothing is to plot)."""
    bars = chart_bars(records)
    if not bars:
        return 0
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.4 * len(bars) + 1.2))
    labels, values = zip(*bars)
    ax.barh(range(len(bars)), values, color=["tab:green" if v >= 1 else "tab:red" for v in values])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(bars)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ours / peer (above 1: ours ahead)")
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.2f}×", va="center", fontsize=7)
    fig.tight_layout()
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return len(bars)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=RESULTS, help="directory of the NAME.json records")
    parser.add_argument("--out", default=os.path.join(REPO, "benchmarks", "REPORT.md"))
    parser.add_argument("--chart", default=os.path.join(REPO, "benchmarks", "report.png"),
                        help="PNG of the ratios (beside --out, so the report's link works)")
    args = parser.parse_args(argv)
    records = load_records(args.results)
    try:
        bars = write_chart(records, args.chart)
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[plot]'): no chart", file=sys.stderr)
        bars = 0
    chart = args.chart if bars else None
    text = markdown(records, chart)
    tmp = f"{args.out}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.replace(tmp, args.out)
    missing = [n for n, _, _ in SUITE if n not in records and not any(r.startswith(f"{n}_") for r in records)]
    print(f"{args.out}: {len(records)} benchmark(s) reported" + (f", not run: {', '.join(missing)}" if missing else "")
          + (f"; chart {chart} ({bars} row{'s' if bars > 1 else ''} measured side by side)" if chart else ""))
    return args.out


if __name__ == "__main__":
    main()
