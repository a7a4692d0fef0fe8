"""BBQ (`binning/bayesian.py`) against an independent NumPy/SciPy computation of the BDeu
score and the model average of Naeini et al. (2015), and against netcal's `BBQ`."""

import math

import keras
import numpy as np
import pytest
from scipy.special import betaln

from keras_normkit.calibration import (
    BayesianBinning,
    BayesianBinningMap,
    fit_bayesian_binning,
)
from tests.calibration.wrapper_checks import check_wrapper, draw, scaled_classifier


def reference_bbq(p, targets, query, prior_strength=2.0, factor=10.0):
    """BBQ written out: every equal-frequency model, its Beta-Binomial marginal likelihood
    per bin (B(m + a, n - m + b) / B(a, b)), and the score-weighted posterior means."""
    n = len(p)
    low = max(1, math.floor(n ** (1 / 3) / factor))
    high = max(low, math.ceil(factor * n ** (1 / 3)))
    log_scores, predictions, seen = [], [], set()
    for num_bins in range(low, high + 1):
        edges = np.unique(np.percentile(p, 100 * np.arange(1, num_bins) / num_bins))
        edges = tuple(edges[edges < p.max()])
        if edges in seen:
            continue
        seen.add(edges)
        bounds = [0.0, *edges, 1.0]
        strength = prior_strength / (len(bounds) - 1)
        log_score, prediction = 0.0, np.full(len(query), np.nan)
        for b in range(len(bounds) - 1):
            lo, hi = bounds[b], bounds[b + 1]
            inside = (p <= hi) if b == 0 else (p > lo) & (p <= hi)
            count, positives = inside.sum(), targets[inside].sum()
            alpha = strength * (lo + hi) / 2
            beta = strength - alpha
            log_score += betaln(positives + alpha, count - positives + beta) - betaln(alpha, beta)
            asked = (query <= hi) if b == 0 else (query > lo) & (query <= hi)
            prediction[asked] = (positives + alpha) / (count + strength)
        log_scores.append(log_score)
        predictions.append(prediction)
    weights = np.exp(np.array(log_scores) - max(log_scores))
    return (weights / weights.sum()) @ np.array(predictions)


def miscalibrated(seed, n):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.7, size=n)  # many confident predictions
    truth = 0.2 + 0.6 * p  # the classifier is over-confident
    return p, (rng.random(n) < truth).astype(int), truth


@pytest.mark.parametrize("seed, n, prior_strength", [(0, 300, 2.0), (1, 2000, 2.0), (2, 800, 7.5)])
def test_binary_matches_the_reference(seed, n, prior_strength):
    p, y, _ = miscalibrated(seed, n)
    query = np.concatenate([np.linspace(0, 1, 501), p[:50]])
    fitted = fit_bayesian_binning(p, y, prior_strength=prior_strength)
    expected = reference_bbq(p, y.astype(float), query, prior_strength)
    np.testing.assert_allclose(fitted.predict(query), expected, atol=1e-9, rtol=0)
    assert fitted.model_weights[0].sum() == pytest.approx(1.0)
    assert (np.diff(fitted.num_bins[0]) > 0).all()


def test_multiclass_is_one_vs_rest_renormalized_and_a_coarser_range():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(1500, 3)) * 3
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = (np.exp(z / 3) / np.exp(z / 3).sum(1, keepdims=True)).cumsum(1) > rng.random((1500, 1))
    y = y.argmax(1)
    fitted = fit_bayesian_binning(p, np.eye(3)[y], bin_range_factor=3.0)
    columns = np.stack(
        [reference_bbq(p[:, j], (y == j).astype(float), p[:, j], factor=3.0) for j in range(3)],
        axis=1,
    )
    expected = columns / columns.sum(1, keepdims=True)
    np.testing.assert_allclose(fitted.predict(p), expected, atol=1e-9, rtol=0)
    assert all(b.max() <= math.ceil(3.0 * 1500 ** (1 / 3)) for b in fitted.num_bins)
    assert "models per column" in repr(fitted)


def test_close_to_netcal_bbq_and_to_the_truth():
    netcal_binning = pytest.importorskip("netcal.binning")
    p, y, _ = miscalibrated(4, 20_000)
    query = np.linspace(0.01, 0.99, 99)
    ours = fit_bayesian_binning(p, y).predict(query)
    theirs = netcal_binning.BBQ().fit(p, y).transform(query)
    truth = 0.2 + 0.6 * query
    # netcal scores models by BIC with maximum-likelihood bins (not the paper's BDeu): two
    # piecewise-constant estimates of the same line (measured on seeds 4-6: 0.021-0.026 from
    # the truth for ours, 0.015-0.022 for netcal's, 0.017-0.023 apart).
    assert np.abs(ours - truth).mean() < 0.035
    assert np.abs(theirs - truth).mean() < 0.035
    assert np.abs(ours - theirs).mean() < 0.035


def test_bad_input():
    p, y, _ = miscalibrated(5, 200)
    with pytest.raises(ValueError, match=r"BBQ\) needs held-out examples of at least two"):
        fit_bayesian_binning(p, np.ones(200, int))
    with pytest.raises(ValueError, match="probabilities in"):
        fit_bayesian_binning(4 * p - 2, y)  # logits are rejected
    for kwargs, error in [
        ({"prior_strength": 0.0}, ValueError),
        ({"prior_strength": "2"}, TypeError),
        ({"bin_range_factor": 0.5}, ValueError),
    ]:
        with pytest.raises(error, match=next(iter(kwargs))):
            fit_bayesian_binning(p, y, **kwargs)
        with pytest.raises(error, match=next(iter(kwargs))):
            BayesianBinning(scaled_classifier(2), **kwargs)
    with pytest.raises(ValueError, match="fitted on 1 column"):
        fit_bayesian_binning(p, y).predict(np.full((3, 2), 0.5))
    with pytest.raises(TypeError, match="num_breakpoints"):
        BayesianBinning(scaled_classifier(2), num_breakpoints=2.5)


def keras_columns(logits):
    """The probabilities the wrapper calibrates, computed with keras.ops as it does."""
    z = keras.ops.convert_to_tensor(np.asarray(logits, np.float32))
    columns = keras.ops.sigmoid(z) if z.shape[-1] == 1 else keras.ops.softmax(z, axis=-1)
    return np.asarray(keras.ops.convert_to_numpy(columns), np.float64)


@pytest.mark.parametrize("k", [1, 3])
def test_wrapper_serves_the_fitted_map(k):
    def fitted_predict(logits, labels):
        columns = keras_columns(logits)
        return fit_bayesian_binning(columns, labels).predict(columns)

    wrapper = check_wrapper(BayesianBinning, fitted_predict, k)
    assert isinstance(wrapper.calibration_map_, BayesianBinningMap)
    assert wrapper.num_breakpoints == 2 * max(len(v) for v in wrapper.calibration_map_.values)
    x, y = draw(1, 1500, k)
    small = BayesianBinning(scaled_classifier(k), num_breakpoints=2)
    with pytest.raises(ValueError, match=r"BayesianBinning\(model, num_breakpoints="):
        small.calibrate(x, y, verbose=0)
