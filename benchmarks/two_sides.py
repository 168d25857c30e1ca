"""What the quality benchmarks (conll, squad) share: their two sides, ours and HF's, run one after the other, each
in its own process (TensorFlow and PyTorch thread pools never mixed), then one `results.json` of the run. Standard
library only.
"""

import datetime
import os
import subprocess

from common import git_commit, now, read_json, self_cmd, uptime, write_json


def side_options(parser, root, seeded_dir):
    """The options of a quality benchmark whose two sides (ours, HF) run one after the other, each in its own
    process: `--only`, `--root`, `--seed` (results in `seeded_dir`), `--threads`, `--table`, `--no-record`."""
    parser.add_argument("--only", choices=("ours", "hf"), help="one side only (the other's JSON is kept)")
    parser.add_argument("--root", default=root)
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="both sides' seed (head initialisation, data order, "
        f"dropout); results go to ROOT/{seeded_dir} when N is not 0",
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="intra-op threads of each side (1: two runs share 2 cores)"
    )
    parser.add_argument("--table", action="store_true", help="print the table of a finished run and exit")
    parser.add_argument("--no-record", action="store_true", help="do not write benchmarks/results (smoke runs)")


def side_started(record):
    """When a side's run began: its `date` is written at the end, after training and scoring."""
    took = record.get("wall_seconds") or (
        record["train_seconds"] + record.get("dev_predict_seconds", 0) + record.get("tokenize_train_seconds", 0)
    )
    end = datetime.datetime.fromisoformat(record["date"])
    return (end - datetime.timedelta(seconds=took)).isoformat(timespec="seconds")


def run_both_sides(name, side_args, out, table, recipe, command):
    """Runs `python benchmarks/run.py NAME SIDE_ARGS --only SIDE` for ours then HF, each in a fresh process, prints
    `table()` (which returns the run's summary) and writes `OUT/results.json`: both sides' JSON, the summary, the
    `recipe`, the `command`, when and at which load and commit the run started and ended. Returns its path."""
    started, uptime_start, commit_start = now(), uptime(), git_commit()
    print(f"{started}: {uptime_start}", flush=True)
    for side in ("ours", "hf"):
        subprocess.run([*self_cmd(name), *side_args, "--only", side], check=True)
    summary = table()
    path = os.path.join(out, "results.json")
    write_json(
        path,
        {
            "ours": read_json(os.path.join(out, "ours.json")),
            "hf": read_json(os.path.join(out, "hf.json")),
            **(summary or {}),
            "recipe": recipe,
            "command": command,
            "started": started,
            "finished": now(),
            "uptime_start": uptime_start,
            "uptime_end": uptime(),
            "cpus": os.cpu_count(),
            "git_commit_start": commit_start,
            "git_commit_end": git_commit(),
        },
    )
    print(f"\nresults: {path}")
    return path
