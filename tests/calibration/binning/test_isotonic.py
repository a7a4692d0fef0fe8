"""fit_isotonic_calibration / PAV (`binning/isotonic.py`) against scikit-learn's IsotonicRegression (to 1e-8)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression, isotonic_regression

from keras_normkit.calibration import IsotonicCalibrationMap, fit_isotonic_calibration
from keras_normkit.calibration.binning.isotonic import isotonic_thresholds, pool_adjacent_violators

ATOL = 1e-8


def sklearn_fit(x, y):
    return IsotonicRegression(increasing=True, out_of_bounds="clip").fit(x, y)


def assert_same_as_sklearn(x, y):
    """Thresholds and predictions (at the points, between them, outside them) agree."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    reference = sklearn_fit(x, y)
    x_t, y_t = isotonic_thresholds(x, y)
    np.testing.assert_allclose(x_t, reference.X_thresholds_, rtol=0, atol=0)
    np.testing.assert_allclose(y_t, reference.y_thresholds_, rtol=0, atol=ATOL)
    grid = np.concatenate([x, np.linspace(x.min() - 0.1, x.max() + 0.1, 1001)])
    np.testing.assert_allclose(
        np.interp(grid, x_t, y_t), reference.predict(grid), rtol=0, atol=ATOL
    )
    return x_t, y_t


def calibration_problem(seed, n, ties=None):
    """Scores p in [0, 1] and 0/1 labels drawn with P(y = 1) = p^2 (miscalibrated)."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    if ties is not None:
        p = np.round(p, ties)  # many tied scores, with mixed labels
    return p, (rng.random(n) < p**2).astype(np.float64)


def test_matches_sklearn_on_labels_ties_and_real_targets():
    for seed, (n, ties) in enumerate([(50, None), (2000, None), (3000, 2), (500, 1), (7, None)]):
        p, y = calibration_problem(seed, n, ties)
        assert_same_as_sklearn(p, y)
    rng = np.random.default_rng(10)
    x = rng.normal(size=1000)
    assert_same_as_sklearn(x, np.sin(x) + rng.normal(size=1000) * 0.5)  # real-valued y
    assert_same_as_sklearn(np.round(x, 1), x**3 + rng.normal(size=1000))  # ties, real y
    # Points closer than float64 resolution (1e-15) to their group's first are ties.
    base = np.repeat(np.linspace(0.2, 0.8, 20), 5)
    near = base + np.tile([0.0, 2e-16, 4e-16, 3e-15, 3.1e-15], 20)
    x_t, _ = assert_same_as_sklearn(near, rng.random(100))
    assert len(x_t) <= 40  # 5 raw values per group pooled into 2 (0-4e-16 and 3e-15)


def test_constant_and_degenerate_inputs():
    assert_same_as_sklearn([0.3] * 5, [0, 1, 1, 0, 1])  # one point: constant map
    x_t, y_t = isotonic_thresholds([0.3] * 5, [0, 1, 1, 0, 1])
    assert x_t.tolist() == [0.3] and y_t.tolist() == [0.6]
    assert_same_as_sklearn([0.1, 0.2, 0.3], [1, 1, 1])
    assert_same_as_sklearn([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0])
    assert_same_as_sklearn([0.4, 0.1, 0.3, 0.2], [0, 1, 0, 1])  # decreasing: one block


def test_pav_matches_sklearn_on_both_code_paths():
    rng = np.random.default_rng(0)
    # Vectorized passes only: Bernoulli labels on sorted scores.
    y = (rng.random(20_000) < np.linspace(0, 1, 20_000)).astype(np.float64)
    w = rng.integers(1, 4, size=20_000).astype(np.float64)
    np.testing.assert_allclose(
        pool_adjacent_violators(y, w), isotonic_regression(y, sample_weight=w), atol=ATOL
    )
    # 1, 2, ..., n-1, 0: each vectorized pass pools a single block; the stack finishes.
    adversarial = np.concatenate([np.arange(1.0, 500.0), [0.0], rng.normal(size=50)])
    np.testing.assert_allclose(
        pool_adjacent_violators(adversarial, np.ones(len(adversarial))),
        isotonic_regression(adversarial),
        atol=ATOL,
    )


def test_fit_isotonic_calibration_binary_and_multiclass():
    p, y = calibration_problem(3, 4000)
    binary = fit_isotonic_calibration(p, y.astype(int))
    reference = sklearn_fit(p, y)
    grid = np.linspace(0, 1, 501)
    np.testing.assert_allclose(binary.predict(grid), reference.predict(grid), atol=ATOL)
    assert binary.predict(grid).shape == (501,)
    assert binary.predict(grid[:, None]).shape == (501, 1)

    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3000, 4)) * 2
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (probabilities.cumsum(1) > rng.random((3000, 1))).argmax(1)
    fitted = fit_isotonic_calibration(probabilities, labels)
    test = rng.dirichlet(np.ones(4), size=500)
    expected = np.stack(
        [sklearn_fit(probabilities[:, k], labels == k).predict(test[:, k]) for k in range(4)],
        axis=1,
    )
    expected /= expected.sum(1, keepdims=True)  # one-vs-rest, renormalized
    np.testing.assert_allclose(fitted.predict(test), expected, atol=ATOL)
    np.testing.assert_allclose(fitted.predict(test).sum(1), 1.0, atol=1e-12)
    one_hot = fit_isotonic_calibration(probabilities, np.eye(4)[labels])
    np.testing.assert_allclose(one_hot.predict(test), fitted.predict(test), atol=0)


def test_zero_rows_become_uniform():
    # Every class's map is 0 below 0.5: a row of small probabilities has nothing to
    # renormalize and becomes 1/k (as scikit-learn's CalibratedClassifierCV), never NaN.
    fitted = IsotonicCalibrationMap([[0.0, 0.5, 1.0]] * 3, [[0.0, 0.0, 1.0]] * 3)
    q = fitted.predict(np.array([[0.4, 0.3, 0.3], [0.8, 0.1, 0.1]]))
    np.testing.assert_allclose(q, [[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0]], atol=1e-12)


def test_bad_input():
    p, y = calibration_problem(0, 20)
    with pytest.raises(ValueError, match="finite"):
        fit_isotonic_calibration(np.where(np.arange(20) == 3, np.nan, p), y.astype(int))
    with pytest.raises(ValueError, match="probabilities in"):
        fit_isotonic_calibration(p * 3 - 1, y.astype(int))  # logits, not probabilities
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_isotonic_calibration(p, np.full(20, 2))
    with pytest.raises(ValueError, match="one entry per example"):
        fit_isotonic_calibration(p, y[:-1].astype(int))
    with pytest.raises(ValueError, match="empty"):
        fit_isotonic_calibration(np.zeros(0), np.zeros(0, int))
    for labels in (np.zeros(20, int), np.ones(20, int)):  # one class: nothing to estimate
        with pytest.raises(ValueError, match="Isotonic calibration needs .* two classes"):
            fit_isotonic_calibration(p, labels)
    fitted = fit_isotonic_calibration(p, y.astype(int))
    with pytest.raises(ValueError, match="fitted on 1 column"):
        fitted.predict(np.full((3, 3), 1 / 3))


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 300),
    k=st.integers(2, 5),
    decimals=st.sampled_from([None, 1, 2]),
)
def test_isotonic_properties(seed, n, k, decimals):
    rng = np.random.default_rng(seed)
    probabilities = rng.dirichlet(np.ones(k) * 0.5, size=n)
    if decimals is not None:
        probabilities = np.round(probabilities, decimals)
        probabilities[:, -1] = 1 - probabilities[:, :-1].sum(1)
        probabilities = np.abs(probabilities)
        probabilities /= probabilities.sum(1, keepdims=True)
    labels = rng.integers(0, k, size=n)
    labels[0] = (labels[1] + 1) % k  # at least two classes (one class is rejected)
    fitted = fit_isotonic_calibration(probabilities, labels)
    for j, (x_t, y_t) in enumerate(zip(fitted.x_thresholds, fitted.y_thresholds, strict=True)):
        assert np.all(np.diff(x_t) > 0) and np.all(np.diff(y_t) >= -1e-12)
        assert np.all((0 <= y_t) & (y_t <= 1))
        # The same map as scikit-learn (its thresholds may keep a point more or less where
        # two pooled means differ only in the last bit: compare the functions).
        reference = sklearn_fit(probabilities[:, j], labels == j)
        points = np.concatenate([probabilities[:, j], np.linspace(0, 1, 201)])
        np.testing.assert_allclose(
            np.interp(points, x_t, y_t), reference.predict(points), rtol=0, atol=ATOL
        )
    test = rng.dirichlet(np.ones(k), size=50)
    q = fitted.predict(test)
    assert q.shape == (50, k) and np.all((0 <= q) & (q <= 1))
    np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-12)
    # Each column's map is non-decreasing in its probability.
    grid = np.linspace(0, 1, 101)
    for x_t, y_t in zip(fitted.x_thresholds, fitted.y_thresholds, strict=True):
        assert np.all(np.diff(np.interp(grid, x_t, y_t)) >= -1e-12)
