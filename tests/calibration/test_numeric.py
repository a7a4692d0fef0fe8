"""The one softmax and log-softmax of the calibration modules (`_numeric.py`) against SciPy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, log_expit, log_softmax, softmax

from keras_normkit.calibration import _numeric
from tests.conftest import max_examples


@settings(max_examples=max_examples(20), deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 12), scale=st.sampled_from([0.1, 5.0, 500.0]))
def test_softmax_and_log_softmax_match_scipy(seed, k, scale):
    z = np.random.default_rng(seed).normal(size=(30, k)) * scale
    np.testing.assert_allclose(_numeric.softmax(z), softmax(z, axis=1), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(_numeric.log_softmax(z), log_softmax(z, axis=1), rtol=1e-12)
    d, e, total = _numeric.shifted_exponentials(z)
    assert d.max(axis=1) == pytest.approx(0.0) and (total >= 1).all()
    np.testing.assert_allclose(e / total[:, None], softmax(z, axis=1), rtol=1e-12, atol=1e-300)


def test_one_binary_logit_is_the_two_class_softmax_of_zero_and_z():
    z = np.array([[-800.0], [-3.0], [0.0], [2.5], [800.0]])
    assert _numeric.two_class_logits(z).tolist() == [[0.0, v] for v in z[:, 0]]
    np.testing.assert_allclose(_numeric.softmax(z)[:, 1], expit(z[:, 0]), rtol=1e-12)
    np.testing.assert_allclose(_numeric.log_softmax(z)[:, 1], log_expit(z[:, 0]), rtol=1e-12)
    np.testing.assert_allclose(_numeric.log_softmax(z)[:, 0], log_expit(-z[:, 0]), rtol=1e-12)
    # float32 logits: the two-class form keeps the dtype; softmax is float64.
    z32 = z.astype(np.float32)
    assert _numeric.two_class_logits(z32).dtype == np.float32
    assert _numeric.softmax(z32).dtype == np.float64
    wide = np.zeros((2, 3))
    assert _numeric.two_class_logits(wide) is wide
