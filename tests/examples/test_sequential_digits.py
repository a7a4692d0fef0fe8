"""Pixel-by-pixel sequential digits: LayerNormLSTM reaches >= 85 % validation accuracy (slow)."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))


@pytest.mark.slow
def test_layer_norm_lstm_learns_sequential_digits():
    from sequential_digits import train

    _, history = train("ln_lstm", epochs=24, units=48, seed=0)
    best, last = max(history["val_accuracy"]), history["val_accuracy"][-1]
    assert last >= 0.85, f"final validation accuracy {last:.3f} (best {best:.3f})"
