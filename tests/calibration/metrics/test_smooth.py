"""The smooth ECE and its curve (`metrics/smooth.py`): against relplot and against a direct
computation of the definition."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from keras_normkit.calibration import smooth_calibration_curve, smooth_calibration_error
from tests.calibration.metrics.problems import random_problem, top_label
from tests.conftest import max_examples

relplot = pytest.importorskip("relplot")


# ---------------------------------------------------------------------------------------
# Smooth ECE against relplot and against a direct computation.
# ---------------------------------------------------------------------------------------


def reflected_kernel(t, f, sigma):
    """K(t, f) = sum over the images 2m +- f of the Gaussian density N(t; image, sigma^2)."""
    images = np.concatenate([2 * m + s * f for m in range(-2, 3) for s in (1, -1)])
    z = (t[:, None] - images[None, :]) / sigma
    gauss = np.exp(-0.5 * z**2) / (sigma * np.sqrt(2 * np.pi))
    return gauss.reshape(len(t), 10, len(f)).sum(1)


def direct_smooth_ece(f, y, sigma, points=4001):
    """integral_0^1 |(1/n) sum_i K(t, f_i) (y_i - f_i)| dt with the reflected Gaussian kernel
    summed over its images, on a fine grid of t (no binning of f)."""
    t = np.linspace(0, 1, points)
    h = np.abs(reflected_kernel(t, f, sigma) @ (y - f)) / len(f)
    return float(np.sum((h[1:] + h[:-1]) / 2) / (points - 1))


@pytest.mark.parametrize("seed,shift,n", [(0, 0.0, 200), (1, 0.1, 150)])
def test_smooth_ece_matches_a_direct_computation(seed, shift, n):
    p, y = random_problem(seed, n=n, k=4, shift=shift)
    f, correct = top_label(p, y)
    for sigma in (0.03, 0.5):
        expected = direct_smooth_ece(f, correct, sigma)
        assert smooth_calibration_error(p, y, bandwidth=sigma) == pytest.approx(expected, abs=2e-5)
    root = brentq(lambda s: direct_smooth_ece(f, correct, s) - s, 0.01, 1.0, xtol=1e-8)
    value, sigma = smooth_calibration_error(p, y, return_bandwidth=True)
    assert sigma == pytest.approx(root, abs=2e-5)
    assert value == pytest.approx(root, abs=2e-5)


@pytest.mark.parametrize("seed", range(4))
def test_smooth_ece_agrees_with_relplot(seed):
    rng = np.random.default_rng(seed)
    n = [300, 2000, 10_000, 800][seed]
    # Binary: a probability of class 1 and its labels, read top-label.
    p1 = rng.beta(2, 2, size=n)
    y = (rng.random(n) < np.clip(p1 + [0.0, 0.1, -0.05, 0.2][seed], 0, 1)).astype(int)
    f, correct = relplot.multiclass_logits_to_confidences(np.stack([1 - p1, p1], 1), y, probs=True)
    assert smooth_calibration_error(p1, y) == pytest.approx(relplot.smECE(f, correct), abs=1e-3)
    assert smooth_calibration_error(p1, y, bandwidth=0.05) == pytest.approx(
        relplot.smECE_sigma(f, correct, 0.05), abs=1e-3
    )
    # Multiclass top-label, from relplot's own conversion.
    p, labels = random_problem(seed, n=n, k=10, shift=[0.0, 0.2, 0.05, 0.4][seed])
    f, correct = relplot.multiclass_logits_to_confidences(p, labels, probs=True)
    assert smooth_calibration_error(p, labels) == pytest.approx(relplot.smECE(f, correct), abs=1e-3)


def test_smooth_ece_with_confidences_piled_at_one_matches_the_direct_computation():
    # Many confidences above 0.999: relplot's discretization is off by ~2e-3 on such inputs
    # (see the docstring); the computation still matches the definition.
    rng = np.random.default_rng(6)
    p1 = 1 / (1 + np.exp(-rng.normal(size=300) * 6))
    p = np.stack([1 - p1, p1], 1)
    y = (rng.random(300) < p1).astype(int)
    f, correct = top_label(p, y)
    assert np.mean(f > 0.999) > 0.05
    expected = direct_smooth_ece(f, correct, 0.05, points=8001)
    assert smooth_calibration_error(p, y, bandwidth=0.05) == pytest.approx(expected, abs=1e-6)


@settings(max_examples=max_examples(15), deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), n=st.integers(1, 200))
def test_smooth_ece_properties(seed, k, n):
    p, y = random_problem(seed, n=n, k=k)
    value, sigma = smooth_calibration_error(p, y, return_bandwidth=True)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(sigma, abs=1e-6) or (sigma == 1e-3 and value <= 1e-3)
    order = np.random.default_rng(seed).permutation(n)
    assert smooth_calibration_error(p[order], y[order]) == pytest.approx(value, abs=1e-12)
    # Smoothing more never increases it (a contraction in L1).
    assert (
        smooth_calibration_error(p, y, bandwidth=0.3)
        <= smooth_calibration_error(p, y, bandwidth=0.03) + 1e-12
    )


def test_smooth_ece_of_calibrated_predictions_shrinks_with_n():
    values = []
    for n in (500, 5000, 50_000):
        rng = np.random.default_rng(n)
        c = rng.uniform(0.5, 1.0, size=n)
        y = (rng.random(n) > c).astype(int)
        values.append(smooth_calibration_error(np.stack([c, 1 - c], 1), y))
    assert values[0] > values[1] > values[2]
    assert values[2] < 0.01


def test_smooth_curve_matches_the_kernel_regression_and_has_a_band():
    p, y = random_problem(3, n=500, k=3, shift=0.2)
    f, correct = top_label(p, y)
    curve = smooth_calibration_curve(p, y, bootstrap=40, seed=1)
    value, sigma = smooth_calibration_error(p, y, return_bandwidth=True)
    assert curve.bandwidth == pytest.approx(sigma)
    t = curve.confidence[::256]
    kernel = reflected_kernel(t, f, sigma)
    expected = t + kernel @ (correct - f) / kernel.sum(1)
    shown = curve.density[::256] > 0.05
    np.testing.assert_allclose(curve.accuracy[::256][shown], expected[shown], atol=1e-4)
    np.testing.assert_allclose(curve.density[::256], kernel.mean(1), atol=1e-4)
    # The smooth ECE is the density-weighted area between the curve and the diagonal.
    area = np.abs(curve.accuracy - curve.confidence) * curve.density
    assert np.trapezoid(area, curve.confidence) == pytest.approx(value, abs=1e-4)
    inside = curve.density > 0.5
    assert (curve.low[inside] <= curve.accuracy[inside] + 1e-9).mean() > 0.95
    assert (curve.high[inside] >= curve.accuracy[inside] - 1e-9).mean() > 0.95
    again = smooth_calibration_curve(p, y, bootstrap=40, seed=1)
    np.testing.assert_array_equal(again.low, curve.low)
    assert smooth_calibration_curve(p, y).low is None


def test_bad_arguments():
    p = np.array([[0.7, 0.3], [0.2, 0.8]])
    for call, error in [
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth=0.0), ValueError),
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth=1.5), ValueError),
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth="auto"), TypeError),
        (lambda: smooth_calibration_error(np.array([[2.0, -1.0]]), [0]), ValueError),
        (lambda: smooth_calibration_curve(p, [0, 1], bootstrap=-1), ValueError),
        (lambda: smooth_calibration_curve(p, [0, 1], confidence_level=1.0), ValueError),
    ]:
        with pytest.raises(error):
            call()
