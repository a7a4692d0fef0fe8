"""fit_temperature against scikit-learn and theory (`calibration/scaling/temperature.py`)."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.calibration import _TemperatureScaling

from keras_normkit.calibration import (
    TemperatureScalingMap,
    expected_calibration_error,
    fit_temperature,
    negative_log_likelihood,
)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def calibrated_draw(seed, n, k, scale=2.0):
    """Random logits z and labels drawn from softmax(z): z is perfectly calibrated."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale
    y = (softmax(z).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def sklearn_temperature(logits, labels):
    return 1.0 / float(_TemperatureScaling().fit(np.asarray(logits, np.float64), labels).beta_)


def _matches_sklearn_on_overconfident_logits():
    for seed, (n, k, factor) in enumerate([(2000, 10, 2.5), (500, 3, 4.0), (3000, 100, 1.7)]):
        z, y = calibrated_draw(seed, n, k)
        for logits in (factor * z, (factor * z).astype(np.float32)):
            t_ours, t_sklearn = (
                fit_temperature(logits, y).temperature,
                sklearn_temperature(logits, y),
            )
            assert t_ours == pytest.approx(t_sklearn, rel=1e-4), (n, k, logits.dtype)


def _matches_sklearn_under_confident_and_binary():
    z, y = calibrated_draw(7, 2000, 5)
    assert fit_temperature(0.3 * z, y).temperature == pytest.approx(
        sklearn_temperature(0.3 * z, y), rel=1e-4
    )
    assert fit_temperature(0.3 * z, y).temperature < 1
    # Binary: one logit, sigmoid(z / T) = softmax((0, z) / T)[1].
    rng = np.random.default_rng(3)
    logit = rng.normal(size=3000) * 2
    label = (rng.random(3000) < 1 / (1 + np.exp(-logit))).astype(int)
    two_columns = np.stack([np.zeros_like(logit), 3 * logit], axis=1)
    expected = sklearn_temperature(two_columns, label)
    assert fit_temperature(3 * logit, label).temperature == pytest.approx(expected, rel=1e-4)
    assert fit_temperature((3 * logit)[:, None], label[:, None]).temperature == pytest.approx(
        expected, rel=1e-4
    )
    assert expected == pytest.approx(3.0, rel=0.1)


def test_recovers_known_miscalibration_and_cuts_ece():
    z, y = calibrated_draw(0, 20_000, 10)
    temperature = fit_temperature(2.5 * z, y).temperature
    assert temperature == pytest.approx(2.5, rel=0.02)
    z_test, y_test = calibrated_draw(1, 20_000, 10)
    before = expected_calibration_error(softmax(2.5 * z_test), y_test)
    after = expected_calibration_error(softmax(2.5 * z_test / temperature), y_test)
    assert after <= 0.2 * before, (before, after)


@given(seed=st.integers(0, 10_000), factor=st.floats(0.2, 5.0), shift=st.floats(-50, 50))
def test_temperature_is_the_nll_minimizer_and_equivariant(seed, factor, shift):
    z, y = calibrated_draw(seed, 400, 4)
    logits = factor * z
    t = fit_temperature(logits, y).temperature
    nll = negative_log_likelihood(logits / t, y, from_logits=True)
    for ratio in (0.99, 1.01):
        assert negative_log_likelihood(logits / (t * ratio), y, from_logits=True) > nll
    # Scaling the logits by c scales T by c; adding a constant to a row changes nothing.
    assert fit_temperature(3.0 * logits, y).temperature == pytest.approx(3.0 * t, rel=1e-6)
    row_shift = shift * np.random.default_rng(seed).random((len(z), 1))
    assert fit_temperature(logits + row_shift, y).temperature == pytest.approx(t, rel=1e-6)


def test_memmap_and_one_hot_inputs_give_the_same_temperature(tmp_path):
    z, y = calibrated_draw(5, 3000, 7)
    logits = (2.0 * z).astype(np.float32)
    path = tmp_path / "logits.f32"
    logits.tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=logits.shape)
    expected = fit_temperature(logits, y).temperature
    assert fit_temperature(mapped, y).temperature == pytest.approx(expected, rel=1e-6)
    # A slice of a memmap (read through the mapping, not from the file) agrees too.
    assert fit_temperature(mapped[100:], y[100:]).temperature == pytest.approx(
        fit_temperature(logits[100:], y[100:]).temperature, rel=1e-6
    )
    assert fit_temperature(logits, np.eye(7)[y]).temperature == pytest.approx(expected, rel=1e-12)


def _no_finite_optimum_raises():
    z = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]])
    with pytest.raises(ValueError, match="T -> 0"):
        fit_temperature(z, [0, 1, 0])  # every label has the largest logit
    with pytest.raises(ValueError, match="T -> infinity"):
        fit_temperature(z, [1, 0, 1])  # logits anti-correlated with the labels
    with pytest.raises(ValueError, match="T -> infinity"):
        fit_temperature(np.zeros((4, 3)), [0, 1, 2, 0])  # constant logits carry nothing


def _probabilities_instead_of_logits_warn():
    z, y = calibrated_draw(0, 500, 4)
    with pytest.warns(UserWarning, match="look like probabilities"):
        fit_temperature(softmax(z), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_temperature(z, y)


def _one_class_labels_raise(functions):
    # The reported case: one-class labels gave an arbitrary temperature (not an error).
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 3))
    binary = rng.normal(size=200)
    one_hot = np.tile([0.0, 1.0, 0.0], (200, 1))
    cases = [(z, np.zeros(200, int), 0), (z, one_hot, 1), (binary, np.zeros(200, int), 0)]
    cases.append((binary, np.ones((200, 1), int), 1))
    for fn, method in functions:
        for logits, labels, label in cases:
            with pytest.raises(
                ValueError,
                match=rf"^{method} needs held-out examples of at least two classes\. Received "
                rf"200 labels, all of class {label}: .*stratified split",
            ):
                fn(logits, labels)
    with pytest.raises(ValueError, match="arbitrary"):
        fit_temperature(z, np.zeros(200, int))
    # Two classes present (the third absent) are still fitted.
    z, y = calibrated_draw(0, 2000, 3)
    assert fit_temperature(2 * z[y < 2], y[y < 2]).temperature > 1


def _bad_input_raises(functions):
    z, y = calibrated_draw(0, 50, 3)
    cases = [
        (np.where(np.eye(50, 3) > 0, np.nan, z), y, "finite"),
        (np.where(np.eye(50, 3) > 0, np.inf, z), y, "finite"),
        (z, np.full(50, 3), r"\[0, 2\]"),
        (z, y[:-1], "one entry per example"),
        (z, np.ones((50, 2)), "labels"),
        (np.zeros((0, 3)), np.zeros(0, int), "empty"),
        (np.zeros((5, 0)), np.zeros(5, int), "at least 1 column"),
        (z[:, :1], np.full(50, 2), r"\[0, 1\]"),  # binary logit, label 2
    ]
    for fn in functions:
        for logits, labels, match in cases:
            with pytest.raises(ValueError, match=match):
                fn(logits, labels)


def test_degenerate_and_bad_input():
    """The checks below, run in turn (each is a function of this module)."""
    _no_finite_optimum_raises()
    _one_class_labels_raise([(fit_temperature, "Temperature scaling")])
    _probabilities_instead_of_logits_warn()
    _bad_input_raises([fit_temperature])


def test_sklearn_agreement():
    """The checks below, run in turn (each is a function of this module)."""
    _matches_sklearn_on_overconfident_logits()
    _matches_sklearn_under_confident_and_binary()


def test_the_map_predicts_softmax_and_still_reads_as_the_old_float():
    """`fit_temperature` returns a `TemperatureScalingMap`; 0.1.0 code that used the float
    it returned keeps working for one release, each use with a `DeprecationWarning`."""
    z, y = calibrated_draw(2, 3000, 4)
    fitted = fit_temperature(2.0 * z, y)
    t = fitted.temperature
    assert isinstance(fitted, TemperatureScalingMap) and isinstance(t, float)
    np.testing.assert_allclose(fitted.predict(2.0 * z), softmax(2.0 * z / t), rtol=1e-12)
    # One binary logit: sigmoid(z / T), in the input's shape.
    logit = 3.0 * z[:, 0]
    label = (np.random.default_rng(0).random(len(z)) < 1 / (1 + np.exp(-z[:, 0]))).astype(int)
    binary = fit_temperature(logit, label)
    expected = 1 / (1 + np.exp(-logit / binary.temperature))
    np.testing.assert_allclose(binary.predict(logit), expected, rtol=1e-12)
    assert binary.predict(logit[:, None]).shape == (len(logit), 1)
    assert "temperature=" in repr(fitted)
    # The deprecated float: each use warns and gives what the float gave.
    legacy = [
        (lambda: float(fitted), t),
        (lambda: round(fitted, 3), round(t, 3)),
        (lambda: f"T = {fitted:.4f}", f"T = {t:.4f}"),
        (lambda: 1.0 / fitted, 1.0 / t),
        (lambda: fitted * 2.0, 2.0 * t),
        (lambda: fitted - 1.0, t - 1.0),
        (lambda: fitted > 0.5 * t, True),
    ]
    for use, expected in legacy:
        with pytest.warns(DeprecationWarning, match=r"\.temperature"):
            assert use() == expected
    with pytest.warns(DeprecationWarning, match="fit_temperature"):
        np.testing.assert_allclose(z / fitted, z / t, rtol=0)
    with pytest.warns(DeprecationWarning):
        assert fitted == pytest.approx(t)
    with warnings.catch_warnings():  # the map itself and its attribute do not warn
        warnings.simplefilter("error")
        assert fitted.temperature == t and bool(fitted)
