"""The debiased L2 calibration error (`metrics/debiased.py`) against the estimator written
out with loops and against the semantics of Kumar et al.'s `calibration` package."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.calibration import debiased_calibration_error
from tests.calibration.metrics.problems import random_problem, top_label
from tests.conftest import max_examples

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


def test_bad_arguments():
    p = np.array([[0.7, 0.3], [0.2, 0.8]])
    for call, error in [
        (lambda: debiased_calibration_error(p, [0, 1], num_bins=0), ValueError),
        (lambda: debiased_calibration_error(p, [0, 1], binning="quantile"), ValueError),
        (lambda: debiased_calibration_error(p, [0, 1], binning=1), TypeError),
        (lambda: debiased_calibration_error(p, [0, 1], squared=1), TypeError),
        (lambda: debiased_calibration_error(p, [0, 1], classwise=None), TypeError),
    ]:
        with pytest.raises(error):
            call()
