"""The benchmarks' one entry point: a named benchmark, or the report of every current record.

    python benchmarks/run.py list                    # the benchmarks and what each measures
    python benchmarks/run.py NAME [options]          # e.g. fit_speed --task classify --rounds 2
    python benchmarks/run.py NAME --help             # its options (each has a smallest budget for a check)
    python benchmarks/run.py report                  # docs/benchmarks.md from benchmarks/results/*.json
    python benchmarks/run.py report --check          # exit 1 when docs/benchmarks.md is not what it writes
    python benchmarks/run.py host-kind               # this host's kind, the suffix of its records

Every benchmark is a module of `benchmarks/suite/` with a `main(argv)`; its systems run in their own
processes (`python benchmarks/run.py NAME --worker SYSTEM ...`, see `common.py`), and it writes its
record to `benchmarks/results/NAME.HOSTKIND.json` (`common.write_result`: one current record per
benchmark and host kind; git keeps the earlier ones). The report is generated, never edited by hand.
A benchmark's parts by purpose sit beside it as `suite/NAME_*.py` (its HF side, its own side, its reporting);
what several share is `common.py` (workers, hosts, records), `hf_loop.py` (HF's training loop) and
`two_sides.py` (the quality benchmarks' two sides run one after the other).
"""

import argparse
import glob
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # `import common` and `from suite import ...` in every process the harness starts
    sys.path.insert(0, HERE)

import common  # noqa: E402

# name -> what it measures, in report order (the module is suite/NAME.py; cli_startup is below).
BENCHMARKS = {
    "fit_speed": "the user's script `fit(texts, labels)` + `evaluate` + `predict`, ours (TF, JAX, torch; float32 "
    "and bf16) vs KerasHub `fit` vs HF's training loop",
    "finetune_speed": "fine-tuning examples/s per task (SST-2, CoNLL, SQuAD) through `finetune`'s pipeline vs HF",
    "glue": "GLUE dev scores (SST-2, MRPC, RTE) from all-MiniLM-L6-v2 vs HF's reference recipe; STS-B embeddings",
    "conll": "CoNLL-2003 NER entity F1, ours vs HF `BertForTokenClassification`, same recipe",
    "chinese": "MSRA NER entity F1 and Chinese review sentiment accuracy from a small Chinese checkpoint, ours vs HF",
    "squad": "SQuAD v1.1 EM / F1, ours vs HF `run_qa.py` written out, same windows and recipe",
    "serving": "raw-text serving (SavedModel with the tokenizer in the graph) vs HF, same weights",
    "int8": "int8 `predict` speed and dev accuracy vs HF `quantize_dynamic`",
    "lora": "LoRA rank 8 vs full fine-tuning and vs HF PEFT, SST-2",
    "pretrain": "MLM+NSP pretraining on WikiText-2, and the train step vs HF `BertForPreTraining`",
    "chinese_pretrain": "MSRA NER F1 after pretraining a small Chinese BERT with character vs whole-word (jieba) "
    "masking, and after continued pretraining vs direct fine-tuning; the segmenter's pipeline rate vs the train step",
    "backbone_speed": "backbone train / inference tokens/s and MFU vs KerasHub and HF (float32, bf16)",
    "cli_startup": "wall time of `bert-zoo --help` and verbs' help in fresh processes",
}
DOC = os.path.join(common.REPO, "docs", "benchmarks.md")
MAX_DOC_LINES = 600


# --- cli_startup: small enough to live here ---------------------------------------------------------------
CLI_COMMANDS = (["--help"], ["finetune", "--help"], ["finetune", "classify", "--help"], ["pretrain", "--help"])


def _cli_once(repo, args):
    """Seconds from start to exit of one `bert-zoo ARGS` process run on `repo`'s code."""
    script = os.path.join(os.path.dirname(sys.executable), "bert-zoo")
    entry = [script] if os.path.exists(script) else [sys.executable, "-m", "keras_bert_zoo.cli"]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(repo)}
    start = time.perf_counter()
    done = subprocess.run(entry + args, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"bert-zoo {' '.join(args)} on {repo} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def cli_startup(argv):
    """Each run a new process as a user's shell starts it; rounds interleave the commands and, with
    `--repos`, checkouts (`git worktree add /tmp/before HEAD~1`, then `--repos .,/tmp/before`)."""
    parser = argparse.ArgumentParser(prog="run.py cli_startup", description=cli_startup.__doc__)
    parser.add_argument("--repos", default=common.REPO, help="comma-separated checkouts to time (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-record", action="store_true", help="print only (a record is written for one checkout)")
    args = parser.parse_args(argv)
    repos = args.repos.split(",")
    print(f"machine: {common.machine_line()}; commit {common.git_commit()}; {common.now()}")
    times = {(repo, i): [] for repo in repos for i in range(len(CLI_COMMANDS))}
    for _ in range(args.rounds):
        for i, command in enumerate(CLI_COMMANDS):
            for repo in repos:
                times[repo, i].append(_cli_once(repo, command))
    print("| command | checkout | median s | min s | max s | runs |\n|---|---|---|---|---|---|")
    rows = []
    for i, command in enumerate(CLI_COMMANDS):
        for repo in repos:
            t = times[repo, i]
            print(
                f"| bert-zoo {' '.join(command)} | {repo} | {statistics.median(t):.2f} | {min(t):.2f} | "
                f"{max(t):.2f} | {len(t)} |"
            )
            rows.append(
                dict(
                    what=f"`bert-zoo {' '.join(command)}`, median of {len(t)}",
                    unit="s",
                    ours=round(statistics.median(t), 3),
                    peer=None,
                    peer_name=None,
                    higher_is_better=False,
                )
            )
    if len(repos) == 1 and not args.no_record:
        print(common.write_result("cli_startup", rows, common.command_line("cli_startup", argv)))


# --- the report: docs/benchmarks.md ---------------------------------------------------------------------
def load_records(directory):
    """`{file name without .json: record}` of every record with a `rows` list in `directory`."""
    records = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            if not isinstance(record.get("rows"), list):
                raise ValueError("no 'rows' list")
        except (OSError, ValueError) as e:
            print(f"warning: skipping {path}: {e}", file=sys.stderr)
            continue
        records[os.path.basename(path)[: -len(".json")]] = record
    return records


def ratio(row):
    """How many times better ours is than the peer (None without both figures): ours / peer when
    higher is better, peer / ours for times such as latency; above 1: ours ahead."""
    ours, peer = row.get("ours"), row.get("peer")
    if not ours or not peer:
        return None
    return ours / peer if row.get("higher_is_better", True) else peer / ours


def _number(x):
    if x is None:
        return "—"
    if isinstance(x, int) or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.1f}"


def _what(name):
    """The first paragraph of the benchmark's module docstring, on one line."""
    if name == "cli_startup":
        return cli_startup.__doc__.split("\n\n")[0].replace("\n", " ").replace("    ", "")
    path = os.path.join(HERE, "suite", f"{name}.py")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    doc = source.split('"""')[1] if source.startswith('"""') else ""
    return " ".join(doc.split("\n\n")[0].split())


def _clean(text):
    """A row's text without commit ids and timestamps (the report is no diary: the record's date field says when)."""
    text = re.sub(r"(?:,\s*|;\s*|\s)?\b(?:commit|code of)\s+[0-9a-f]{7,12}\b", "", text)
    text = re.sub(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\b", "", text)
    return re.sub(r",?\s*\d{4}-\d{2}-\d{2}(?:T[\d:]+(?:[+-]\d\d:\d\d)?)?", "", text)


def _host(record):
    if record.get("machine_line"):
        return record["machine_line"]
    m = record.get("machine") or {}
    return f"cpu {m.get('cpu', '?')}, cores {m.get('cores', '?')} (no machine line recorded)"


def _table(record):
    lines = ["| row | unit | ours | peer | peer figure | ours/peer |", "|---|---|---|---|---|---|"]
    for row in record["rows"]:
        r = ratio(row)
        shown = "—" if r is None else f"{r:.2f}×"
        if r is not None and not row.get("side_by_side", True):
            shown = f"({shown}, not side by side)"
        lines.append(
            f"| {_clean(row.get('what', '?'))} | {row.get('unit', '')} | {_number(row.get('ours'))} | "
            f"{row.get('peer_name') or '—'} | {_number(row.get('peer'))} | {shown} |"
        )
    notes = [f"- {_clean(row['what'])}: {_clean(row['note'])}" for row in record["rows"] if row.get("note")]
    commands = sorted({row["command"] for row in record["rows"] if row.get("command")} - {record.get("command")})
    if notes:
        lines += ["", *notes]
    if commands:
        lines += ["", "Rows from other commands: " + "; ".join(f"`{c}`" for c in commands) + "."]
    return lines


def markdown(records):
    """The text of docs/benchmarks.md: per benchmark what it measures, its command, then per record
    (one per host kind and configuration) the host line and the table of ours vs peer."""
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python benchmarks/run.py report` from the records in `benchmarks/results/` "
        "(`NAME.HOSTKIND.json`, one current record per benchmark and host kind; earlier ones are in git "
        "history). Do not edit: a test checks that this file is what the generator writes.",
        "",
        "**ours/peer** is how many times better ours is (ours ÷ peer when higher is better, peer ÷ ours for "
        "times such as latency): above 1 means ours is ahead. The two sides of a row were measured side by "
        "side, in interleaved rounds with each system in its own process, unless the ratio is marked "
        '"not side by side". Absolute figures depend on the machine\'s load (shared 2-core hosts); compare '
        "ratios. How the design choices were measured: docs/decisions.md.",
        "",
    ]
    # A record belongs to the benchmark whose name its own starts with (fit_speed_classify.KIND: fit_speed).
    owner = {
        n: next((b for b in BENCHMARKS if n.split(".")[0] == b or n.startswith(f"{b}_")), n.split(".")[0])
        for n in records
    }
    for name in list(BENCHMARKS) + sorted(set(owner.values()) - set(BENCHMARKS)):
        mine = [n for n in records if owner[n] == name]
        if name in BENCHMARKS:
            lines += [
                f"## {name}",
                "",
                _what(name),
                "",
                f"Run: `python benchmarks/run.py {name}` (options: `--help`).",
                "",
            ]
        else:  # a record kept for a figure the README cites, from a script since retired
            lines += [
                f"## {name}",
                "",
                'From a script retired from the suite (docs/decisions.md, "One benchmark '
                'harness"; the script is in git history); the record stays for the figure it backs.',
                "",
            ]
        if not mine:
            lines += ["No record yet.", ""]
        for n in sorted(mine):
            record = records[n]
            lines += [
                f"### [`{n}.json`](../benchmarks/results/{n}.json)",
                "",
                f"Command `{record.get('command', '?')}`; date {str(record.get('date', '?'))[:10]}.",
                "",
                f"Host: `{_host(record)}`.",
                "",
                *_table(record),
                "",
            ]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def report(argv):
    parser = argparse.ArgumentParser(prog="run.py report", description="docs/benchmarks.md from the records")
    parser.add_argument("--results", default=common.RESULTS)
    parser.add_argument("--out", default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs from what would be written")
    args = parser.parse_args(argv)
    text = markdown(load_records(args.results))
    if text.count("\n") > MAX_DOC_LINES:
        raise SystemExit(f"the report has {text.count(chr(10))} lines, over {MAX_DOC_LINES}: shorten the records' rows")
    if args.check:
        current = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
        if current != text:
            raise SystemExit(f"{args.out} is not what `python benchmarks/run.py report` writes: run it")
        return print(f"{args.out} is up to date")
    tmp = f"{args.out}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    print(f"{args.out}: {text.count(chr(10))} lines from {args.results}")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(__doc__ if not argv or argv[0] != "list" else "")
        for name, what in BENCHMARKS.items():
            print(f"  {name:16} {what}")
        return
    name, rest = argv[0], argv[1:]
    if name == "report":
        return report(rest)
    if name == "cli_startup":
        return cli_startup(rest)
    if name == "host-kind":  # `--cpuinfo FILE`: another host's /proc/cpuinfo
        cpuinfo = None
        if rest[:1] == ["--cpuinfo"]:
            with open(rest[1], encoding="utf-8") as f:
                cpuinfo = f.read()
        return print(
            f"{common.host_kind(cpuinfo)} (bf16 hardware: {', '.join(common.bf16_hardware(cpuinfo)) or 'none'})"
        )
    if name not in BENCHMARKS:
        raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}, report")
    return importlib.import_module(f"suite.{name}").main(rest)


if __name__ == "__main__":
    main()
