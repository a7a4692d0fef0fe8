"""Every timing script records its run (`--json`) and reports it (`--report`).

Nothing is timed: each script's timing function is replaced by a fake that returns known
seconds (or the fits run on tiny data), and the test checks the rows the script recorded
from them, and that `--report` of the JSON prints its Markdown (`benchmarks/_results.py`).
"""

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name):
    """The script `benchmarks/<name>.py` as a module (it imports its neighbours)."""
    sys.path.insert(0, str(_DIR))
    try:
        spec = importlib.util.spec_from_file_location(f"recorded_{name}", _DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(_DIR))
    return module


def rows(path, table):
    return json.loads(Path(path).read_text())["tables"][table]["rows"]


def reports(module, path, capsys):
    """`--report path` prints the run's Markdown, naming its JSON and its command."""
    capsys.readouterr()
    module.main(["--report", str(path)])
    out = capsys.readouterr().out
    report = json.loads(Path(path).read_text())
    assert out.startswith("Run of ") and report["command"] in out
    return out


def constant_times(value):
    """A fake `interleaved`: every call took `value` seconds."""

    def interleaved(functions, rounds, repeats=1, **kwargs):
        return {name: np.full((rounds, repeats), value) for name in functions}

    return interleaved


def test_selu(tmp_path, monkeypatch, capsys):
    selu = load("bench_selu")
    monkeypatch.setattr(selu, "interleaved", constant_times(0.002))
    path = tmp_path / "selu.json"
    selu.main(1, 1, selu.Recorder(selu.SCRIPT, ["--json", str(path)], path))
    recorded = rows(path, "cases")
    assert [r[:2] for r in recorded[:2]] == [["SELU (0, 1)", "off"], ["SELU (0, 1)", "on"]]
    assert len(recorded) == 8 and all(r[2:] == [2.0, 2.0, 1.0] for r in recorded)
    report = json.loads(path.read_text())
    assert report["command"].endswith("python benchmarks/bench_selu.py")


def test_qrn(tmp_path, monkeypatch, capsys):
    qrn = load("bench_qrn")
    fake = {"parallel": 0.001, "sequential": 0.006, "gru": 0.004, "bidirectional": 0.002}
    fake.update({"bidirectional-shared": 0.0016, "bigru": 0.01})
    monkeypatch.setattr(qrn, "seconds_per_step", lambda kinds, *a: {k: fake[k] for k in kinds})
    monkeypatch.setattr(qrn, "peak_memory_in_a_fresh_process", lambda steps: 2**20 * steps)
    path = tmp_path / "qrn.json"
    qrn.main(["--rounds", "1", "--json", str(path)])
    assert rows(path, "times")[:3] == [
        [200, "parallel", 1.0],
        [200, "sequential", 6.0],
        [200, "gru", 4.0],
    ]
    ratios = {(r[0], r[1]): r[2] for r in rows(path, "ratios")}
    assert ratios["parallel / GRU", 200] == pytest.approx(0.25)
    assert ratios["sequential / parallel", 200] == pytest.approx(6.0)
    assert ratios["reset gate per direction / shared", 200] == pytest.approx(1.25)
    activations = qrn.BATCH * qrn.UNITS * 4
    assert rows(path, "memory")[0] == [1000, 1000.0, pytest.approx(2**20 / activations)]
    assert "| parallel / GRU | 200 | 0.250 | ≤ 0.4 |" in reports(qrn, path, capsys)


def test_callbacks(tmp_path, monkeypatch, capsys):
    callbacks = load("bench_callbacks")
    epochs = {"baseline": 0.1, "ours": 0.102, "baseline + ActivationStatistics": 0.11}
    epochs["baseline + GradientStatistics"] = 0.2

    def interleaved(functions, rounds, warmup, order, results):
        for name in functions:
            results[name] = [([epochs[name]] * 2, 0.001)] * rounds

    monkeypatch.setattr(callbacks, "interleaved", interleaved)
    path = tmp_path / "callbacks.json"
    callbacks.main(["--rounds", "2", "--epochs", "3", "--json", str(path)])
    recorded = {r[0]: r[1:] for r in rows(path, "epochs")}
    assert recorded["baseline"] == [0.1, 1.0, 0.1, 1.0, None]
    assert recorded["ours"] == pytest.approx([0.102, 1.02, 0.102, 1.02, 1.0])
    notes = json.loads(path.read_text())["notes"]
    assert notes[0].endswith("1.020, target <= 1.03: met")
    assert notes[1].endswith("2.000, target <= 1.03: NOT met")


def test_parseval(tmp_path, monkeypatch, capsys):
    parseval = load("bench_parseval")
    per_step = {name: (0.01 * (1 + i), 0.02) for i, name in enumerate(parseval.MLP_CONFIGS)}

    def interleaved(functions, rounds, warmup, results):
        for name in functions:
            results[name] = [per_step[name]] * rounds

    monkeypatch.setattr(parseval, "interleaved", interleaved)
    path = tmp_path / "parseval.json"
    parseval.main(["--steps", "2", "--repeats", "1", "--json", str(path)])
    recorded = rows(path, "steps")
    assert [r[0] for r in recorded] == list(parseval.MLP_CONFIGS)
    assert recorded[1][1:] == pytest.approx([20.0, 2.0, 20.0, 1.0])
    notes = json.loads(path.read_text())["notes"]
    assert "predicted ratio" in notes[-1] and "measured wall 2.00x" in notes[-1]


def test_normalization(tmp_path, monkeypatch, capsys):
    normalization = load("bench_normalization")
    monkeypatch.setattr(normalization, "rnn_train_step", lambda cls, jit: None)
    monkeypatch.setattr(normalization, "compare", lambda *a: (0.03, 0.02, (1.4, 1.6)))
    monkeypatch.setattr(normalization, "loop_ops_per_step", lambda cls: (10, 20))
    path = tmp_path / "normalization.json"
    for section in ("rnn", "ops"):
        recorder = normalization.Recorder(normalization.SCRIPT, [], path)
        normalization.main(1, 1, section, 0, recorder)
        recorder.save()
        if section == "rnn":
            recorded = rows(path, "cases")
            assert len(recorded) == 4 and recorded[0][1:] == [
                "off",
                30.0,
                20.0,
                pytest.approx(1.5),
                "1.40–1.60",
            ]
    assert rows(path, "ops")[0] == ["LayerNormLSTM", 10, 20, 30]


def test_fast_weights(tmp_path, monkeypatch, capsys):
    fast_weights = load("bench_fast_weights")
    seconds = {"lstm": 0.01, "naive cell": 0.05, "matrix": 0.02, "memory": 0.015}

    def time_models(kinds, batch, steps, features, units, jit, rounds):
        return {kind: np.full((rounds, 1), seconds[kind]) for kind in kinds}

    monkeypatch.setattr(fast_weights, "time_models", time_models)
    monkeypatch.setattr(fast_weights, "training_auto", lambda units, steps, jit: "memory")
    path = tmp_path / "fast_weights.json"
    argv = ["--section", "grid", "--jit", "1", "--grid-units", "64", "--grid-steps", "32,64"]
    fast_weights.main([*argv, "--rounds", "6", "--json", str(path)])
    assert rows(path, "grid_jit1") == [
        [32, 64, 20.0, 15.0, 0.75, "memory", 1.0],
        [64, 64, 20.0, 15.0, 0.75, "memory", 1.0],
    ]
    report = json.loads(path.read_text())
    assert report["notes"] == [
        "jit_compile=True: worst auto / best on the grid 1.00 (target <= 1.10)"
    ]
    assert report["command"].endswith(
        "python benchmarks/bench_fast_weights.py " + " ".join(argv) + " --rounds 6"
    )
    path = tmp_path / "speed.json"
    fast_weights.main(
        ["--section", "speed", "--jit", "0", "--configs", "50x128", "--json", str(path)]
    )
    assert rows(path, "speed_jit0") == [
        [50, 128, 10.0, 50.0, 20.0, 15.0, "memory", 1.5, pytest.approx(10 / 3)]
    ]


def test_recurrent_cases(tmp_path, monkeypatch, capsys):
    cases = load("bench_recurrent_cases")
    monkeypatch.setattr(cases, "calls", lambda *a: {"train": None, "predict": None})
    monkeypatch.setattr(
        cases, "measure", lambda fns, *a: {"ours": (0.02, 0.02), "lstm": (0.01, 0.01)}
    )
    first = ({"ours": (20.4, 20.4), "lstm": (1.2, 1.2)}, {"ours": 0.4, "lstm": 0.2})
    monkeypatch.setattr(cases, "first_epoch", lambda *a: first)
    path = tmp_path / "cases.json"
    argv = ["--layers", "fast_weights", "--configs", "50x128", "--batches", "32"]
    argv += ["--contexts", "layer", "--jit", "0", "--calls", "train,first", "--first-batches", "4"]
    cases.main([*argv, "--json", str(path)])
    train, first_row = rows(path, "calls")
    case = ["fast_weights", 50, 128, 32, "layer", 0]
    assert train == [*case, "train", 20.0, 10.0, 2.0, 2.0, "≤ 2.2", "pass"]
    assert first_row[:7] == [*case, "first"] and first_row[11:] == ["≤ 3.0", "FAIL"]
    assert first_row[7:11] == pytest.approx([20400.0, 1200.0, 17.0, 17.0])
    # one-time 20.0 / 1.0 s; 100 / 50 ms a batch; within 3x from 340 batches
    split = [*case, "20.0 / 1.0", "100.0 / 50.0", "≤ 3.0", "340 batches"]
    assert rows(path, "first_epoch_split") == [split]
    out = reports(cases, path, capsys)
    assert "| fast_weights | 50 | 128 | 32 | layer | 0 | train | 20.0 | 10.0 | 2.00 | 2.00 |" in out


def test_calibration(tmp_path, monkeypatch, capsys):
    calibration = load("bench_calibration")
    path = tmp_path / "calibration.json"
    recorder = calibration.Recorder(calibration.SCRIPT, [], path)
    calibration.bench_fit_temperature(recorder, n=500)
    ours, theirs, reference = rows(path, "temperature")
    assert ours[3] == pytest.approx(reference[3], rel=1e-5)  # the same T
    assert reference[1:3] == [None, None]
    child = "500000 2.5 35.7 777 848 2.4987"
    fake = types.SimpleNamespace(stdout=f"noise\n{child}\n")
    monkeypatch.setattr(calibration.subprocess, "run", lambda *a, **k: fake)
    calibration.bench_memory(recorder)
    assert rows(path, "memory")[0] == [
        500000,
        pytest.approx(190.7, abs=0.1),
        2.5,
        35.7,
        777.0,
        848.0,
        2.4987,
    ]
    calibration.bench_nonparametric(recorder, n=2000)
    fits = rows(path, "nonparametric")
    assert [f[3] for f in fits[1:]] == ["NumPy (a mask per bin)", "sklearn calibration_curve"] * 2
    assert fits[0][0].startswith("fit_isotonic_calibration (")
    assert fits[0][3].startswith("IsotonicRegression.fit (")
    assert max(f[-1] for f in fits) < 1e-9  # the fitted maps agree
