"""The wrappers and the metric on the JAX backend, in a subprocess (slow)."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, tempfile
    os.environ["KERAS_BACKEND"] = "jax"
    import keras, numpy as np
    from keras_normkit.calibration import (
        MatrixScaling, TemperatureScaling, VectorScaling, expected_calibration_error,
        fit_temperature)
    from keras_normkit.metrics import ExpectedCalibrationError

    assert keras.backend.backend() == "jax"
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(2000, 4)) * 2).astype("float32")
    p = np.exp(x - x.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    y = (p.cumsum(1) > rng.random((2000, 1))).argmax(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Rescaling(2.5)])
    for cls in (TemperatureScaling, VectorScaling, MatrixScaling):
        wrapper = cls(model).calibrate(x, y, verbose=0)
        out = keras.ops.convert_to_numpy(wrapper(x[:16]))
        with tempfile.TemporaryDirectory() as tmp:
            wrapper.save(tmp + "/m.keras")
            reloaded = keras.models.load_model(tmp + "/m.keras")
        np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(x[:16])), out, atol=1e-6)
    wrapper = TemperatureScaling(model).calibrate(x, y, verbose=0)
    t = fit_temperature(2.5 * x, y).temperature
    assert abs(wrapper.temperature_ - t) < 1e-5 * t, (wrapper.temperature_, t)
    z = 2.5 * x.astype(float) / wrapper.temperature_
    expected = np.exp(z - z.max(1, keepdims=True)); expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(wrapper(x)), expected, atol=1e-5)
    wrapper.compile(loss="sparse_categorical_crossentropy", metrics=[ExpectedCalibrationError()])
    ece = wrapper.evaluate(x, y, verbose=0, return_dict=True)["expected_calibration_error"]
    reference = expected_calibration_error(wrapper.predict(x, verbose=0), y)
    assert abs(ece - reference) < 1e-5, (ece, reference)
    print("OK")
    """
)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_wrappers_and_metric_on_jax():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": root}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]
