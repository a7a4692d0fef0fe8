"""Ensemble temperature scaling (`scaling/ensemble_temperature.py`) against a direct SciPy
minimization of the same objective and against the formula of Zhang et al. (2020)."""

import numpy as np
import pytest
from scipy.optimize import minimize

from keras_normkit.calibration import (
    EnsembleTemperatureScaling,
    EnsembleTemperatureScalingMap,
    fit_ensemble_temperature_scaling,
    fit_temperature,
)
from tests.calibration.wrapper_checks import check_wrapper, draw


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mixture(logits, temperature, weights):
    """w1 softmax(z / T) + w2 softmax(z) + w3 / k, written out."""
    k = logits.shape[1]
    return (
        weights[0] * softmax(logits / temperature)
        + weights[1] * softmax(logits)
        + weights[2] * np.full(logits.shape, 1.0 / k)
    )


def scipy_weights(logits, labels, temperature):
    """The MSE-optimal simplex weights by SLSQP (as the reference code does)."""
    one_hot = np.eye(logits.shape[1])[labels]

    def mse(w):
        return np.mean(np.sum((mixture(logits, temperature, w) - one_hot) ** 2, axis=1))

    result = minimize(
        mse,
        np.array([1.0, 0.0, 0.0]),
        method="SLSQP",
        bounds=[(0.0, 1.0)] * 3,
        constraints={"type": "eq", "fun": lambda w: np.sum(w) - 1.0},
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    return result.x, mse(result.x), mse


@pytest.mark.parametrize(
    "seed, factor, noise",
    [(0, 2.5, 0.0), (1, 3.0, 1.5), (2, 0.6, 0.0), (3, 1.0, 0.0), (4, 4.0, 3.0)],
)
def test_weights_match_a_direct_scipy_minimization(seed, factor, noise):
    x, y = draw(seed, 3000, 6, noise=noise)
    logits = factor * x.astype(np.float64)
    fitted = fit_ensemble_temperature_scaling(logits, y)
    assert fitted.temperature == pytest.approx(fit_temperature(logits, y).temperature, rel=1e-12)
    weights, best, mse = scipy_weights(logits, y, fitted.temperature)
    assert fitted.weights.min() >= 0 and fitted.weights.sum() == pytest.approx(1, abs=1e-12)
    # Same objective value (SLSQP converges to it); weights equal where the optimum is unique.
    assert mse(fitted.weights) <= best + 1e-10
    if abs(factor - 1.0) > 0.1:
        np.testing.assert_allclose(fitted.weights, weights, atol=2e-4)
    # The mixture is never worse than temperature scaling alone (w = (1, 0, 0)).
    assert mse(fitted.weights) <= mse(np.array([1.0, 0.0, 0.0])) + 1e-12
    np.testing.assert_allclose(
        fitted.predict(logits), mixture(logits, fitted.temperature, fitted.weights), atol=1e-12
    )


def test_noisy_labels_put_weight_on_the_uniform_component():
    # Labels replaced by uniform draws 30 % of the time: the best mixture keeps 30 % uniform.
    rng = np.random.default_rng(7)
    x, y = draw(7, 40_000, 5)
    noisy = np.where(rng.random(len(y)) < 0.3, rng.integers(0, 5, len(y)), y)
    fitted = fit_ensemble_temperature_scaling(x.astype(np.float64), noisy)
    assert fitted.weights[2] == pytest.approx(0.3, abs=0.05)
    # Accuracy is unchanged: the argmax of the mixture is the argmax of the logits.
    np.testing.assert_array_equal(fitted.predict(x).argmax(1), x.argmax(1))


def test_fixed_temperature_binary_logit_memmap_and_one_hot(tmp_path):
    x, y = draw(3, 2000, 1)
    logit = 3.0 * x[:, 0].astype(np.float64)
    fitted = fit_ensemble_temperature_scaling(logit, y)
    two_columns = np.stack([np.zeros_like(logit), logit], axis=1)
    weights, _, _ = scipy_weights(two_columns, y, fitted.temperature)
    np.testing.assert_allclose(fitted.weights, weights, atol=2e-4)
    expected = mixture(two_columns, fitted.temperature, fitted.weights)[:, 1]
    np.testing.assert_allclose(fitted.predict(logit), expected, atol=1e-12)
    assert fitted.predict(logit[:, None]).shape == (2000, 1)
    given = fit_ensemble_temperature_scaling(logit, y, temperature=2.0)
    assert given.temperature == 2.0
    np.testing.assert_allclose(given.weights, scipy_weights(two_columns, y, 2.0)[0], atol=2e-4)
    x, y = draw(4, 3000, 4)
    logits = (2.5 * x).astype(np.float32)
    path = tmp_path / "logits.f32"
    logits.tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=logits.shape)
    reference = fit_ensemble_temperature_scaling(logits, y)
    np.testing.assert_allclose(
        fit_ensemble_temperature_scaling(mapped, y).weights, reference.weights, atol=1e-12
    )
    np.testing.assert_allclose(
        fit_ensemble_temperature_scaling(logits, np.eye(4)[y]).weights,
        reference.weights,
        atol=1e-12,
    )
    assert "EnsembleTemperatureScalingMap(temperature=" in repr(reference)


def test_bad_input():
    x, y = draw(0, 200, 3)
    with pytest.raises(ValueError, match="at least two classes"):
        fit_ensemble_temperature_scaling(x, np.zeros(200, int))
    with pytest.raises(ValueError, match="finite"):
        fit_ensemble_temperature_scaling(np.where(np.eye(200, 3) > 0, np.nan, x), y)
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        fit_ensemble_temperature_scaling(x, np.full(200, 3))
    for temperature, error in ((0.0, ValueError), (-1.0, ValueError), ("2", TypeError)):
        with pytest.raises(error, match="temperature"):
            fit_ensemble_temperature_scaling(x, y, temperature=temperature)
    with pytest.raises(ValueError, match="shape"):
        EnsembleTemperatureScalingMap(1.0, [1.0, 0.0, 0.0]).predict(np.zeros((2, 2, 2)))


@pytest.mark.parametrize("k", [1, 4])
def test_wrapper_serves_the_fitted_map(k):
    def fitted_predict(logits, labels):
        return fit_ensemble_temperature_scaling(logits, labels).predict(logits)

    wrapper = check_wrapper(EnsembleTemperatureScaling, fitted_predict, k)
    fitted = wrapper.calibration_map_
    assert fitted.temperature > 1.5  # the classifier was over-confident by 2.5
