"""The quick start (what `make demo` runs) trains a deep SNN to >= 95 % on digits (slow)."""

import importlib.util
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


@pytest.mark.slow
def test_quickstart_end_to_end(tmp_path):
    spec = importlib.util.spec_from_file_location("quickstart", EXAMPLE)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    result = quickstart.main(out_dir=tmp_path)
    assert result["accuracy"] >= 0.95
    assert result["keras_gap"] < 1e-5 and result["served_gap"] < 1e-5
    assert (tmp_path / "deep_snn.keras").exists()
