"""The SNN benchmark scripts (`examples/snn_benchmarks/uci.py`, `htru2.py`, `snn_train.py`):
the protocol's pieces, `--quick` on small files written here, and (slow) `--quick` on the real
data when `NORMKIT_UCI121_DATA` / `NORMKIT_HTRU2_DATA` are set."""

import json
import os
import pathlib
import shlex
import sys

import keras
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from tests.examples.test_snn_data import write_set

BENCH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "snn_benchmarks"
sys.path.insert(0, str(BENCH))

import htru2  # noqa: E402
import snn_data  # noqa: E402
import snn_train  # noqa: E402
import tox21  # noqa: E402
import uci  # noqa: E402

sys.path.remove(str(BENCH))
sys.path.insert(0, str(BENCH.parent))
import result_commands  # noqa: E402

ROW_KEYS = {
    "dataset", "method", "n_examples", "layers", "units", "lr", "dropout", "optimizer", "epoch",
    "validation", "test", "validation_by_config", "wall_s", "seed", "command",
}  # fmt: skip


def test_ties_go_to_more_layers_then_lower_rate_then_more_dropout():
    configs = snn_train.configs(
        {"layers": (2, 8), "units": (4,), "lr": (0.1, 0.01), "dropout": (0.0, 0.05)}
    )
    assert len(configs) == 8
    best = max(configs, key=lambda c: snn_train.tie_key(0.5, c))
    assert (best.layers, best.lr, best.dropout) == (8, 0.01, 0.05)
    worse_but_deeper = snn_train.tie_key(0.49, configs[-1])
    assert snn_train.tie_key(0.5, configs[0]) > worse_but_deeper


def test_multitask_auc_is_the_mean_over_measured_labels():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(50, 3)).astype("float64")
    y[rng.random((50, 3)) < 0.3] = np.nan
    scores = rng.random((50, 3))
    expected = np.mean(
        [roc_auc_score(y[~np.isnan(y[:, k]), k], scores[~np.isnan(y[:, k]), k]) for k in range(3)]
    )
    assert snn_train.auc(y, scores) == pytest.approx(expected)
    assert snn_train.auc(np.array([0, 1, 1]), np.array([[0.1], [0.9], [0.8]])) == 1.0


def test_merge_rows_replaces_by_key_and_keeps_the_rest(tmp_path):
    path = tmp_path / "rows.json"
    snn_train.merge_rows(
        path, [{"dataset": "b", "method": "snn", "test": 1}], ("dataset", "method")
    )
    snn_train.merge_rows(
        path, [{"dataset": "a", "method": "snn", "test": 2}], ("dataset", "method")
    )
    rows = snn_train.merge_rows(
        path, [{"dataset": "b", "method": "snn", "test": 3}], ("dataset", "method")
    )
    assert rows == json.loads(path.read_text())
    assert [(r["dataset"], r["test"]) for r in rows] == [("a", 2), ("b", 3)]


def toy_uci(root):
    rng = np.random.default_rng(0)
    for name, n in (("blobs", 120), ("lines", 100)):
        y = np.arange(n) % 3
        x = rng.normal(size=(n, 4)) + y[:, None]
        order = rng.permutation(n)
        write_set(root, name, np.round(x, 4), y, order[: n // 2], order[n // 2 :])
    return root


def test_uci_quick_rows_are_deterministic_and_rerunnable(tmp_path, monkeypatch):
    root = toy_uci(tmp_path / "uci121")
    args = ["--data", str(root), "--quick", "--methods", "snn", "--json", str(tmp_path / "a.json")]
    rows = uci.main(args)
    assert [(r["dataset"], r["method"]) for r in rows] == [("blobs", "snn"), ("lines", "snn")]
    for row in rows:
        assert ROW_KEYS <= set(row) and 0 <= row["test"] <= 1 and row["layers"] == 4
    assert json.loads((tmp_path / "a.json").read_text()) == sorted(rows, key=lambda r: r["dataset"])
    assert uci.main(args) == []  # done rows are skipped
    # the row's command names its environment, then re-runs it: same numbers
    environment = result_commands.environment_of(rows[0]["command"])
    assert environment["KERAS_BACKEND"] == keras.backend.backend()
    assert environment.get("PYTHONHASHSEED") == os.environ.get("PYTHONHASHSEED")
    command = shlex.split(rows[0]["command"])[len(environment) :]
    assert command[:2] == ["python", "examples/snn_benchmarks/uci.py"]
    assert command[command.index("--data") + 1] == "$NORMKIT_UCI121_DATA"
    assert command[command.index("--json") + 1] == str(tmp_path / "a.json")
    command[command.index("--data") + 1] = str(root)
    again = uci.main(command[2:] + ["--json", str(tmp_path / "b.json")])
    assert len(again) == 1
    for key in ("test", "validation", "epoch", "layers"):
        assert again[0][key] == rows[0][key]


def test_a_rows_command_names_its_json_unless_the_default():
    assert uci.json_args(None) == [] and uci.json_args(uci.DEFAULT_JSON) == []
    inside = pathlib.Path(uci.DEFAULT_JSON).with_name("snn_uci_sgd.json")
    assert uci.json_args(str(inside)) == ["--json", "notebooks/data/snn_uci_sgd.json"]
    assert uci.json_args("/elsewhere/rows.json") == ["--json", "/elsewhere/rows.json"]


def test_htru2_quick_on_a_small_file(tmp_path):
    rng = np.random.default_rng(0)
    y = (np.arange(300) % 5 == 0).astype(int)
    x = rng.normal(size=(300, 8)) + 2.0 * y[:, None]
    text = "@relation HTRU\n" + "".join(f"@attribute f{j} real\n" for j in range(8))
    text += "@attribute class {0,1}\n@data\n"
    text += "".join(
        ",".join(f"{v:.4f}" for v in row) + f",{c}\n" for row, c in zip(x, y, strict=True)
    )
    (tmp_path / "HTRU_2.arff").write_text(text)
    rows = htru2.main(
        ["--data", str(tmp_path), "--quick", "--methods", "snn", "--batch-size", "16"]
    )
    assert len(rows) == 1 and rows[0]["fold"] == 0 and ROW_KEYS | {"fold"} <= set(rows[0])
    assert rows[0]["test"] > 0.8  # separable classes
    # the 10 folds are stratified and cover every example once
    splits = htru2.folds(y, 0)
    assert sorted(np.concatenate([test for _, test in splits]).tolist()) == list(range(300))
    assert all(y[test].sum() == 6 for _, test in splits)


@pytest.mark.slow
def test_quick_modes_on_the_real_data(tmp_path):
    ran = False
    if os.environ.get("NORMKIT_UCI121_DATA"):
        rows = uci.main(["--data", os.environ["NORMKIT_UCI121_DATA"], "--quick"])
        assert {r["dataset"] for r in rows} == set(uci.QUICK_SETS) and len(rows) == 14
        assert all(ROW_KEYS <= set(r) and 0 <= r["test"] <= 1 for r in rows)
        titanic = [r["test"] for r in rows if r["dataset"] == "titanic"]
        assert np.mean(titanic) > 0.6  # 3 epochs: most methods beat chance (0.5)
        ran = True
    if os.environ.get("NORMKIT_HTRU2_DATA"):
        rows = htru2.main(["--data", os.environ["NORMKIT_HTRU2_DATA"], "--quick"])
        assert len(rows) == 7 and np.median([r["test"] for r in rows]) > 0.9
        ran = True
    if not ran:
        pytest.skip("set NORMKIT_UCI121_DATA or NORMKIT_HTRU2_DATA to run on the real data")


def test_tox21_quick_on_a_small_file(tmp_path):
    pytest.importorskip("rdkit")
    import gzip

    rng = np.random.default_rng(0)
    chains = ["C" * k + "O" * j for k in range(1, 9) for j in range(0, 4)] + ["c1ccccc1"] * 8
    header = ",".join(snn_data.TOX21_TASKS) + ",mol_id,smiles\n"
    lines = []
    for i, smiles in enumerate(chains):
        labels = [
            ("" if rng.random() < 0.2 else str(int(smiles.count("O") > 1))) for _ in range(12)
        ]
        lines.append(",".join(labels) + f",T{i},{smiles}\n")
    (tmp_path / "tox21.csv.gz").write_bytes(gzip.compress((header + "".join(lines)).encode()))
    rows = tox21.main(["--data", str(tmp_path), "--quick", "--methods", "snn"])
    assert len(rows) == 1 and rows[0]["layers"] == 2 and rows[0]["n_examples"] == 40
    assert 0 <= rows[0]["test"] <= 1 and len(rows[0]["test_by_assay"]) == 12
    fit, val, test = tox21.split(40, 0)
    assert (len(fit), len(val), len(test)) == (32, 4, 4)
    assert sorted(np.concatenate([fit, val, test]).tolist()) == list(range(40))
