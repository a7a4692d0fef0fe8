"""fit_vector_scaling / fit_matrix_scaling against scikit-learn and theory (`scaling/affine.py`)."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from keras_normkit.calibration import (
    MatrixScalingMap,
    VectorScalingMap,
    expected_calibration_error,
    fit_matrix_scaling,
    fit_temperature,
    fit_vector_scaling,
    negative_log_likelihood,
)
from tests.calibration.scaling.test_temperature import (
    _bad_input_raises,
    _one_class_labels_raise,
    calibrated_draw,
    softmax,
)


def test_vector_and_matrix_scaling_recover_known_miscalibration():
    z, y = calibrated_draw(0, 10_000, 10)
    z_test, y_test = calibrated_draw(1, 20_000, 10)
    before = expected_calibration_error(softmax(2.5 * z_test), y_test)
    fitted = fit_vector_scaling(2.5 * z, y)
    w, b = fitted.scale, fitted.bias
    assert np.mean(w) == pytest.approx(1 / 2.5, rel=0.02)  # per class: sampling noise
    np.testing.assert_allclose(w, 1 / 2.5, rtol=0.1)
    np.testing.assert_allclose(b - b.mean(), 0.0, atol=0.2)
    after = expected_calibration_error(softmax(2.5 * z_test * w + b), y_test)
    assert after <= 0.2 * before, (before, after)
    fitted = fit_matrix_scaling(2.5 * z, y, l2=1e-3)
    a, b = fitted.kernel, fitted.bias
    assert np.mean(np.diag(a)) == pytest.approx(1 / 2.5, rel=0.02)
    np.testing.assert_allclose(np.diag(a), 1 / 2.5, rtol=0.1)
    assert np.abs(a - np.diag(np.diag(a))).max() < 0.05
    after = expected_calibration_error(softmax(2.5 * z_test @ a + b), y_test)
    assert after <= 0.2 * before, (before, after)


def _unregularized_matrix_scaling_is_multinomial_logistic_regression():
    # softmax(z @ A + b) with l2 = 0 is exactly multinomial logistic regression on z.
    z, y = calibrated_draw(4, 1500, 4)
    logits = 1.8 * z + np.random.default_rng(0).normal(size=z.shape) * 0.5
    fitted = fit_matrix_scaling(logits, y, l2=0.0)
    a, b = fitted.kernel, fitted.bias
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(logits, y)
    np.testing.assert_allclose(
        softmax(logits @ a + b), reference.predict_proba(logits), atol=1e-4, rtol=0
    )


def _binary_vector_scaling_is_platt_scaling():
    rng = np.random.default_rng(2)
    logit = rng.normal(size=2000) * 3
    label = (rng.random(2000) < 1 / (1 + np.exp(-(0.5 * logit - 0.7)))).astype(int)
    fitted = fit_vector_scaling(logit, label)  # l2 is ignored for a single logit
    w, b = fitted.scale, fitted.bias
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(logit[:, None], label)
    assert w.shape == b.shape == (1,)
    assert w[0] == pytest.approx(reference.coef_[0, 0], rel=1e-4)
    assert b[0] == pytest.approx(reference.intercept_[0], rel=1e-4)


def _more_parameters_fit_the_calibration_set_better():
    z, y = calibrated_draw(9, 600, 5)
    logits = 3 * z + np.random.default_rng(1).normal(size=z.shape)
    t = fit_temperature(logits, y).temperature
    vector = fit_vector_scaling(logits, y, l2=0.0)
    matrix = fit_matrix_scaling(logits, y, l2=0.0)
    w, bv, a, bm = vector.scale, vector.bias, matrix.kernel, matrix.bias
    nll_t = negative_log_likelihood(logits / t, y, from_logits=True)
    nll_v = negative_log_likelihood(logits * w + bv, y, from_logits=True)
    nll_m = negative_log_likelihood(logits @ a + bm, y, from_logits=True)
    assert nll_m <= nll_v + 1e-9 <= nll_t + 2e-9
    # A heavy off-diagonal penalty pushes matrix scaling to a diagonal map.
    a_heavy = fit_matrix_scaling(logits, y, l2=100.0).kernel
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
    assert np.all(np.isfinite(fit_vector_scaling(2 * z[y < 2], y[y < 2]).scale))


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


def test_the_maps_predict_and_still_unpack_as_the_old_pairs():
    """`fit_vector_scaling` / `fit_matrix_scaling` return maps; 0.1.0 code that unpacked the
    pairs they returned keeps working for one release, with a `DeprecationWarning`."""
    z, y = calibrated_draw(3, 1500, 4)
    logits = 2.0 * z
    vector = fit_vector_scaling(logits, y)
    matrix = fit_matrix_scaling(logits, y)
    assert isinstance(vector, VectorScalingMap) and isinstance(matrix, MatrixScalingMap)
    np.testing.assert_allclose(
        vector.predict(logits), softmax(logits * vector.scale + vector.bias), rtol=1e-12
    )
    np.testing.assert_allclose(
        matrix.predict(logits), softmax(logits @ matrix.kernel + matrix.bias), rtol=1e-12
    )
    # One binary logit: sigmoid(w z + b) (vector) and sigmoid(a z + b) (matrix), input's shape.
    logit = logits[:, 0]
    label = (np.random.default_rng(0).random(len(z)) < 1 / (1 + np.exp(-z[:, 0]))).astype(int)
    for fitted, weight in (
        (fit_vector_scaling(logit, label), "scale"),
        (fit_matrix_scaling(logit, label), "kernel"),
    ):
        a = np.ravel(getattr(fitted, weight))[0]
        expected = 1 / (1 + np.exp(-(a * logit + fitted.bias[0])))
        np.testing.assert_allclose(fitted.predict(logit), expected, rtol=1e-12)
        with pytest.raises(ValueError, match="fitted on 1 logit column"):
            fitted.predict(logits)
    with pytest.raises(ValueError, match="fitted on 4 logit column"):
        vector.predict(logits[:, :3])
    # The deprecated pairs: unpacking, indexing and len warn and give the old values.
    for fitted, first in ((vector, vector.scale), (matrix, matrix.kernel)):
        with pytest.warns(DeprecationWarning, match=r"\.bias"):
            multiplier, bias = fitted
        assert multiplier is first and bias is fitted.bias
        with pytest.warns(DeprecationWarning):
            assert fitted[0] is first and fitted[-1] is fitted.bias
        with pytest.warns(DeprecationWarning):
            assert len(fitted) == 2
    assert "scale=" in repr(vector) and "classes=4" in repr(matrix)
