"""Conformal regression: residual and CQR scores against their formulas, the coverage
guarantee over random splits, the Keras wrapper's intervals, save/load and errors."""

import keras
import numpy as np
import pytest

from keras_normkit.calibration import NotCalibratedError
from keras_normkit.uncertainty import (
    ConformalRegressor,
    average_interval_width,
    conformal_quantile,
    cqr_scores,
    interval_coverage,
    residual_scores,
)


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 1)).astype("float32")
    noise = (0.2 + np.abs(x[:, 0])) * rng.normal(size=n)  # heteroscedastic
    return x, (2 * x[:, 0] + noise).astype("float32")


def _point_model():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.layers[0].set_weights([np.array([[2.0]], "float32"), np.zeros(1, "float32")])
    return model


def _quantile_model():
    """(q_lo, q_hi) = 2x -/+ 1.64 * (0.2 + |x|): the true 5 % and 95 % quantiles."""
    inputs = keras.Input((1,))
    spread = keras.layers.Lambda(lambda t: 0.2 + keras.ops.abs(t))(inputs)
    center = keras.layers.Dense(
        1, use_bias=False, kernel_initializer=keras.initializers.Constant(2.0)
    )(inputs)
    outputs = keras.layers.Concatenate()([center - 1.645 * spread, center + 1.645 * spread])
    return keras.Model(inputs, outputs)


def test_scores_match_their_formulas():
    rng = np.random.default_rng(0)
    pred, y = rng.normal(size=50), rng.normal(size=50)
    np.testing.assert_allclose(residual_scores(pred[:, None], y), np.abs(y - pred))
    bands = np.sort(rng.normal(size=(50, 2)), axis=1)
    expected = [max(lo - t, t - hi) for (lo, hi), t in zip(bands, y, strict=True)]
    np.testing.assert_allclose(cqr_scores(bands, y), expected)
    intervals = np.stack([pred - 1, pred + 1], axis=1)
    assert interval_coverage(intervals, y) == np.mean(np.abs(y - pred) <= 1)
    assert average_interval_width(intervals) == pytest.approx(2.0)


@pytest.mark.parametrize("scores", ["residual", "cqr"])
def test_coverage_guarantee_over_splits(scores):
    x, y = _data()
    center = 2 * x[:, 0]
    spread = 0.2 + np.abs(x[:, 0])
    if scores == "residual":
        s = residual_scores(center, y)
    else:
        s = cqr_scores(np.stack([center - spread, center + spread], axis=1), y)
    rng = np.random.default_rng(1)
    coverages = []
    for _ in range(2000):
        order = rng.permutation(len(y))
        tau = conformal_quantile(s[order[:19]], 0.1)
        coverages.append(np.mean(s[order[19:]] <= tau))
    exact = 18 / 20  # ceil(20 * 0.9) / 20
    error = 3 * np.std(coverages) / np.sqrt(len(coverages))
    assert abs(np.mean(coverages) - exact) < error + 1e-3


def test_wrappers_intervals_and_widths():
    x, y = _data()
    residual = ConformalRegressor(_point_model(), "residual", alpha=0.1)
    residual.calibrate(x[:1000], y[:1000])
    tau = conformal_quantile(np.abs(y[:1000] - 2 * x[:1000, 0]), 0.1)
    assert residual.threshold_ == pytest.approx(tau, rel=1e-6)
    intervals = residual.predict(x[1000:], verbose=0)
    np.testing.assert_allclose(intervals[:, 0], 2 * x[1000:, 0] - tau, atol=1e-5)
    np.testing.assert_allclose(intervals[:, 1], 2 * x[1000:, 0] + tau, atol=1e-5)
    cqr = ConformalRegressor(_quantile_model(), "cqr", alpha=0.1).calibrate(x[:1000], y[:1000])
    bands = cqr.predict(x[1000:], verbose=0)
    for fitted in (intervals, bands):
        assert 0.86 <= interval_coverage(fitted, y[1000:]) <= 0.94
    # CQR adapts: narrower where the noise is small (|x| < 0.3)
    small = np.abs(x[1000:, 0]) < 0.3
    assert average_interval_width(bands[small]) < average_interval_width(intervals[small])


def test_save_load_and_errors(tmp_path):
    x, y = _data(300)
    wrapper = ConformalRegressor(_point_model(), alpha=0.2).calibrate(x, y)
    wrapper.save(tmp_path / "intervals.keras")
    loaded = keras.saving.load_model(tmp_path / "intervals.keras")
    assert loaded.is_calibrated and loaded.threshold_ == wrapper.threshold_
    np.testing.assert_allclose(loaded.predict(x[:5], verbose=0), wrapper.predict(x[:5], verbose=0))
    fresh = ConformalRegressor(_point_model())
    with pytest.raises(NotCalibratedError):
        fresh.predict(x, verbose=0)
    with pytest.raises(ValueError, match="method"):
        ConformalRegressor(_point_model(), method="quantile")
    with pytest.raises(ValueError, match="at least 9"):
        fresh.calibrate(x[:5], y[:5])
    with pytest.raises(ValueError, match=r"shape \(num_examples, 2\)"):
        cqr_scores(np.zeros((4, 3)), np.zeros(4))
    with pytest.raises(ValueError, match="targets"):
        residual_scores(np.zeros(4), np.zeros(3))
