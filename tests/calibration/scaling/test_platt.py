"""fit_platt_scaling (`scaling/platt.py`) against a NumPy Newton solver, LogisticRegression and scikit-learn."""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.calibration import _sigmoid_calibration
from sklearn.linear_model import LogisticRegression

from keras_normkit.calibration import PlattScalingMap, fit_platt_scaling
from keras_normkit.calibration._one_vs_rest import log_odds, ops_log_odds


def newton_platt(s, t, steps=200):
    """min_{a,b} mean[log(1 + e^u) - t u], u = a s + b: Newton (exact Hessian), halved
    steps while the loss does not fall, from a = b = 0."""

    def loss(a, b):
        u = a * s + b
        return np.mean(np.logaddexp(0, u) - t * u)

    a, b = 0.0, 0.0
    for _ in range(steps):
        q = np.exp(-np.logaddexp(0, -(a * s + b)))
        g = np.array([np.mean((q - t) * s), np.mean(q - t)])
        h = q * (1 - q)
        hessian = np.array([[np.mean(h * s * s), np.mean(h * s)], [np.mean(h * s), np.mean(h)]])
        step = np.linalg.solve(hessian, g)
        scale = 1.0
        while loss(a - scale * step[0], b - scale * step[1]) > loss(a, b) and scale > 1e-8:
            scale /= 2
        a, b = a - scale * step[0], b - scale * step[1]
        if np.abs(step).max() < 1e-13:
            break
    return a, b


def platt_targets(positive):
    n_pos, n_neg = positive.sum(), (~positive).sum()
    return np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))


def binary_problem(seed, n=3000, a=0.4, b=-0.5):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 3
    return z, (rng.random(n) < 1 / (1 + np.exp(-(a * z + b)))).astype(int)


def test_binary_matches_newton_and_logistic_regression():
    z, y = binary_problem(0)
    hard = fit_platt_scaling(z, y, smooth_targets=False)
    a, b = newton_platt(z, y.astype(float))
    assert hard.scale[0] == pytest.approx(a, rel=1e-7)
    assert hard.bias[0] == pytest.approx(b, rel=1e-7)
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    assert hard.scale[0] == pytest.approx(reference.coef_[0, 0], rel=1e-5)
    assert hard.bias[0] == pytest.approx(reference.intercept_[0], rel=1e-5)
    assert hard.scale[0] == pytest.approx(0.4, rel=0.1)  # the miscalibration is recovered

    smooth = fit_platt_scaling(z, y)  # Platt's targets, the default
    a, b = newton_platt(z, platt_targets(y == 1))
    assert smooth.scale[0] == pytest.approx(a, rel=1e-7)
    assert smooth.bias[0] == pytest.approx(b, rel=1e-7)
    # scikit-learn's CalibratedClassifierCV(method="sigmoid") fits 1 / (1 + exp(A f + B)).
    big_a, big_b = _sigmoid_calibration(z, y)
    assert smooth.scale[0] == pytest.approx(-big_a, rel=1e-4)
    assert smooth.bias[0] == pytest.approx(-big_b, rel=1e-4, abs=1e-5)
    q = smooth.predict(z)
    np.testing.assert_allclose(q, 1 / (1 + np.exp(-(a * z + b))), atol=1e-9)
    assert q.shape == z.shape and smooth.predict(z[:, None]).shape == (len(z), 1)


def test_multiclass_one_vs_rest_on_log_odds_renormalized():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4000, 4)) * 2
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = (p.cumsum(1) > rng.random((4000, 1))).argmax(1)
    sharp = 2.5 * logits
    for smooth in (True, False):
        fitted = fit_platt_scaling(sharp, labels, smooth_targets=smooth)
        probabilities = np.exp(sharp) / np.exp(sharp).sum(1, keepdims=True)
        scores = np.log(probabilities) - np.log1p(-probabilities)  # fine at these logits
        expected = np.empty_like(scores)
        for k in range(4):
            positive = labels == k
            t = platt_targets(positive) if smooth else positive.astype(float)
            a, b = newton_platt(scores[:, k], t)
            assert fitted.scale[k] == pytest.approx(a, rel=1e-6)
            assert fitted.bias[k] == pytest.approx(b, rel=1e-6, abs=1e-9)
            expected[:, k] = 1 / (1 + np.exp(-(a * scores[:, k] + b)))
        expected /= expected.sum(1, keepdims=True)
        np.testing.assert_allclose(fitted.predict(sharp), expected, atol=1e-8)
    # Adding a constant to every logit of a row changes nothing.
    shifted = sharp + rng.normal(size=(4000, 1)) * 30
    np.testing.assert_allclose(
        fit_platt_scaling(shifted, labels).scale, fit_platt_scaling(sharp, labels).scale, rtol=1e-6
    )


def test_log_odds_are_stable():
    z = np.array([[100.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-50.0, 20.0, 20.0], [1.0, 2.0, 3.0]])
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        expected = np.log(p) - np.log1p(-p)
    expected[0, 0] = 100.0 - np.log(2.0)  # p_0 = 1 - 2e-44: log-odds 100 - log 2
    np.testing.assert_allclose(log_odds(z), expected, rtol=1e-12, atol=1e-12)
    # float32: the other classes' share of row 0, 2e-44, is below the smallest normal
    # float32 (1.2e-38): the log-odds saturate at -log(1.2e-38) = 87.3 (finite).
    got = keras.ops.convert_to_numpy(ops_log_odds(keras.ops.convert_to_tensor(z, "float32")))
    np.testing.assert_allclose(got[1:], expected[1:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], [-np.log(np.finfo(np.float32).tiny), -100, -100], rtol=1e-5)
    z32 = np.array([[30.0, 0.0, 0.0]], "float32")  # 2e-13: representable
    got = keras.ops.convert_to_numpy(ops_log_odds(keras.ops.convert_to_tensor(z32)))
    np.testing.assert_allclose(got, [[30 - np.log(2.0), -30.0, -30.0]], rtol=1e-6)
    assert np.isfinite(log_odds(np.array([[1000.0, -1000.0]]))).all()


def test_no_finite_optimum_and_bad_input():
    z = np.array([-2.0, -1.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="separate.*smooth_targets=True"):
        fit_platt_scaling(z, [0, 0, 1, 1], smooth_targets=False)
    with pytest.raises(ValueError, match="separate"):
        fit_platt_scaling(z, [1, 1, 0, 0], smooth_targets=False)  # a -> -infinity
    # One class: no slope can be fitted, with either targets.
    for smooth_targets in (False, True):
        for labels in ([0, 0, 0, 0], [1, 1, 1, 1]):
            with pytest.raises(ValueError, match="Platt scaling needs .* two classes.*slope 0"):
                fit_platt_scaling(z, labels, smooth_targets=smooth_targets)
    # Two of three classes: the absent one has no finite optimum with 0/1 targets only.
    z3 = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.2], [1.0, 0.0, 0.1], [0.0, 1.0, 0.3]])
    with pytest.raises(ValueError, match="class 2; received 0 positive of 4"):
        fit_platt_scaling(z3, [1, 0, 0, 1], smooth_targets=False)
    assert fit_platt_scaling(z3, [1, 0, 0, 1]).num_columns == 3
    separable = fit_platt_scaling(z, [0, 0, 1, 1])  # Platt's targets keep a finite
    assert np.isfinite(separable.scale).all() and separable.scale[0] > 0
    with pytest.raises(TypeError, match="smooth_targets"):
        fit_platt_scaling(z, [0, 0, 1, 1], smooth_targets=1)
    with pytest.raises(ValueError, match="finite"):
        fit_platt_scaling(np.array([0.0, np.nan, 1.0]), [0, 1, 1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_platt_scaling(z, [0, 2, 1, 1])
    with pytest.raises(ValueError, match="fitted on 1 column"):
        separable.predict(np.zeros((2, 3)))
    # Renormalization guard: sigmoids that underflow to 0 in every class give 1/k.
    zero = PlattScalingMap([1.0, 1.0], [-1000.0, -1000.0])
    np.testing.assert_allclose(zero.predict(np.array([[0.0, 0.0]])), [[0.5, 0.5]])


@given(seed=st.integers(0, 10_000), k=st.integers(1, 5), sharpness=st.floats(0.1, 5.0))
def test_platt_properties(seed, k, sharpness):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(300, k)) * sharpness
    labels = rng.integers(0, max(k, 2), size=300)
    fitted = fit_platt_scaling(logits, labels)
    q = fitted.predict(logits)
    assert q.shape == logits.shape and np.all((0 <= q) & (q <= 1))
    if k > 1:
        np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-12)
