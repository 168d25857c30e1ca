"""`benchmarks/serving.py` picks each side's best thread setting per figure, by the same rule
for ours and HF (made-up figures; no timing here)."""

import os
import sys

import pytest

from tests.helpers import REPO_ROOT

sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))
serving = pytest.importorskip("serving")


def test_each_side_gets_its_best_configuration_per_figure():
    figures = {"ours_2_threads": {"throughput": 470.0, "p50_ms": 7.3, "p99_ms": 10.9},
               "ours_1_threads": {"throughput": 272.0, "p50_ms": 6.2, "p99_ms": 11.5},
               "hf_2_threads": {"throughput": 149.0, "p50_ms": 7.7, "p99_ms": 11.5},
               "hf_1_threads": {"throughput": 87.0, "p50_ms": 10.5, "p99_ms": 9.0}}
    ours = serving.best_of(figures, ["ours_2_threads", "ours_1_threads"])
    hf = serving.best_of(figures, ["hf_2_threads", "hf_1_threads"])
    assert (ours["throughput"], ours["p50_ms"], ours["p99_ms"]) == (470.0, 6.2, 10.9)
    assert ours["configs"] == {"throughput": "ours_2_threads", "p50_ms": "ours_1_threads",
                               "p99_ms": "ours_2_threads"}
    assert (hf["throughput"], hf["p50_ms"], hf["p99_ms"]) == (149.0, 7.7, 9.0)
    assert hf["configs"]["p99_ms"] == "hf_1_threads"


def test_every_configuration_of_both_sides_is_measured():
    args = serving.argparse.Namespace(threads=[2, 1], hf_threads=[2, 1])
    assert serving._sides(args) == [("ours_2_threads", "ours", 2), ("ours_1_threads", "ours", 1),
                                    ("hf_2_threads", "hf", 2), ("hf_1_threads", "hf", 1)]
    twice = serving.argparse.Namespace(threads=[1, 1], hf_threads=[2])
    assert serving._sides(twice) == [("ours_1_threads", "ours", 1), ("hf_2_threads", "hf", 2)]
    assert serving._config_name("ours_1_threads") == "ours, 1 thread"
    assert serving._config_name("hf_2_threads") == "HF transformers, 2 threads"
