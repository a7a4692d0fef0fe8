"""fit_histogram_binning (`binning/histogram.py`) against a literal NumPy implementation and scikit-learn's bins."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve

from keras_normkit.calibration import HistogramBinningMap, fit_histogram_binning


def reference_binning(p, positive, num_bins, strategy):
    """Histogram binning written out bin by bin, with masks (no searchsorted, no bincount).

    Edges 0 < m/M < 1 (uniform) or the NumPy percentiles of p (quantile); bin m holds
    e_{m-1} < p <= e_m (the first also p = its lower edge). Quantile bins that hold no
    held-out example because edges coincide (ties), or lie above the largest p, are skipped
    (the bin above the largest p: the last kept bin extends to +inf). Returns the upper
    edges and values of the kept bins.
    """
    if strategy == "uniform":
        edges = [m / num_bins for m in range(num_bins + 1)]
    else:  # the edges of scikit-learn's calibration_curve(strategy="quantile")
        edges = list(np.percentile(p, np.linspace(0, 1, num_bins + 1) * 100))
    uppers, values = [], []
    lower = -np.inf
    for m in range(1, num_bins + 1):
        upper = edges[m] if m < num_bins else np.inf
        in_bin = (p > lower) & (p <= upper)
        if strategy == "quantile" and not in_bin.any() and uppers:
            if m == num_bins:  # nothing above: the previous bin extends to +inf
                uppers[-1] = np.inf
            continue
        uppers.append(upper)
        values.append(positive[in_bin].mean())
        lower = upper
    return np.array(uppers), np.array(values)


def reference_predict(uppers, values, p):
    out = np.empty(len(p))
    for i, value in enumerate(p):
        out[i] = values[next(m for m, upper in enumerate(uppers) if value <= upper)]
    return out


def problem(seed, n, k=None):
    rng = np.random.default_rng(seed)
    if k is None:
        p = rng.beta(2, 2, size=n)
        return p, (rng.random(n) < p**1.5).astype(int)
    p = rng.dirichlet(np.ones(k), size=n)
    return p, (p.cumsum(1) > rng.random((n, 1))).argmax(1)


def test_binary_matches_reference_and_sklearn_calibration_curve():
    for strategy in ("uniform", "quantile"):
        for seed, (n, bins) in enumerate([(5000, 15), (800, 10), (300, 3), (50, 1)]):
            p, y = problem(seed, n)
            fitted = fit_histogram_binning(p, y, num_bins=bins, strategy=strategy)
            uppers, values = reference_binning(p, y == 1, bins, strategy)
            np.testing.assert_allclose(fitted.values[0], values, rtol=0, atol=1e-12)
            assert fitted.counts[0].sum() == n
            test = np.concatenate([p, np.linspace(0, 1, 1001)])
            np.testing.assert_allclose(
                fitted.predict(test), reference_predict(uppers, values, test), atol=1e-12
            )
            # scikit-learn's calibration_curve uses the same bins: its fraction of
            # positives per non-empty bin is our bin values.
            prob_true, _ = calibration_curve(y, p, n_bins=bins, strategy=strategy)
            np.testing.assert_allclose(fitted.values[0], prob_true, atol=1e-12)


def test_bin_edges_follow_guo_et_al():
    # A probability on an edge m/M belongs to bin m (the right-closed one), 0 to the first.
    p = np.array([0.0, 0.25, 0.5, 0.5000001, 0.75, 1.0, 0.1, 0.9])
    y = np.array([0, 1, 1, 0, 1, 0, 1, 1])
    fitted = fit_histogram_binning(p, y, num_bins=4)
    assert fitted.counts[0].tolist() == [3, 1, 2, 2]  # [0, .25], (.25, .5], (.5, .75], (.75, 1]
    np.testing.assert_allclose(fitted.values[0], [2 / 3, 1.0, 0.5, 0.5])


def test_quantile_ties_merge_bins():
    # 60 % of the scores are exactly 0.2: the quantile edges at 0.2 coincide.
    rng = np.random.default_rng(1)
    p = np.where(rng.random(1000) < 0.6, 0.2, rng.random(1000))
    y = (rng.random(1000) < p).astype(int)
    fitted = fit_histogram_binning(p, y, num_bins=10, strategy="quantile")
    assert len(fitted.values[0]) < 10
    assert np.all(fitted.counts[0] > 0)
    uppers, values = reference_binning(p, y == 1, 10, "quantile")
    np.testing.assert_allclose(fitted.values[0], values, atol=1e-12)
    # Saturated scores: the largest value tied by many examples does not leave an empty top bin.
    p = np.concatenate([rng.random(50), np.ones(50)])
    y = (rng.random(100) < p).astype(int)
    fitted = fit_histogram_binning(p, y, num_bins=5, strategy="quantile")
    assert np.all(fitted.counts[0] > 0) and len(fitted.values[0]) == 3  # edges at 1 dropped
    uppers, values = reference_binning(p, y == 1, 5, "quantile")
    test = np.linspace(0, 1, 101)
    np.testing.assert_allclose(fitted.predict(test), reference_predict(uppers, values, test))


def test_multiclass_one_vs_rest_renormalized():
    p, y = problem(2, 6000, k=3)
    for strategy in ("uniform", "quantile"):
        fitted = fit_histogram_binning(p, y, num_bins=8, strategy=strategy)
        test = np.random.default_rng(3).dirichlet(np.ones(3), size=400)
        columns = []
        for k in range(3):
            uppers, values = reference_binning(p[:, k], y == k, 8, strategy)
            columns.append(reference_predict(uppers, values, test[:, k]))
        expected = np.stack(columns, axis=1)
        expected /= expected.sum(1, keepdims=True)
        np.testing.assert_allclose(fitted.predict(test), expected, atol=1e-12)


def test_empty_bins_and_zero_rows():
    p = np.array([0.05, 0.1, 0.15, 0.9, 0.95])
    y = np.array([0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match=r"bin 1 \(\(0.2, 0.4\]\).*holds 0 of 5.*fewer bins"):
        fit_histogram_binning(p, y, num_bins=5)
    with pytest.raises(ValueError, match=r"min_samples_per_bin=3.*bin 1 \(\(0.5, 1\]\).*holds 2"):
        fit_histogram_binning(p, y, num_bins=2, min_samples_per_bin=3)
    fitted = fit_histogram_binning(p, y, num_bins=5, min_samples_per_bin=0)
    np.testing.assert_allclose(fitted.values[0], [1 / 3, 0.3, 0.5, 0.7, 1.0])  # centres
    assert fitted.counts[0].tolist() == [3, 0, 0, 0, 2]
    # Too few examples for the quantile bins: equal-mass edges fall between two examples.
    with pytest.raises(ValueError, match="strategy='quantile'"):
        fit_histogram_binning(
            np.array([0.1, 0.2, 0.3]), [0, 1, 1], num_bins=10, strategy="quantile"
        )
    # A row whose every class maps to 0 becomes uniform, never NaN.
    zero = HistogramBinningMap([[0.5]] * 3, [[0.0, 1.0]] * 3)
    np.testing.assert_allclose(zero.predict(np.array([[0.4, 0.3, 0.3]])), [[1 / 3] * 3])


def test_bad_arguments():
    p, y = problem(0, 100)
    for kwargs, error, match in [
        ({"num_bins": 0}, ValueError, "num_bins"),
        ({"num_bins": 2.5}, TypeError, "num_bins"),
        ({"strategy": "kmeans"}, ValueError, "strategy.*'uniform', 'quantile'.*kmeans"),
        ({"strategy": 3}, TypeError, "strategy"),
        ({"min_samples_per_bin": -1}, ValueError, "min_samples_per_bin"),
        ({"min_samples_per_bin": "2"}, TypeError, "min_samples_per_bin"),
    ]:
        with pytest.raises(error, match=match):
            fit_histogram_binning(p, y, **kwargs)
    with pytest.raises(ValueError, match="finite"):
        fit_histogram_binning(np.where(np.arange(100) == 7, np.inf, p), y)
    with pytest.raises(ValueError, match="sum to 1"):
        fit_histogram_binning(np.full((4, 3), 0.5), [0, 1, 2, 0])
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        fit_histogram_binning(np.full((4, 3), 1 / 3), [0, 1, 3, 0])
    for labels in (np.zeros(100, int), np.ones(100, int)):  # one class: nothing to estimate
        with pytest.raises(ValueError, match="Histogram binning needs .* two classes.*0 or 1"):
            fit_histogram_binning(p, labels, num_bins=2)
    with pytest.raises(ValueError, match="all of class 2"):
        fit_histogram_binning(np.full((4, 3), 1 / 3), [2, 2, 2, 2], num_bins=1)


@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 4),
    bins=st.integers(1, 12),
    strategy=st.sampled_from(["uniform", "quantile"]),
)
def test_binning_properties(seed, k, bins, strategy):
    rng = np.random.default_rng(seed)
    n = 400
    p = rng.random(n) if k == 1 else rng.dirichlet(np.ones(k), size=n)
    y = rng.integers(0, max(k, 2), size=n)
    fitted = fit_histogram_binning(p, y, num_bins=bins, strategy=strategy, min_samples_per_bin=0)
    test = rng.random(100) if k == 1 else rng.dirichlet(np.ones(k), size=100)
    q = fitted.predict(test)
    assert q.shape == test.shape and np.all((0 <= q) & (q <= 1)) and np.isfinite(q).all()
    if k > 1:
        np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-12)
    for edges, values, counts in zip(fitted.edges, fitted.values, fitted.counts, strict=True):
        assert len(values) == len(edges) + 1 == len(counts) <= bins
        assert np.all(np.diff(edges) > 0) and counts.sum() == n
