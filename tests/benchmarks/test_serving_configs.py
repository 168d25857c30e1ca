"""`benchmarks/run.py serving` measures every configuration of both sides and picks each side's best
thread setting per figure, by the same rule for ours and HF. Run as a user runs it: `--plan`
(the configurations, nothing measured) and `--table` on a made-up run record (no timing here)."""

import json
import os
import subprocess
import sys

from tests.helpers import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "run.py")


def _serving(*args):
    done = subprocess.run([sys.executable, SCRIPT, "serving", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_configuration_of_both_sides_is_measured_in_alternating_order():
    plan = _serving("--plan", "--rounds", "2", "--threads", "2", "1", "--hf-threads", "2", "1").splitlines()
    assert plan == [
        "round 0: ours, 2 threads; ours, 1 thread; HF transformers, 2 threads; HF transformers, 1 thread",
        "round 1: HF transformers, 1 thread; HF transformers, 2 threads; ours, 1 thread; ours, 2 threads",
    ]
    # A setting given twice is one configuration, measured once per round.
    assert _serving("--plan", "--rounds", "1", "--threads", "1", "1", "--hf-threads", "2").splitlines() == [
        "round 0: ours, 1 thread; HF transformers, 2 threads"
    ]


def _run_record(figures):
    rounds = {
        name: [{"load_before": 1.0, "load_after": 2.0, "throughput": f["throughput"], "latencies": []}]
        for name, f in figures.items()
    }
    return {
        "command": "python benchmarks/run.py serving --tasks classify",
        "started": "2026-12-01T10:00:00+00:00",
        "commit": "abc1234",
        "batch_size": 64,
        "threads": [2, 1],
        "tf_inter_op": None,
        "tasks": {"classify": {"figures": figures, "rounds": rounds}},
    }


def test_each_side_gets_its_best_configuration_per_figure(tmp_path):
    figures = {
        "ours_2_threads": {"throughput": 470.0, "p50_ms": 7.3, "p99_ms": 10.9},
        "ours_1_threads": {"throughput": 272.0, "p50_ms": 6.2, "p99_ms": 11.5},
        "hf_2_threads": {"throughput": 149.0, "p50_ms": 7.7, "p99_ms": 11.5},
        "hf_1_threads": {"throughput": 87.0, "p50_ms": 10.5, "p99_ms": 9.0},
    }
    (tmp_path / "serving.json").write_text(json.dumps(_run_record(figures)))
    out = _serving("--table", "--out", str(tmp_path), "--results", str(tmp_path / "results"))
    # The table: ours 470 (2 threads) vs HF 149 (2 threads); p50 6.2 (ours, 1 thread) vs 7.7 (HF, 2 threads).
    assert "| classify | 470.0 | 149.0 | 3.15x | 6.2 / 10.9 | 7.7 / 9.0 | 1.24x |" in out
    (path,) = (tmp_path / "results").glob("serving.*.json")  # serving.HOSTKIND.json
    record = json.loads(path.read_text())
    rows = {row["what"].rpartition(", ")[2]: row for row in record["rows"]}
    assert set(rows) == {"batch 64", "batch 1 p50", "batch 1 p99"}
    assert (rows["batch 64"]["ours"], rows["batch 64"]["peer"]) == (470.0, 149.0)
    assert (rows["batch 1 p50"]["ours"], rows["batch 1 p50"]["peer"]) == (6.2, 7.7)
    assert (rows["batch 1 p99"]["ours"], rows["batch 1 p99"]["peer"]) == (10.9, 9.0)
    assert rows["batch 64"]["peer_name"] == "HF transformers, 2 threads (its best)"
    assert rows["batch 1 p99"]["peer_name"] == "HF transformers, 1 thread (its best)"
    assert "ours here 1 thread" in rows["batch 1 p50"]["note"] and "ours here 2 threads" in rows["batch 64"]["note"]
    # The run's thread settings are in the recorded command, so it reproduces the run.
    assert record["command"] == "python benchmarks/run.py serving --tasks classify --threads 2 1"
    assert record["run_load"] == [1.0, 2.0] and record["commit"] == "abc1234"
