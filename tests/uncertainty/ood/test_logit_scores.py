"""MSP, max-logit and energy against direct NumPy formulas (and scipy's logsumexp)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.uncertainty import energy_score, max_logit, max_softmax_probability


def _logits(seed, n=50, k=7, scale=4.0):
    return scale * np.random.default_rng(seed).normal(size=(n, k))


@given(st.integers(0, 10_000), st.floats(0.1, 10.0))
def test_scores_match_their_formulas(seed, temperature):
    z = _logits(seed)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(max_softmax_probability(z), p.max(axis=1), rtol=1e-12)
    np.testing.assert_allclose(max_softmax_probability(p, from_logits=False), p.max(axis=1))
    np.testing.assert_array_equal(max_logit(z), z.max(axis=1))
    expected = temperature * np.log(np.exp(z / temperature).sum(axis=1))
    np.testing.assert_allclose(energy_score(z, temperature), expected, rtol=1e-10)


def test_energy_is_stable_for_large_logits():
    scipy_special = pytest.importorskip("scipy.special")
    z = np.array([[1000.0, 999.0, -1000.0]])
    np.testing.assert_allclose(energy_score(z), scipy_special.logsumexp(z, axis=1))


def test_a_binary_logit_is_the_two_logits_zero_and_z():
    z = np.array([2.0, -1.0])
    two = np.stack([np.zeros(2), z], axis=1)
    np.testing.assert_allclose(max_softmax_probability(z), max_softmax_probability(two))
    np.testing.assert_allclose(energy_score(z[:, None]), energy_score(two))
    np.testing.assert_allclose(max_softmax_probability(z), 1 / (1 + np.exp(-np.abs(z))))


def test_bad_inputs():
    with pytest.raises(ValueError, match="finite"):
        max_logit(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="sum to 1"):
        max_softmax_probability(np.array([[0.5, 0.6]]), from_logits=False)
    with pytest.raises(ValueError, match=r"temperature.*> 0"):
        energy_score(np.zeros((2, 3)), temperature=0.0)
    with pytest.raises(TypeError, match="from_logits"):
        max_softmax_probability(np.zeros((2, 3)), from_logits="yes")
    with pytest.raises(ValueError, match="shape"):
        max_logit(np.zeros((2, 3, 4)))
