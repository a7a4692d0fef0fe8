"""LAC, APS and RAPS scores, and the finite-sample quantile, against the one-example-at-a-time
transcriptions of the published formulas in `reference.py`."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.uncertainty import aps_scores, conformal_quantile, lac_scores, raps_scores
from tests.uncertainty.conformal import reference


def probabilities(seed, n=30, k=6, ties=False):
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.normal(size=(n, k))
    if ties:
        z = np.round(z)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n), rng.random(n)


@given(st.integers(0, 10_000), st.integers(0, 6), st.floats(0.0, 0.5), st.booleans())
def test_scores_match_the_formulas(seed, k_reg, lam, ties):
    p, y, u = probabilities(seed, ties=ties)
    expected_lac = [reference.lac_score(p[i], y[i]) for i in range(len(y))]
    np.testing.assert_allclose(lac_scores(p, y), expected_lac, atol=1e-12)
    expected_aps = [reference.raps_score(p[i], y[i], u[i], 0, 0.0) for i in range(len(y))]
    np.testing.assert_allclose(aps_scores(p, y, u=u), expected_aps, atol=1e-12)
    expected = [reference.raps_score(p[i], y[i], u[i], k_reg, lam) for i in range(len(y))]
    np.testing.assert_allclose(raps_scores(p, y, k_reg=k_reg, lam=lam, u=u), expected, atol=1e-12)
    # every label at once: column j is the score of label j
    everything = raps_scores(p, k_reg=k_reg, lam=lam, u=u)
    j = (y + 1) % p.shape[1]
    np.testing.assert_allclose(
        everything[np.arange(len(y)), j],
        [reference.raps_score(p[i], j[i], u[i], k_reg, lam) for i in range(len(y))],
        atol=1e-12,
    )


def test_u_one_is_the_cumulative_mass_and_one_hot_labels_work():
    p, y, _ = probabilities(0)
    order = np.argsort(-p, axis=1, kind="stable")
    cumulative = np.take_along_axis(
        np.take_along_axis(p, order, 1).cumsum(1), np.argsort(order, axis=1), 1
    )
    np.testing.assert_allclose(aps_scores(p), cumulative, atol=1e-12)
    np.testing.assert_allclose(aps_scores(p, np.eye(p.shape[1])[y]), aps_scores(p, y))


@given(st.integers(0, 10_000), st.integers(1, 60), st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5]))
def test_quantile_is_the_corrected_order_statistic(seed, n, alpha):
    scores = np.random.default_rng(seed).normal(size=n)
    expected = reference.quantile(list(scores), alpha)
    if expected is None:
        with pytest.raises(ValueError, match="Too few calibration examples"):
            conformal_quantile(scores, alpha)
        return
    assert conformal_quantile(scores, alpha) == expected
    q = np.ceil((n + 1) * (1 - alpha) - 1e-9) / n
    assert conformal_quantile(scores, alpha) == np.quantile(scores, min(q, 1.0), method="lower")


def test_quantile_boundaries():
    # alpha = 0.1 needs n >= 9: ceil(10 * 0.9) = 9 <= 9
    assert conformal_quantile(np.arange(9.0), 0.1) == 8.0
    with pytest.raises(ValueError, match="at least 9 calibration examples"):
        conformal_quantile(np.arange(8.0), 0.1)
    with pytest.raises(ValueError, match="at least 19"):
        conformal_quantile(np.arange(18.0), 0.05)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match=r"`alpha` must be a number in \(0.0, 1.0\)"):
        conformal_quantile(np.arange(100.0), alpha)


def test_bad_inputs():
    p, y, _ = probabilities(0)
    with pytest.raises(ValueError, match=r"in \[0, 5\]"):
        lac_scores(p, y + 6)
    with pytest.raises(ValueError, match="sum to 1"):
        aps_scores(p * 0.5)
    with pytest.raises(ValueError, match="u"):
        aps_scores(p, y, u=np.ones(3))
    with pytest.raises(ValueError, match="k_reg"):
        raps_scores(p, k_reg=-1, lam=0.1)
    with pytest.raises(TypeError, match="alpha"):
        conformal_quantile(np.arange(10.0), "0.1")
    with pytest.raises(ValueError, match="finite"):
        conformal_quantile(np.array([1.0, np.nan]), 0.5)
