"""Checks every calibration wrapper must pass: served outputs equal its map's `predict`,
`.keras` and SavedModel round trips, `output="logits"`, and refusal before `calibrate`.

Used by the tests of the wrappers added after the first six (one file per method).
"""

import tempfile

import keras
import numpy as np
import pytest

from keras_normkit.calibration import NotCalibratedError
from tests.conformance import LayerConformanceTestCase


def scaled_classifier(num_classes, factor=2.5):
    """A model whose logits are `factor * x` (input width = number of logits)."""
    return keras.Sequential([keras.Input((num_classes,)), keras.layers.Rescaling(factor)])


def draw(seed, n, k, factor=2.5, noise=0.0):
    """Inputs x and labels drawn from softmax(x) (or sigmoid(x) for k = 1); the
    classifier `scaled_classifier(k, factor)` is then over-confident by `factor`."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, k)) * 2).astype("float32")
    z = x.astype(np.float64) + noise * rng.normal(size=(n, k))
    if k == 1:
        y = (rng.random(n) < 1 / (1 + np.exp(-z[:, 0]))).astype("int32")
    else:
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        y = (p.cumsum(1) > rng.random((n, 1))).argmax(1).astype("int32")
    return x, y


class _Case(LayerConformanceTestCase):
    def runTest(self):  # noqa: N802 - unittest's name
        pass


def assert_round_trips(wrapper, x):
    """`.keras` (no custom_objects) and SavedModel (TensorFlow) round trips; the reloaded
    wrapper."""
    case = _Case()
    reloaded = case.assert_keras_round_trip(wrapper, x)
    case.assert_saved_model_round_trip(wrapper, x)
    return reloaded


def check_wrapper(cls, fitted_predict, k, kwargs=None, n=1500, atol=2e-5, seed=0):
    """Calibrate `cls` on a drawn problem and check it against `fitted_predict(logits)`,
    the map fitted on the same logits by the method's array function (float64 NumPy).

    Returns the calibrated wrapper.
    """
    kwargs = kwargs or {}
    x, y = draw(seed, n, k)
    model = scaled_classifier(k)
    with pytest.raises(NotCalibratedError, match="not calibrated yet"):
        cls(model, **kwargs)(x[:2])
    wrapper = cls(model, **kwargs).calibrate(x, y, verbose=0)
    logits = 2.5 * x
    served = keras.ops.convert_to_numpy(wrapper(x))
    expected = fitted_predict(logits, y)
    np.testing.assert_allclose(served, expected.reshape(served.shape), atol=atol, rtol=0)
    assert_round_trips(wrapper, x[:32])
    as_logits = cls.from_config({**wrapper.get_config(), "output": "logits"})
    as_logits.set_weights(wrapper.get_weights())
    z = keras.ops.convert_to_numpy(as_logits(x[:64]))
    if k == 1:
        back = 1 / (1 + np.exp(-z.astype(np.float64)))
    else:
        back = np.exp(z - z.max(1, keepdims=True))
        back /= back.sum(1, keepdims=True)
    np.testing.assert_allclose(back, served[:64], atol=1e-5, rtol=0)
    with tempfile.TemporaryDirectory() as tmp:
        unfitted = cls(model, **kwargs)
        unfitted.save(tmp + "/unfitted.keras")
        reloaded = keras.models.load_model(tmp + "/unfitted.keras")
        assert not reloaded.is_calibrated
    return wrapper
