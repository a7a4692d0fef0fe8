"""CrossFittedCalibration (`cross_fitting.py`) against scikit-learn's
`CalibratedClassifierCV(FrozenEstimator(classifier), cv=KFold(k), ensemble=True)`."""

import keras
import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import KFold

from keras_normkit.calibration import (
    CrossFittedCalibration,
    IsotonicCalibration,
    NotCalibratedError,
    PlattScaling,
    TemperatureScaling,
    fit_temperature,
)
from keras_normkit.calibration.cross_fitting import fold_bounds
from tests.calibration.wrapper_checks import assert_round_trips, draw, scaled_classifier


class ScoresAsClassifier(ClassifierMixin, BaseEstimator):
    """A fitted 'classifier' whose inputs are its probabilities (one column: of class 1)."""

    def fit(self, x, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, x):
        if x.shape[1] == 1:
            return np.stack([1 - x[:, 0], x[:, 0]], axis=1)
        return x


class LogitAsClassifier(ScoresAsClassifier):
    """A fitted binary 'classifier' whose input is its logit (sklearn calibrates it)."""

    def predict_proba(self, x):
        return super().predict_proba(1 / (1 + np.exp(-x)))

    def decision_function(self, x):
        return x[:, 0]


def keras_columns(logits):
    """The probabilities the wrappers calibrate, computed with keras.ops as they do."""
    z = keras.ops.convert_to_tensor(np.asarray(logits, np.float32))
    columns = keras.ops.sigmoid(z) if z.shape[-1] == 1 else keras.ops.softmax(z, axis=-1)
    return np.asarray(keras.ops.convert_to_numpy(columns), np.float64)


def sklearn_ensemble(features, y, method, cv, estimator=ScoresAsClassifier):
    estimator = FrozenEstimator(estimator().fit(features, y))
    return CalibratedClassifierCV(estimator, method=method, cv=KFold(cv), ensemble=True).fit(
        features, y
    )


def test_fold_bounds_are_kfold():
    for n, k in ((10, 3), (1000, 5), (7, 7)):
        expected = [test[[0, -1]].tolist() for _, test in KFold(k).split(np.zeros(n))]
        bounds = fold_bounds(n, k)
        assert [[bounds[i], bounds[i + 1] - 1] for i in range(k)] == expected


@pytest.mark.parametrize("k", [1, 3])
def test_isotonic_matches_sklearn(k):
    x, y = draw(0, 1500, k)
    wrapper = CrossFittedCalibration(IsotonicCalibration(scaled_classifier(k)), cv=5)
    wrapper.calibrate(x, y, verbose=0)
    columns = keras_columns(2.5 * x)
    reference = sklearn_ensemble(columns, y, "isotonic", 5)
    expected = reference.predict_proba(columns)
    served = keras.ops.convert_to_numpy(wrapper(x))
    np.testing.assert_allclose(served, expected[:, 1:] if k == 1 else expected, atol=2e-6)
    # The mean of the members' maps, and not one map fitted on all the data.
    members = [m.calibration_map_.predict(columns) for m in wrapper.calibrators_]
    np.testing.assert_allclose(served, np.mean(members, axis=0).reshape(served.shape), atol=2e-6)
    single = IsotonicCalibration(scaled_classifier(k)).calibrate(x, y, verbose=0)
    assert np.abs(keras.ops.convert_to_numpy(single(x)) - served).max() > 1e-3


def test_platt_on_a_logit_matches_sklearn_sigmoid():
    x, y = draw(1, 2000, 1)
    wrapper = CrossFittedCalibration(PlattScaling(scaled_classifier(1)), cv=4)
    wrapper.calibrate(x, y, verbose=0)
    logits = (2.5 * x).astype(np.float64)
    expected = sklearn_ensemble(logits, y, "sigmoid", 4, LogitAsClassifier).predict_proba(logits)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(wrapper(x))[:, 0], expected[:, 1], atol=1e-4
    )


def test_temperature_members_and_round_trips(tmp_path):
    x, y = draw(2, 1200, 4)
    wrapper = CrossFittedCalibration(TemperatureScaling(scaled_classifier(4)), cv=3)
    wrapper.calibrate(x, y, verbose=0)
    bounds = fold_bounds(1200, 3)
    for i, member in enumerate(wrapper.calibrators_):
        rows = slice(bounds[i], bounds[i + 1])
        expected = fit_temperature(2.5 * x[rows], y[rows]).temperature
        assert member.temperature_ == pytest.approx(expected, rel=1e-5)
    reloaded = assert_round_trips(wrapper, x[:32])
    assert isinstance(reloaded, CrossFittedCalibration) and reloaded.cv == 3
    assert [m.temperature_ for m in reloaded.calibrators_] == pytest.approx(
        [m.temperature_ for m in wrapper.calibrators_], rel=1e-7
    )
    # Isotonic members keep their fitted table sizes through a reload.
    iso = CrossFittedCalibration(IsotonicCalibration(scaled_classifier(4)), cv=2)
    iso.calibrate(x, y, verbose=0)
    assert_round_trips(iso, x[:32])
    # output="logits": log-probabilities of the averaged map.
    as_logits = CrossFittedCalibration(
        TemperatureScaling(scaled_classifier(4), output="logits"), cv=3
    ).calibrate(x, y, verbose=0)
    z = keras.ops.convert_to_numpy(as_logits(x[:16]))
    np.testing.assert_allclose(np.exp(z), keras.ops.convert_to_numpy(wrapper(x[:16])), atol=1e-6)


def test_bad_input():
    model = scaled_classifier(3)
    with pytest.raises(TypeError, match="calibrator"):
        CrossFittedCalibration(model)
    with pytest.raises(ValueError, match="cv"):
        CrossFittedCalibration(TemperatureScaling(model), cv=1)
    with pytest.raises(TypeError, match="cv"):
        CrossFittedCalibration(TemperatureScaling(model), cv=2.5)
    x, y = draw(3, 300, 3)
    calibrated = TemperatureScaling(model).calibrate(x, y, verbose=0)
    with pytest.raises(ValueError, match="must not be calibrated"):
        CrossFittedCalibration(calibrated)
    with pytest.raises(TypeError, match="not a CrossFittedCalibration"):
        CrossFittedCalibration(CrossFittedCalibration(TemperatureScaling(model)))
    wrapper = CrossFittedCalibration(TemperatureScaling(model), cv=3)
    with pytest.raises(NotCalibratedError, match="not calibrated yet"):
        wrapper(x[:2])
    with pytest.raises(NotCalibratedError, match="fitted calibrators"):
        _ = wrapper.calibrators_
    sorted_labels = np.sort(y)  # the first fold (30 rows) holds class 0 only
    with pytest.raises(ValueError, match=r"Cross-fitting fold 0 of 10 .*at least two classes"):
        CrossFittedCalibration(TemperatureScaling(model), cv=10).calibrate(
            x, sorted_labels, verbose=0
        )
