"""PinballLoss against NumPy, its minimizer is the quantile, and its config round trip."""

import keras
import numpy as np
import pytest

from keras_normkit.uncertainty import PinballLoss


def test_against_numpy():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(16,)).astype("float32")
    pred = rng.normal(size=(16, 3)).astype("float32")
    q = np.array([0.1, 0.5, 0.9])
    r = y[:, None] - pred
    expected = np.maximum(q * r, (q - 1) * r).mean(axis=1).mean()
    loss = PinballLoss(quantiles=(0.1, 0.5, 0.9))
    assert float(loss(y, pred)) == pytest.approx(expected, rel=1e-5)
    assert float(loss(y[:, None], pred)) == pytest.approx(expected, rel=1e-5)


def test_minimizer_is_the_quantile():
    y = np.random.default_rng(1).exponential(size=4000).astype("float32")
    grid = np.linspace(0, 4, 401, dtype="float32")
    loss = PinballLoss(quantiles=(0.9,), reduction="none")
    values = [
        float(np.mean(keras.ops.convert_to_numpy(loss(y, np.full((4000, 1), g)))))
        for g in grid[::10]
    ]
    best = grid[::10][int(np.argmin(values))]
    assert best == pytest.approx(np.quantile(y, 0.9), abs=0.1)


def test_config_and_errors():
    loss = PinballLoss(quantiles=(0.05, 0.95), name="q")
    again = PinballLoss.from_config(loss.get_config())
    assert again.quantiles == (0.05, 0.95) and again.name == "q"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(restored, PinballLoss)
    with pytest.raises(ValueError, match="quantiles"):
        PinballLoss(quantiles=(0.0, 0.5))
    with pytest.raises(TypeError, match="quantiles"):
        PinballLoss(quantiles="0.5")
