"""fit_vector_scaling / fit_matrix_scaling against scikit-learn and theory (`affine.py`)."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from keras_normkit.calibration import (
    expected_calibration_error,
    fit_matrix_scaling,
    fit_temperature,
    fit_vector_scaling,
    negative_log_likelihood,
)
from tests.calibration.test_temperature import (
    _bad_input_raises,
    _one_class_labels_raise,
    calibrated_draw,
    softmax,
)


def test_vector_and_matrix_scaling_recover_known_miscalibration():
    z, y = calibrated_draw(0, 10_000, 10)
    z_test, y_test = calibrated_draw(1, 20_000, 10)
    before = expected_calibration_error(softmax(2.5 * z_test), y_test)
    w, b = fit_vector_scaling(2.5 * z, y)
    assert np.mean(w) == pytest.approx(1 / 2.5, rel=0.02)  # per class: sampling noise
    np.testing.assert_allclose(w, 1 / 2.5, rtol=0.1)
    np.testing.assert_allclose(b - b.mean(), 0.0, atol=0.2)
    after = expected_calibration_error(softmax(2.5 * z_test * w + b), y_test)
    assert after <= 0.2 * before, (before, after)
    a, b = fit_matrix_scaling(2.5 * z, y, l2=1e-3)
    assert np.mean(np.diag(a)) == pytest.approx(1 / 2.5, rel=0.02)
    np.testing.assert_allclose(np.diag(a), 1 / 2.5, rtol=0.1)
    assert np.abs(a - np.diag(np.diag(a))).max() < 0.05
    after = expected_calibration_error(softmax(2.5 * z_test @ a + b), y_test)
    assert after <= 0.2 * before, (before, after)


def _unregularized_matrix_scaling_is_multinomial_logistic_regression():
    # softmax(z @ A + b) with l2 = 0 is exactly multinomial logistic regression on z.
    z, y = calibrated_draw(4, 1500, 4)
    logits = 1.8 * z + np.random.default_rng(0).normal(size=z.shape) * 0.5
    a, b = fit_matrix_scaling(logits, y, l2=0.0)
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(logits, y)
    np.testing.assert_allclose(
        softmax(logits @ a + b), reference.predict_proba(logits), atol=1e-4, rtol=0
    )


def _binary_vector_scaling_is_platt_scaling():
    rng = np.random.default_rng(2)
    logit = rng.normal(size=2000) * 3
    label = (rng.random(2000) < 1 / (1 + np.exp(-(0.5 * logit - 0.7)))).astype(int)
    w, b = fit_vector_scaling(logit, label)  # l2 is ignored for a single logit
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(logit[:, None], label)
    assert w.shape == b.shape == (1,)
    assert w[0] == pytest.approx(reference.coef_[0, 0], rel=1e-4)
    assert b[0] == pytest.approx(reference.intercept_[0], rel=1e-4)


def _more_parameters_fit_the_calibration_set_better():
    z, y = calibrated_draw(9, 600, 5)
    logits = 3 * z + np.random.default_rng(1).normal(size=z.shape)
    t = fit_temperature(logits, y)
    w, bv = fit_vector_scaling(logits, y, l2=0.0)
    a, bm = fit_matrix_scaling(logits, y, l2=0.0)
    nll_t = negative_log_likelihood(logits / t, y, from_logits=True)
    nll_v = negative_log_likelihood(logits * w + bv, y, from_logits=True)
    nll_m = negative_log_likelihood(logits @ a + bm, y, from_logits=True)
    assert nll_m <= nll_v + 1e-9 <= nll_t + 2e-9
    # A heavy off-diagonal penalty pushes matrix scaling to a diagonal map.
    a_heavy, _ = fit_matrix_scaling(logits, y, l2=100.0)
    assert np.abs(a_heavy - np.diag(np.diag(a_heavy))).max() < 1e-3
    assert np.abs(a - np.diag(np.diag(a))).max() > 1e-2


def _affine_specific_degenerate_and_bad_input():
    z, y = calibrated_draw(0, 50, 3)
    with pytest.raises(ValueError, match="no finite optimum"):
        fit_vector_scaling(z, np.zeros(50, int), l2=0.0)
    for l2, error in ((-1.0, ValueError), (np.nan, ValueError), ("a", TypeError)):
        with pytest.raises(error, match="l2"):
            fit_matrix_scaling(z, y, l2=l2)
        with pytest.raises(error, match="l2"):
            fit_vector_scaling(z, y, l2=l2)
    # Two classes present (the third absent) are still fitted.
    z, y = calibrated_draw(0, 2000, 3)
    assert np.all(np.isfinite(fit_vector_scaling(2 * z[y < 2], y[y < 2])[0]))


def test_degenerate_and_bad_input():
    """The checks below, run in turn (each is a function of this module)."""
    _one_class_labels_raise(
        [(fit_vector_scaling, "Vector scaling"), (fit_matrix_scaling, "Matrix scaling")]
    )
    _bad_input_raises([fit_vector_scaling, fit_matrix_scaling])
    _affine_specific_degenerate_and_bad_input()


def test_vector_and_matrix_against_logistic_regression():
    """The checks below, run in turn (each is a function of this module)."""
    _unregularized_matrix_scaling_is_multinomial_logistic_regression()
    _binary_vector_scaling_is_platt_scaling()
    _more_parameters_fit_the_calibration_set_better()
