"""benchmarks/bench_torch_recurrent.py: `--quick` runs every contender and writes a whole JSON;
the README's table is `markdown_table` of the committed JSON; the targets are computed from
the rows.

The timings and counts of `--quick` (T 6) mean nothing; the recorded run is in
`benchmarks/results/`.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "examples"))
from markdown_blocks import read_block  # noqa: E402

_DIR = _ROOT / "benchmarks"
_spec = importlib.util.spec_from_file_location("bench_torch", _DIR / "bench_torch_recurrent.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

RECORDED = _DIR / "results" / "torch_recurrent_cpu.json"
ROW_KEYS = {
    "model",
    "batch",
    "steps",
    "units",
    "train_ops_per_step",
    "predict_ops_per_step",
    "train_s",
    "predict_s",
    "train_ratio_keras",
    "predict_ratio_keras",
    "train_ratio_torch",
    "predict_ratio_torch",
}


def test_quick_run_writes_every_row(tmp_path):
    path = tmp_path / "quick.json"
    result = subprocess.run(
        [sys.executable, str(_DIR / "bench_torch_recurrent.py"), "--quick", "--json", str(path)],
        env={**os.environ, "KERAS_BACKEND": "torch"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(path.read_text())
    assert report["schema"] == bench.SCHEMA and report["quick"] is True
    assert report["settings"]["threads"] == 1
    assert [r["model"] for r in report["rows"]] == list(bench.MODELS)
    for row in report["rows"]:
        assert set(row) == ROW_KEYS
        assert row["train_ops_per_step"] > 0 and row["train_s"] > 0
    lstm = next(r for r in report["rows"] if r["model"] == "LayerNormLSTM")
    keras_lstm = next(r for r in report["rows"] if r["model"] == "LSTM")
    assert lstm["train_ratio_keras"] == pytest.approx(lstm["train_s"] / keras_lstm["train_s"])
    assert {(t["model"], t["quantity"]) for t in report["targets"]} == {
        (name, quantity) for name, quantity, _ in bench.TARGETS
    }


def test_targets_read_the_rows():
    rows = [
        {"model": "LayerNormLSTM", "steps": 50, "train_ops_per_step": 33.0},
        {"model": "LayerNormGRU", "steps": 50, "train_ops_per_step": 41.0},
    ]
    targets = bench.check_targets(rows)
    assert [(t["model"], t["met"]) for t in targets] == [
        ("LayerNormLSTM", True),
        ("LayerNormGRU", False),
    ]


def test_readme_table_is_the_recorded_run():
    readme = _DIR / "README.md"
    if not RECORDED.exists():  # no run recorded yet: no table
        assert read_block(readme, "torch-recurrent-table") == ""
        return
    report = json.loads(RECORDED.read_text())
    assert report["quick"] is False and report["settings"]["threads"] == 1
    assert read_block(readme, "torch-recurrent-table") == bench.markdown_table(report)
