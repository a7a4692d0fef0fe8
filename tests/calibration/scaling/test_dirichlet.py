"""Dirichlet calibration (`scaling/dirichlet.py`) against scikit-learn's logistic regression on
log-probabilities (unregularized) and a SciPy minimization of the ODIR objective."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.linear_model import LogisticRegression

from keras_normkit.calibration import (
    DirichletCalibration,
    DirichletCalibrationMap,
    fit_dirichlet_calibration,
)
from tests.calibration.wrapper_checks import check_wrapper, draw, scaled_classifier


def problem(seed, n, k):
    """Logits of a classifier that is over-confident and biased towards class 0."""
    x, y = draw(seed, n, k, noise=1.0)
    logits = 2.0 * x.astype(np.float64)
    if k > 1:
        logits[:, 0] += 1.0
    return logits, y


def odir_objective(params, features, labels, lam, mu):
    """Kull et al. (2019): mean NLL + lam / (k (k-1)) sum_{i!=j} W_ij^2 + mu / k sum b^2."""
    k = features.shape[1]
    w, b = params[: k * k].reshape(k, k), params[k * k :]
    nll = -np.mean(log_softmax(features @ w + b, axis=1)[np.arange(len(labels)), labels])
    off = w[~np.eye(k, dtype=bool)]
    return nll + lam / (k * (k - 1)) * np.sum(off**2) + mu / k * np.sum(b**2)


@pytest.mark.parametrize("k", [3, 4])
def test_unregularized_is_logistic_regression_on_log_probabilities(k):
    logits, y = problem(k, 2000, k)
    fitted = fit_dirichlet_calibration(logits, y, off_diagonal_l2=0.0, bias_l2=0.0)
    features = log_softmax(logits, axis=1)
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(features, y)
    np.testing.assert_allclose(
        fitted.predict(logits), reference.predict_proba(features), atol=1e-4, rtol=0
    )


def test_odir_matches_a_scipy_minimization_of_the_same_objective():
    logits, y = problem(0, 800, 3)
    lam, mu = 0.5, 0.2
    fitted = fit_dirichlet_calibration(logits, y, off_diagonal_l2=lam, bias_l2=mu)
    features = log_softmax(logits, axis=1)
    start = np.concatenate([np.eye(3).ravel(), np.zeros(3)])
    result = minimize(
        odir_objective,
        start,
        args=(features, y, lam, mu),
        method="BFGS",
        options={"gtol": 1e-10, "maxiter": 10_000},
    )
    ours = np.concatenate([fitted.kernel.ravel(), fitted.bias])
    assert odir_objective(ours, features, y, lam, mu) <= result.fun + 1e-9
    np.testing.assert_allclose(ours, result.x, atol=2e-4)
    expected = softmax(features @ result.x[:9].reshape(3, 3) + result.x[9:], axis=1)
    np.testing.assert_allclose(fitted.predict(logits), expected, atol=1e-5, rtol=0)
    # A heavy penalty leaves a diagonal map without intercepts.
    heavy = fit_dirichlet_calibration(logits, y, off_diagonal_l2=1e4, bias_l2=1e4)
    assert np.abs(heavy.kernel - np.diag(np.diag(heavy.kernel))).max() < 1e-3
    assert np.abs(heavy.bias).max() < 1e-3


def test_binary_logit_is_beta_calibration():
    logits, y = problem(5, 3000, 1)
    fitted = fit_dirichlet_calibration(logits, y, off_diagonal_l2=0.0, bias_l2=0.0)
    z = logits[:, 0]
    features = np.stack([-np.logaddexp(0, z), -np.logaddexp(0, -z)], axis=1)  # log(1-p), log p
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(features, y)
    q = fitted.predict(z)
    assert q.shape == (3000,) and fitted.predict(logits).shape == (3000, 1)
    np.testing.assert_allclose(q, reference.predict_proba(features)[:, 1], atol=1e-4, rtol=0)
    assert fitted.kernel.shape == (2, 2)
    assert repr(fitted) == "DirichletCalibrationMap(classes=2)"


def test_bad_input():
    logits, y = problem(1, 200, 3)
    with pytest.raises(ValueError, match="Dirichlet calibration needs held-out examples"):
        fit_dirichlet_calibration(logits, np.zeros(200, int))
    for name in ("off_diagonal_l2", "bias_l2"):
        for value, error in ((-1.0, ValueError), (np.inf, ValueError), ("a", TypeError)):
            with pytest.raises(error, match=name):
                fit_dirichlet_calibration(logits, y, **{name: value})
            with pytest.raises(error, match=name):
                DirichletCalibration(scaled_classifier(3), **{name: value})
    with pytest.raises(ValueError, match="fitted on 3 classes"):
        DirichletCalibrationMap(np.eye(3), np.zeros(3)).predict(np.zeros((2, 4)))
    with pytest.warns(UserWarning, match="Dirichlet calibration expects logits"):
        fit_dirichlet_calibration(softmax(logits, axis=1), y)


@pytest.mark.parametrize("k", [1, 3])
def test_wrapper_serves_the_fitted_map(k):
    def fitted_predict(logits, labels):
        return fit_dirichlet_calibration(logits, labels).predict(logits)

    wrapper = check_wrapper(DirichletCalibration, fitted_predict, k, atol=5e-5)
    assert wrapper.calibration_map_.kernel.shape == ((2, 2) if k == 1 else (k, k))
