"""`benchmarks/report.py` on fake records: the table rows, ratios in both directions, "not run",
unreadable files skipped, and a PNG written (no timings here: the figures are made up)."""

import json
import os
import sys

import pytest

from tests.helpers import REPO_ROOT

sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))
report = pytest.importorskip("report")
common = pytest.importorskip("common")


def _rows():
    return [
        {"what": "serving classify, batch 64", "unit": "sentences/s", "ours": 300.0, "peer": 120.0,
         "peer_name": "HF transformers", "higher_is_better": True},
        {"what": "serving classify, batch 1 p50", "unit": "ms", "ours": 5.0, "peer": 10.0,
         "peer_name": "HF transformers", "higher_is_better": False},
        {"what": "tagger F1", "unit": "F1", "ours": 0.8, "peer": None, "peer_name": "HF transformers",
         "higher_is_better": True, "command": "python benchmarks/conll.py --epochs 1", "note": "HF not run"},
    ]


def test_report_tables_ratios_and_missing_benchmarks(tmp_path):
    results = tmp_path / "results"
    path = common.write_result("serving", _rows(), command="python benchmarks/serving.py --rounds 3",
                               source="/tmp/bert_zoo_serving/serving.json", directory=str(results))
    (results / "broken.json").write_text("{not json")
    (results / "custom.json").write_text(json.dumps({"command": "python x.py", "rows": [
        {"what": "thing", "unit": "items/s", "ours": 1.0, "peer": 4.0, "peer_name": "KerasHub"}]}))
    out, chart = tmp_path / "REPORT.md", tmp_path / "report.png"
    report.main(["--results", str(results), "--out", str(out), "--chart", str(chart)])
    text = out.read_text(encoding="utf-8")
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
    assert f"{os.cpu_count()} cores" in text
    # Every known benchmark without a record says so, with its command; the broken file is skipped.
    for name, _, command in report.SUITE:
        if name != "serving":
            assert f"## {name}:" in text
            assert f"not run (`{command}`" in text
    assert "broken" not in text
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![ours/peer per row](report.png)" in text


def test_report_with_no_results_at_all(tmp_path):
    out = tmp_path / "REPORT.md"
    report.main(["--results", str(tmp_path / "none"), "--out", str(out), "--chart", str(tmp_path / "c.png")])
    text = out.read_text(encoding="utf-8")
    assert text.count("not run (") == len(report.SUITE)
    assert not (tmp_path / "c.png").exists() and "![" not in text


def test_rows_not_measured_side_by_side_and_per_configuration_records(tmp_path):
    results = tmp_path / "results"
    common.write_result("glue", [{"what": "sst2 speed", "unit": "examples/s", "ours": 60.0, "peer": 40.0,
                                  "peer_name": "HF", "higher_is_better": True, "side_by_side": False}],
                        command="python benchmarks/glue.py table", directory=str(results), commit="(per row)")
    common.write_result("backbone_speed_bert_base_uncased_512", [
        {"what": "train", "unit": "tokens/s", "ours": 2.0, "peer": 1.0, "peer_name": "KerasHub"}],
        command="python benchmarks/backbone_speed.py", directory=str(results), started="2026-11-30T10:00:00")
    out, chart = tmp_path / "REPORT.md", tmp_path / "report.png"
    report.main(["--results", str(results), "--out", str(out), "--chart", str(chart)])
    text = out.read_text(encoding="utf-8")
    assert "(1.50×, not side by side)" in text and "commit (per row)" in text
    assert "Recorded per configuration: backbone_speed_bert_base_uncased_512" in text
    assert "not run (`nice python benchmarks/backbone_speed.py`" not in text
    # Only the side-by-side row is charted; a record without a start time says so.
    assert [label for label, _ in report.chart_bars(report.load_records(str(results)))] == [
        "backbone_speed_bert_base_uncased_512: train"]
    assert "Run started ?" in text


def test_hf_train_runs_an_epoch_and_reports_floats():
    """The HF side's loop of conll.py / squad.py (common.hf_train) on a tiny torch model: it
    once crashed at every epoch end (`.item()` on the float `hf_step` returns)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = torch.nn.Linear(3, 1)

        def forward(self, x, y):
            return type("Out", (), {"loss": ((self.dense(x)[:, 0] - y) ** 2).mean()})()

    torch.manual_seed(0)
    loader = [{"x": torch.randn(4, 3), "y": torch.randn(4)} for _ in range(3)]
    recipe = dict(learning_rate=1e-2, weight_decay=0.01, adam_epsilon=1e-6, warmup_ratio=0.0, clip_norm=1.0)
    result = common.hf_train(Tiny(), loader, epochs=2, what="a tiny model", recipe=recipe, log_every=2)
    assert result["steps"] == 6 and isinstance(result["final_train_loss"], float)
    assert result["train_seconds"] > 0
