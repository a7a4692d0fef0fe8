"""Debiased L2 CE, smooth ECE (against relplot), its curve, and the Brier score (scikit-learn)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from sklearn.metrics import brier_score_loss

from keras_normkit.calibration import (
    brier_score,
    debiased_calibration_error,
    smooth_calibration_curve,
    smooth_calibration_error,
)
from tests.conftest import max_examples

relplot = pytest.importorskip("relplot")


def random_problem(seed, n=500, k=5, sharpness=3.0, shift=0.0):
    """Softmax outputs and labels drawn from them, made overconfident by `shift`."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * sharpness
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = (1 - shift) * p + shift / k  # the labels follow a flatter distribution
    labels = (q.cumsum(1) > rng.random((n, 1))).argmax(1)
    return p, labels


def top_label(p, y):
    return p.max(1), (p.argmax(1) == y).astype(float)


# ---------------------------------------------------------------------------------------
# Debiased calibration error: the estimator written out with loops.
# ---------------------------------------------------------------------------------------


def reference_equal_mass_bins(confidence, num_bins):
    """Bins by rank (floor(M r / n)), a tie group at the rank of its first member."""
    n = len(confidence)
    index = np.empty(n, dtype=int)
    for i in range(n):
        rank = sum(1 for j in range(n) if confidence[j] < confidence[i])
        index[i] = rank * num_bins // n
    return index


def reference_debiased(confidence, correct, num_bins, index):
    total = 0.0
    for m in range(num_bins):
        members = [i for i in range(len(confidence)) if index[i] == m]
        if len(members) < 2:
            continue
        acc = np.mean(correct[members])
        conf = np.mean(confidence[members])
        unbiased = (acc - conf) ** 2 - acc * (1 - acc) / (len(members) - 1)
        total += len(members) / len(confidence) * unbiased
    return total


@settings(max_examples=max_examples(20), deadline=None)
@given(seed=st.integers(0, 10_000), num_bins=st.integers(1, 20), n=st.integers(5, 120))
def test_debiased_matches_loop_reference(seed, num_bins, n):
    p, y = random_problem(seed, n=n, k=3)
    if seed % 3 == 0:  # ties
        p = np.round(p * 4) / 4
        p /= p.sum(1, keepdims=True)
    confidence, correct = top_label(p, y)
    index = reference_equal_mass_bins(confidence, num_bins)
    expected = reference_debiased(confidence, correct, num_bins, index)
    got = debiased_calibration_error(p, y, num_bins=num_bins, squared=True)
    assert got == pytest.approx(expected, abs=1e-12)
    root = debiased_calibration_error(p, y, num_bins=num_bins)
    assert root == pytest.approx(np.sqrt(max(expected, 0.0)), abs=1e-12)
    # Class-wise (the package's "marginal" mode): per class, clipped, then averaged.
    per_class = []
    for k in range(3):
        column, hits = p[:, k], (y == k).astype(float)
        index = reference_equal_mass_bins(column, num_bins)
        per_class.append(reference_debiased(column, hits, num_bins, index))
    got = debiased_calibration_error(p, y, num_bins, classwise=True)
    assert got == pytest.approx(np.sqrt(np.mean(np.maximum(per_class, 0))), abs=1e-12)
    got = debiased_calibration_error(p, y, num_bins, classwise=True, squared=True)
    assert got == pytest.approx(np.mean(per_class), abs=1e-12)
    width_index = np.clip(np.ceil(confidence * num_bins).astype(int) - 1, 0, num_bins - 1)
    expected = reference_debiased(confidence, correct, num_bins, width_index)
    got = debiased_calibration_error(p, y, num_bins, binning="equal_width", squared=True)
    assert got == pytest.approx(expected, abs=1e-12)


def package_style_debiased(probs, labels, num_bins):
    """Kumar et al.'s `get_calibration_error(probs, labels, p=2, debias=True)` for continuous
    binary probabilities, written from its description: parts of ceil(n / M) sorted values,
    edges halfway between parts, bisect-left binning, bins of < 2 points ignored."""
    ordered = np.sort(probs)
    size = int(np.ceil(len(ordered) / num_bins))
    parts = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    edges = [(a[-1] + b[0]) / 2 for a, b in zip(parts[:-1], parts[1:], strict=True)] + [1.0]
    index = np.searchsorted(edges, probs, side="left")
    total = 0.0
    for m in range(len(edges)):
        members = index == m
        if members.sum() < 2:
            continue
        acc, conf = labels[members].mean(), probs[members].mean()
        total += members.mean() * ((conf - acc) ** 2 - acc * (1 - acc) / (members.sum() - 1))
    return np.sqrt(max(total, 0.0))


def test_debiased_equals_the_package_semantics_and_removes_the_bias():
    rng = np.random.default_rng(0)
    # Binary top-label inputs with distinct confidences and M | n: the two binnings agree.
    confidence = rng.uniform(0.5, 1.0, size=3000)
    for shift in (0.0, 0.08):
        correct = (rng.random(3000) < confidence - shift).astype(int)
        p = np.stack([confidence, 1 - confidence], 1)
        labels = 1 - correct
        expected = package_style_debiased(confidence, correct, 15)
        assert debiased_calibration_error(p, labels) == pytest.approx(expected, abs=1e-12)
    # Unbiasedness: over many calibrated samples the squared estimate averages to ~0 while
    # the plug-in (equal-mass, squared) stays clearly positive.
    debiased, plugin = [], []
    for seed in range(200):
        r = np.random.default_rng(seed)
        c = r.uniform(0.5, 1.0, size=300)
        y = (r.random(300) > c).astype(int)
        p = np.stack([c, 1 - c], 1)
        debiased.append(debiased_calibration_error(p, y, squared=True))
        index = np.argsort(np.argsort(c)) * 15 // 300  # no ties: rank r goes to floor(M r / n)
        gaps = [
            (index == m).mean() * ((y[index == m] == 0).mean() - c[index == m].mean()) ** 2
            for m in range(15)
        ]
        plugin.append(sum(gaps))
    assert abs(np.mean(debiased)) < 3 * np.std(debiased) / np.sqrt(200)
    assert np.mean(plugin) > 10 * abs(np.mean(debiased))


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


# ---------------------------------------------------------------------------------------
# Brier score against scikit-learn.
# ---------------------------------------------------------------------------------------


@given(seed=st.integers(0, 10_000), k=st.integers(2, 8))
def test_brier_matches_sklearn(seed, k):
    p, y = random_problem(seed, n=100, k=k)
    labels = np.arange(k)
    for scale in ("auto", True, False):
        expected = brier_score_loss(y, p, labels=labels, scale_by_half=scale)
        assert brier_score(p, y, scale_by_half=scale) == pytest.approx(expected, rel=1e-12)
    if k == 2:
        # A single probability of class 1 is the classic binary score, mean (p - y)^2.
        expected = brier_score_loss(y, p[:, 1])
        assert brier_score(p[:, 1], y) == pytest.approx(expected, rel=1e-12)
        assert expected == pytest.approx(np.mean((p[:, 1] - y) ** 2))
    # The definition written out.
    one_hot = np.eye(k)[y]
    assert brier_score(p, one_hot, scale_by_half=False) == pytest.approx(
        np.mean(np.sum((p - one_hot) ** 2, 1)), rel=1e-12
    )


def test_bad_arguments():
    p = np.array([[0.7, 0.3], [0.2, 0.8]])
    for call, error in [
        (lambda: debiased_calibration_error(p, [0, 1], num_bins=0), ValueError),
        (lambda: debiased_calibration_error(p, [0, 1], binning="quantile"), ValueError),
        (lambda: debiased_calibration_error(p, [0, 1], binning=1), TypeError),
        (lambda: debiased_calibration_error(p, [0, 1], squared=1), TypeError),
        (lambda: debiased_calibration_error(p, [0, 1], classwise=None), TypeError),
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth=0.0), ValueError),
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth=1.5), ValueError),
        (lambda: smooth_calibration_error(p, [0, 1], bandwidth="auto"), TypeError),
        (lambda: smooth_calibration_curve(p, [0, 1], bootstrap=-1), ValueError),
        (lambda: smooth_calibration_curve(p, [0, 1], confidence_level=1.0), ValueError),
        (lambda: brier_score(p, [0, 1], scale_by_half="yes"), ValueError),
        (lambda: brier_score(p, [0, 1], scale_by_half=None), TypeError),
        (lambda: brier_score(p, [0, 2]), ValueError),
        (lambda: smooth_calibration_error(np.array([[2.0, -1.0]]), [0]), ValueError),
    ]:
        with pytest.raises(error):
            call()
