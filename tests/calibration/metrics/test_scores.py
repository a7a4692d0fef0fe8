"""The negative log-likelihood (against scikit-learn's `log_loss`) and the Brier score (against
`brier_score_loss`): `metrics/scores.py`."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import brier_score_loss, log_loss

from keras_normkit.calibration import brier_score, negative_log_likelihood
from tests.calibration.metrics.problems import BAD_INPUTS, random_problem


def _hand_computed_nll():
    expected = -(np.log(0.5) + np.log(0.9)) / 2
    got = negative_log_likelihood(np.array([[0.5, 0.5], [0.9, 0.1]]), [1, 0])
    assert got == pytest.approx(expected, rel=1e-12)


@given(seed=st.integers(0, 10_000), k=st.integers(2, 10))
def test_nll_matches_sklearn_log_loss(seed, k):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(100, k)) * 4
    y = rng.integers(0, k, size=100)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    expected = log_loss(y, p, labels=np.arange(k))
    assert negative_log_likelihood(p, y) == pytest.approx(expected, rel=1e-9)
    assert negative_log_likelihood(logits, y, from_logits=True) == pytest.approx(expected, rel=1e-9)


def _nll_binary_logit_is_sigmoid_cross_entropy():
    z = np.array([-3.0, 0.0, 2.0, 50.0])
    y = np.array([0, 1, 1, 0])
    expected = np.mean(np.logaddexp(0, -(2 * y - 1) * z))
    assert negative_log_likelihood(z, y, from_logits=True) == pytest.approx(expected, rel=1e-12)


def _nll_of_zero_probability_is_inf_not_clipped():
    assert negative_log_likelihood(np.array([[1.0, 0.0]]), [1]) == np.inf


def _nll_from_logits_rejects_nan():
    with pytest.raises(ValueError, match="finite"):
        negative_log_likelihood(np.array([[0.0, np.nan]]), [0], from_logits=True)


def _nll_and_brier_reject_bad_input():
    for probabilities, labels, match in BAD_INPUTS:
        for fn in (negative_log_likelihood, brier_score):
            with pytest.raises(ValueError, match=match):
                fn(probabilities, labels)


def test_nll_by_hand_binary_logit_zero_probability_and_bad_input():
    """The checks below, run in turn (each is a function of this module)."""
    _hand_computed_nll()
    _nll_binary_logit_is_sigmoid_cross_entropy()
    _nll_of_zero_probability_is_inf_not_clipped()
    _nll_from_logits_rejects_nan()
    _nll_and_brier_reject_bad_input()


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
        (lambda: brier_score(p, [0, 1], scale_by_half="yes"), ValueError),
        (lambda: brier_score(p, [0, 1], scale_by_half=None), TypeError),
        (lambda: brier_score(p, [0, 2]), ValueError),
    ]:
        with pytest.raises(error):
            call()
