"""ECE, MCE, class-wise ECE and calibration bins (`metrics/binned.py`): math against independent
references."""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.calibration import (
    calibration_bins,
    classwise_expected_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
)
from tests.calibration.metrics.problems import BAD_INPUTS, GOOD_P


def reference_bins(probabilities, labels, num_bins):
    """Guo et al.'s bins written out literally: B_m = {i : (m-1)/M < conf_i <= m/M}."""
    probabilities = np.asarray(probabilities, float)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == np.asarray(labels)
    gaps, weights = [], []
    for m in range(1, num_bins + 1):
        in_bin = (confidence > (m - 1) / num_bins) & (confidence <= m / num_bins)
        if in_bin.any():
            gaps.append(abs(correct[in_bin].mean() - confidence[in_bin].mean()))
            weights.append(in_bin.sum() / len(confidence))
    return np.array(gaps), np.array(weights)


def reference_ece(probabilities, labels, num_bins):
    gaps, weights = reference_bins(probabilities, labels, num_bins)
    return float(np.sum(gaps * weights))


def reference_mce(probabilities, labels, num_bins):
    return float(np.max(reference_bins(probabilities, labels, num_bins)[0]))


def reference_classwise_ece(probabilities, labels, num_bins):
    probabilities = np.asarray(probabilities, float)
    labels = np.asarray(labels)
    total = 0.0
    for k in range(probabilities.shape[1]):
        p = probabilities[:, k]
        for m in range(1, num_bins + 1):
            low = -1.0 if m == 1 else (m - 1) / num_bins
            in_bin = (p > low) & (p <= m / num_bins)
            if in_bin.any():
                gap = abs((labels[in_bin] == k).mean() - p[in_bin].mean())
                total += in_bin.mean() * gap
    return total / probabilities.shape[1]


def random_problem(seed, n=500, k=5, sharpness=3.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * sharpness
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p, rng.integers(0, k, size=n)


# ---------------------------------------------------------------------------------------
# Hand-computed examples.
# ---------------------------------------------------------------------------------------

HAND_P = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.3, 0.7]])
HAND_Y = np.array([0, 1, 0, 1])


def _hand_computed_ece_and_mce():
    # M = 5, edges 0.2, 0.4, 0.6, 0.8. Confidences 0.9, 0.9 (bin 5: acc 1/2),
    # 0.6 (bin 3, since 0.6 is its right edge: acc 1), 0.7 (bin 4: acc 1).
    # ECE = 2/4*|0.5-0.9| + 1/4*|1-0.6| + 1/4*|1-0.7| = 0.2 + 0.1 + 0.075 = 0.375.
    assert expected_calibration_error(HAND_P, HAND_Y, num_bins=5) == pytest.approx(0.375)
    assert maximum_calibration_error(HAND_P, HAND_Y, num_bins=5) == pytest.approx(0.4)
    bins = calibration_bins(HAND_P, HAND_Y, num_bins=5)
    np.testing.assert_array_equal(bins.counts, [0, 0, 1, 1, 2])
    np.testing.assert_allclose(bins.confidence[2:], [0.6, 0.7, 0.9])
    np.testing.assert_allclose(bins.accuracy[2:], [1.0, 1.0, 0.5])
    assert np.isnan(bins.accuracy[:2]).all()
    np.testing.assert_allclose(bins.edges, [0, 0.2, 0.4, 0.6, 0.8, 1.0])


def _right_edge_belongs_to_lower_bin():
    # Confidence exactly 0.5 with M = 2 is in (0, 0.5], not (0.5, 1]. Bins [m-1, m) would
    # put it with the 1.0 example: one bin, conf 0.75, acc 0.5, so ECE 0.25 but MCE 0.25.
    p = np.array([[0.5, 0.5], [1.0, 0.0]])
    bins = calibration_bins(p, [1, 0], num_bins=2)
    np.testing.assert_array_equal(bins.counts, [1, 1])
    # Bin 1: conf 0.5, argmax 0 != label 1 -> gap 0.5; bin 2: conf 1, correct -> gap 0.
    assert expected_calibration_error(p, [1, 0], num_bins=2) == pytest.approx(0.25)
    assert maximum_calibration_error(p, [1, 0], num_bins=2) == pytest.approx(0.5)


def _hand_computed_classwise_ece():
    # Class 0: p = 0.9 (label 0, bin 9: gap 0.1), 0.2 (label 1, bin 2: gap 0.2) -> 0.15.
    # Class 1: p = 0.1 (gap 0.1), 0.8 (gap 0.2) -> 0.15. Mean: 0.15.
    p = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert classwise_expected_calibration_error(p, [0, 1], num_bins=10) == pytest.approx(0.15)


def _perfectly_calibrated_bins_give_zero_ece():
    # 10 examples at confidence 0.8 of which 8 are correct: acc = conf in the only bin.
    p = np.tile([[0.8, 0.2]], (10, 1))
    y = np.array([0] * 8 + [1] * 2)
    assert expected_calibration_error(p, y) == pytest.approx(0.0, abs=1e-12)
    assert maximum_calibration_error(p, y) == pytest.approx(0.0, abs=1e-12)


# ---------------------------------------------------------------------------------------
# Against the independent references.
# ---------------------------------------------------------------------------------------


@given(
    seed=st.integers(0, 10_000),
    num_bins=st.integers(1, 30),
    k=st.integers(2, 12),
    sharpness=st.floats(0.1, 10.0),
)
def test_ece_mce_classwise_match_reference(seed, num_bins, k, sharpness):
    p, y = random_problem(seed, n=300, k=k, sharpness=sharpness)
    assert expected_calibration_error(p, y, num_bins) == pytest.approx(
        reference_ece(p, y, num_bins), abs=1e-12
    )
    assert maximum_calibration_error(p, y, num_bins) == pytest.approx(
        reference_mce(p, y, num_bins), abs=1e-12
    )
    assert classwise_expected_calibration_error(p, y, num_bins) == pytest.approx(
        reference_classwise_ece(p, y, num_bins), abs=1e-12
    )


@given(seed=st.integers(0, 10_000), num_bins=st.integers(1, 30))
def test_ece_properties(seed, num_bins):
    p, y = random_problem(seed, n=200, k=4)
    ece = expected_calibration_error(p, y, num_bins)
    assert 0.0 <= ece <= maximum_calibration_error(p, y, num_bins) <= 1.0
    order = np.random.default_rng(seed).permutation(len(y))
    assert expected_calibration_error(p[order], y[order], num_bins) == pytest.approx(ece)
    # One-hot labels and keras tensors are read the same way.
    one_hot = np.eye(4)[y]
    assert expected_calibration_error(keras.ops.convert_to_tensor(p), one_hot, num_bins) == (
        pytest.approx(ece)
    )


def _binary_probabilities_equal_two_column_form():
    rng = np.random.default_rng(0)
    p1 = rng.random(400)
    y = (rng.random(400) < p1).astype(int)
    two = np.stack([1 - p1, p1], axis=1)
    for fn in (
        expected_calibration_error,
        maximum_calibration_error,
        classwise_expected_calibration_error,
    ):
        assert fn(p1, y) == pytest.approx(fn(two, y), abs=1e-12)
        assert fn(p1[:, None], y[:, None]) == pytest.approx(fn(two, y), abs=1e-12)
    assert expected_calibration_error(p1, y) == pytest.approx(reference_ece(two, y, 15))


# ---------------------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------------------


def _bad_input_raises():
    # Every bad input against every function.
    for probabilities, labels, match in BAD_INPUTS:
        for fn in (
            expected_calibration_error,
            maximum_calibration_error,
            classwise_expected_calibration_error,
        ):
            with pytest.raises(ValueError, match=match):
                fn(probabilities, labels)


def _bad_num_bins():
    for num_bins, error in [
        (0, ValueError),
        (-3, ValueError),
        (2.5, TypeError),
        (True, TypeError),
        (None, TypeError),
    ]:
        with pytest.raises(error, match="num_bins"):
            expected_calibration_error(GOOD_P, [0, 1], num_bins=num_bins)


def test_hand_computed_examples():
    """The checks below, run in turn (each is a function of this module)."""
    _hand_computed_ece_and_mce()
    _right_edge_belongs_to_lower_bin()
    _hand_computed_classwise_ece()
    _perfectly_calibrated_bins_give_zero_ece()


def test_binary_form_and_bad_input():
    """The checks below, run in turn (each is a function of this module)."""
    _binary_probabilities_equal_two_column_form()
    _bad_input_raises()
    _bad_num_bins()


# ---------------------------------------------------------------------------------------
# Equal-mass (adaptive) ECE, Nixon et al. 2019.
# ---------------------------------------------------------------------------------------


def reference_equal_mass_ece(probabilities, labels, num_bins):
    """Loop: sort, give rank r to bin floor(M r / n) (a tie group takes its first rank)."""
    probabilities = np.asarray(probabilities, float)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == np.asarray(labels)
    n = len(confidence)
    members = [[] for _ in range(num_bins)]
    for i in range(n):
        rank = int(np.sum(confidence < confidence[i]))  # values strictly below
        members[rank * num_bins // n].append(i)
    total = 0.0
    for rows in members:
        if rows:
            gap = abs(correct[rows].mean() - confidence[rows].mean())
            total += len(rows) / n * gap
    return total


@given(
    seed=st.integers(0, 10_000),
    num_bins=st.integers(1, 30),
    k=st.integers(2, 6),
    n=st.integers(1, 150),
    ties=st.booleans(),
)
def test_equal_mass_ece_matches_loop_reference(seed, num_bins, k, n, ties):
    p, y = random_problem(seed, n=n, k=k)
    if ties:
        p = np.round(p * 5) / 5
        p[:, 0] += 1 - p.sum(1)
        p = np.abs(p) / np.abs(p).sum(1, keepdims=True)
    got = expected_calibration_error(p, y, num_bins, binning="equal_mass")
    assert got == pytest.approx(reference_equal_mass_ece(p, y, num_bins), abs=1e-12)
    assert 0.0 <= got <= 1.0
    order = np.random.default_rng(seed).permutation(n)
    assert expected_calibration_error(p[order], y[order], num_bins, "equal_mass") == (
        pytest.approx(got, abs=1e-12)
    )


def test_equal_mass_ece_by_hand_and_defaults_unchanged():
    # The hand example: confidences 0.6, 0.7 (both correct) and the tied 0.9, 0.9 (one
    # correct) with M = 2: (|2 - 1.3| + |1 - 1.8|) / 4 = 0.375; with M = 1: |3 - 3.1| / 4.
    assert expected_calibration_error(HAND_P, HAND_Y, 2, "equal_mass") == pytest.approx(0.375)
    assert expected_calibration_error(HAND_P, HAND_Y, 1, "equal_mass") == pytest.approx(0.025)
    # The default is still Guo et al.'s equal-width binning.
    p, y = random_problem(1)
    assert expected_calibration_error(p, y) == pytest.approx(reference_ece(p, y, 15), abs=1e-12)
    with pytest.raises(ValueError, match="binning"):
        expected_calibration_error(p, y, binning="quantile")
    with pytest.raises(TypeError, match="binning"):
        expected_calibration_error(p, y, binning=None)
