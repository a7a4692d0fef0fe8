"""Risk-coverage curve and AURC (`metrics/selective.py`) against a direct loop (and exhaustive tie orders)."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.calibration import area_under_risk_coverage, risk_coverage_curve


def random_problem(seed, n, k=4, ties=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    if ties:
        p = np.round(p * 4) / 4
        p[:, 0] += 1 - p.sum(1)
        p = np.abs(p) / np.abs(p).sum(1, keepdims=True)
    return p, (p.cumsum(1) > rng.random((n, 1))).argmax(1)


def direct_aurc(errors_in_order):
    """(1/n) sum_j (errors among the first j) / j, for examples already ordered."""
    total, wrong = 0.0, 0
    for j, error in enumerate(errors_in_order, start=1):
        wrong += error
        total += wrong / j
    return total / len(errors_in_order)


@given(seed=st.integers(0, 10_000), n=st.integers(1, 200))
def test_no_ties_matches_a_direct_loop(seed, n):
    p, y = random_problem(seed, n)
    confidence = p.max(1) + np.random.default_rng(seed).normal(size=n) * 1e-9  # no ties
    errors = (p.argmax(1) != y).astype(int)
    order = np.argsort(-confidence)
    got = area_under_risk_coverage(p, y, confidence=confidence)
    assert got == pytest.approx(direct_aurc(errors[order]), abs=1e-12)
    curve = risk_coverage_curve(p, y, confidence=confidence)
    np.testing.assert_allclose(curve.coverage, np.arange(1, n + 1) / n)
    expected_risk = [errors[order][:j].mean() for j in range(1, n + 1)]
    np.testing.assert_allclose(curve.risk, expected_risk, atol=1e-12)
    np.testing.assert_array_equal(curve.thresholds, confidence[order])
    assert 0.0 <= got <= 1.0


@given(seed=st.integers(0, 10_000))
def test_ties_average_over_every_order_of_each_tie_group(seed):
    rng = np.random.default_rng(seed)
    confidence = rng.choice([0.9, 0.7, 0.5], size=7)
    errors = rng.integers(0, 2, size=7)
    p = np.stack([confidence, 1 - confidence], 1)
    y = errors  # the argmax is class 0, so label 1 is an error
    groups = [np.flatnonzero(confidence == c) for c in (0.9, 0.7, 0.5)]
    values = [
        direct_aurc(errors[np.concatenate([np.asarray(g, dtype=int) for g in perms])])
        for perms in itertools.product(*(itertools.permutations(g) for g in groups))
    ]
    assert area_under_risk_coverage(p, y) == pytest.approx(np.mean(values), abs=1e-12)
    # The curve has one point per distinct confidence, where a threshold can be placed.
    curve = risk_coverage_curve(p, y)
    present = [g for g in groups if len(g)]
    ends = np.cumsum([len(g) for g in present])
    np.testing.assert_allclose(curve.coverage, ends / 7)
    np.testing.assert_allclose(curve.risk, np.cumsum([errors[g].sum() for g in present]) / ends)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 100))
def test_permutation_invariance_and_extremes(seed, n):
    p, y = random_problem(seed, n, ties=True)
    value = area_under_risk_coverage(p, y)
    order = np.random.default_rng(seed + 1).permutation(n)
    assert area_under_risk_coverage(p[order], y[order]) == pytest.approx(value, abs=1e-12)
    error_rate = float(np.mean(p.argmax(1) != y))
    # A confidence that ranks every error last gives the smallest AURC, first the largest.
    errors = p.argmax(1) != y
    best = area_under_risk_coverage(p, y, confidence=~errors + np.arange(n) * 1e-6)
    worst = area_under_risk_coverage(p, y, confidence=errors + np.arange(n) * 1e-6)
    assert best - 1e-12 <= value <= worst + 1e-12
    assert best <= error_rate + 1e-12 <= worst + 2e-12
    # A constant confidence is one tie group: the risk is the error rate at every coverage.
    assert area_under_risk_coverage(p, y, confidence=np.zeros(n)) == pytest.approx(error_rate)


def test_hand_example_and_bad_input():
    p = np.array([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4]])
    assert area_under_risk_coverage(p, [0, 0, 1]) == pytest.approx((0 + 0 + 1 / 3) / 3)
    with pytest.raises(ValueError, match="confidence"):
        area_under_risk_coverage(p, [0, 0, 1], confidence=np.zeros(4))
    with pytest.raises(ValueError, match="confidence"):
        risk_coverage_curve(p, [0, 0, 1], confidence=np.array([0.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="labels"):
        risk_coverage_curve(p, [0, 0, 2])
