"""benchmarks/accelerator.py: `--quick` runs on a CPU and writes a whole JSON.

The timings of `--quick` (tiny sizes, one round) mean nothing; what is checked is that every
pair runs on the current backend, in its own subprocess, and that the JSON has its schema.
"""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

import keras_normkit

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
_spec = importlib.util.spec_from_file_location("accelerator", _DIR / "accelerator.py")
accelerator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accelerator)

CASE_KEYS = {"pair", "ours", "theirs", "batch", "steps", "units", "call", "skipped"}
TIMED_KEYS = {"ours_s", "theirs_s", "ratio", "ratio_min", "jit_compile"}


def test_the_full_grid():
    """B 64 and 256; T 50 and 200 for the RNN pairs, 200 and 1000 for QRN; the shorter
    sequences of every pair first."""
    planned = accelerator.cases(False, list(accelerator.PAIRS))
    assert len(planned) == len(set(planned)) == 4 * 2 * 2
    for pair, (_, _, units, lengths) in accelerator.PAIRS.items():
        expected = {(pair, b, t, units) for b in (64, 256) for t in lengths}
        assert {case for case in planned if case[0] == pair} == expected
    assert accelerator.PAIRS["qrn_gru"][3] == (200, 1000)
    assert all(accelerator.PAIRS[p][3] == (50, 200) for p in accelerator.PAIRS if p != "qrn_gru")
    assert [pair for pair, *_ in planned[:4]] == list(accelerator.PAIRS)
    half = len(planned) // 2
    assert all(t == accelerator.PAIRS[pair][3][0] for pair, _, t, _ in planned[:half])
    assert all(t == accelerator.PAIRS[pair][3][1] for pair, _, t, _ in planned[half:])
    assert {a[:2] for a in accelerator.PAIRS.values()} == {
        ("LayerNormLSTM", "LSTM"),
        ("LayerNormGRU", "GRU"),
        ("FastWeightsRNN", "LSTM"),
        ("QRN", "GRU"),
    }


def test_cases_past_the_deadline_are_recorded_as_skipped(tmp_path):
    out = tmp_path / "part.json"
    backend = keras.backend.backend()
    accelerator.child(backend, True, ["qrn_gru", "fast_weights_lstm"], 0.0, out)
    part = json.loads(out.read_text())
    assert part["device"]["backend"] == backend
    assert [(c["pair"], c["call"], c["skipped"]) for c in part["cases"]] == [
        ("qrn_gru", "train", "time budget"),
        ("qrn_gru", "predict", "time budget"),
        ("fast_weights_lstm", "train", "time budget"),
        ("fast_weights_lstm", "predict", "time budget"),
    ]


def test_unknown_pairs_and_backends_are_refused(capsys):
    for argv in (["--pairs", "qrn_lstm"], ["--backends", "mxnet"]):
        with pytest.raises(SystemExit):
            accelerator.main(argv)
        assert "unknown" in capsys.readouterr().err


def test_quick_run_of_the_current_backend_writes_the_schema(tmp_path):
    backend = keras.backend.backend()
    path = tmp_path / "quick.json"
    env = {**os.environ, "KERAS_BACKEND": backend}
    command = [sys.executable, str(_DIR / "accelerator.py"), "--quick", "--backends", backend]
    result = subprocess.run(
        [*command, "--json", str(path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(path.read_text())
    assert report["schema"] == accelerator.SCHEMA == 1
    assert report["script"] == "benchmarks/accelerator.py" and report["quick"] is True
    assert set(report) == {
        "schema",
        "script",
        "command",
        "quick",
        "started_utc",
        "settings",
        "backends",
        "wall_s",
    }
    # The command re-runs it, without the output file; the script sets each process's backend.
    assert report["command"].endswith(
        f"python benchmarks/accelerator.py --quick --backends {backend}"
    )
    assert "KERAS_BACKEND" not in report["command"] and "--json" not in report["command"]
    assert report["settings"]["rounds"] >= 1 and report["settings"]["max_minutes"] > 0
    assert list(report["backends"]) == [backend]
    part = report["backends"][backend]
    assert part["ok"] is True and part["error"] is None, part["error"]
    assert part["keras"] == keras.__version__
    assert part["keras_normkit"] == keras_normkit.__version__
    assert part["device"]["backend"] == backend and part["device"]["devices"]
    planned = report["settings"]["cases"]
    assert len(planned) == len(accelerator.PAIRS)  # one tiny case per pair
    assert len(part["cases"]) == 2 * len(planned)  # train and predict
    for case in part["cases"]:
        assert set(case) == CASE_KEYS | TIMED_KEYS, case
        assert case["skipped"] is None, case["skipped"]
        assert case["call"] in ("train", "predict")
        for key in ("ours_s", "theirs_s", "ratio", "ratio_min"):
            assert math.isfinite(case[key]) and case[key] > 0, (key, case)
        assert case["ratio"] == pytest.approx(case["ours_s"] / case["theirs_s"])
    assert {c["pair"] for c in part["cases"]} == set(accelerator.PAIRS)


def test_a_failed_backend_process_leaves_its_cases_marked_not_reached():
    args = argparse.Namespace(quick=True, jit_compile="auto")
    part = accelerator.run_backend("no_such_backend", args, ["qrn_gru"], 60)
    assert part["ok"] is False and part["error"].startswith("exit ")
    assert part["device"] is None
    assert [(c["pair"], c["call"]) for c in part["cases"]] == [
        ("qrn_gru", "train"),
        ("qrn_gru", "predict"),
    ]
    assert all(c["skipped"].startswith("not reached: exit ") for c in part["cases"])


def test_the_readme_table_is_the_recorded_run():
    """benchmarks/README.md's accelerator table is `markdown_table` of the committed JSON."""
    recorded = _DIR / "results" / "accelerator_h200_2026-12-04.json"
    report = json.loads(recorded.read_text())
    assert not report["quick"]
    assert {b: part["ok"] for b, part in report["backends"].items()} == {
        "jax": True,
        "torch": True,
    }
    readme = (_DIR / "README.md").read_text()
    table = readme.split("<!-- accelerator-table -->\n")[1].split("\n<!-- /accelerator-table -->")[
        0
    ]
    assert table == accelerator.markdown_table(report)
    # One row per planned case and call, each with both backends' figures.
    assert table.count("\n") - 1 == 2 * len(report["settings"]["cases"]) == 32
    assert "not run" not in table


def test_markdown_table_marks_cases_not_reached():
    report = {
        "settings": {"cases": [{"pair": "qrn_gru", "batch": 4, "steps": 10, "units": 8}]},
        "backends": {
            "jax": {
                "cases": [
                    {"pair": "qrn_gru", "call": "train", "batch": 4, "steps": 10,
                     "skipped": None, "ours_s": 0.002, "theirs_s": 0.004, "ratio": 0.5},
                    {"pair": "qrn_gru", "call": "predict", "batch": 4, "steps": 10,
                     "skipped": "time budget"},
                ]
            }
        },
    }  # fmt: skip
    lines = accelerator.markdown_table(report).splitlines()
    assert lines[2] == "| QRN / GRU | train | 4 | 10 | 2.0 / 4.0 | 0.50 |"
    assert lines[3] == "| QRN / GRU | predict | 4 | 10 | not run | |"


def test_jit_compile_reaches_both_models(tmp_path, monkeypatch):
    """`--jit-compile true` compiles ours and Keras's model of a pair (recorded per case)."""
    monkeypatch.syspath_prepend(str(_DIR))  # `_timing`, as the child process has it
    out = tmp_path / "part.json"
    backend = keras.backend.backend()
    # On PyTorch, True means torch.compile: minutes on a CPU, so the flag is checked with False.
    jit = backend != "torch"
    accelerator.child(backend, True, ["qrn_gru"], math.inf, out, jit)
    cases = json.loads(out.read_text())["cases"]
    assert [(c["call"], c["skipped"], c["jit_compile"]) for c in cases] == [
        ("train", None, jit),
        ("predict", None, jit),
    ]
