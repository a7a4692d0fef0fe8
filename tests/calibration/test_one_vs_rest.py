"""The one-vs-rest wrappers (`_one_vs_rest.py`, `binning/_lookup.py`) through HistogramBinning /
IsotonicCalibration / PlattScaling: served outputs equal the fit functions', streaming
collection, round trips, NotCalibratedError, bad input."""

import os
import tempfile

import keras
import numpy as np
import pytest

from keras_normkit.calibration import (
    HistogramBinning,
    IsotonicCalibration,
    NotCalibratedError,
    PlattScaling,
    collect,
    fit_histogram_binning,
    fit_isotonic_calibration,
    fit_platt_scaling,
)
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_tensorflow

WRAPPERS = (HistogramBinning, IsotonicCalibration, PlattScaling)


def scaled_classifier(k, factor=2.5, activation=None):
    """A classifier whose logits are factor * x exactly (so NumPy sees the same logits)."""
    layers = [keras.Input((k,)), keras.layers.Rescaling(factor)]
    if activation is not None:
        layers.append(keras.layers.Activation(activation))
    return keras.Sequential(layers)


def problem(seed, n, k):
    """Inputs x (the calibrated logits) and labels drawn from softmax(x) or sigmoid(x)."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, k)) * 1.5).astype("float32")
    if k == 1:
        y = (rng.random(n) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    else:
        p = np.exp(x - x.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        y = (p.cumsum(1) > rng.random((n, 1))).argmax(1).astype("int32")
    return x, y


def graph_columns(model, x):
    """The probabilities the wrappers calibrate, computed with keras.ops as they do."""
    z = model(x)
    p = keras.ops.sigmoid(z) if z.shape[-1] == 1 else keras.ops.softmax(z, axis=-1)
    return keras.ops.convert_to_numpy(p).astype(np.float64)


def expected_output(cls, model, x_fit, y_fit, x, **kwargs):
    """What the fit function on arrays gives for `x` after fitting on (x_fit, y_fit)."""
    if cls is PlattScaling:
        logits = keras.ops.convert_to_numpy(model(x_fit)).astype(np.float64)
        fitted = fit_platt_scaling(logits, y_fit, **kwargs)
        return fitted.predict(keras.ops.convert_to_numpy(model(x)).astype(np.float64))
    fit = fit_histogram_binning if cls is HistogramBinning else fit_isotonic_calibration
    fitted = fit(graph_columns(model, x_fit), y_fit, **kwargs)
    return fitted.predict(graph_columns(model, x))


CASES = [
    (HistogramBinning, {"num_bins": 10}),
    (HistogramBinning, {"num_bins": 8, "strategy": "quantile"}),
    (IsotonicCalibration, {}),
    (PlattScaling, {}),
    (PlattScaling, {"smooth_targets": False}),
]


def _served_outputs_equal_fit_functions():
    for k in (1, 3):
        x, y = problem(k, 3000, k)
        model = scaled_classifier(k)
        seen = set()
        for cls, kwargs in CASES:
            wrapper = cls(model, **kwargs).calibrate(x[:2000], y[:2000], verbose=0)
            served = keras.ops.convert_to_numpy(wrapper(x[2000:]))
            expected = expected_output(cls, model, x[:2000], y[:2000], x[2000:], **kwargs)
            assert served.shape == (1000, k)
            np.testing.assert_allclose(served, expected, atol=2e-6, err_msg=f"{cls} {k}")
            if k > 1:
                np.testing.assert_allclose(served.sum(1), 1.0, atol=1e-5)
            # The fitted map read back from the weights gives the same outputs in NumPy.
            mapped = wrapper.calibration_map_.predict(
                keras.ops.convert_to_numpy(model(x[2000:])).astype(np.float64)
                if cls is PlattScaling
                else graph_columns(model, x[2000:])
            )
            np.testing.assert_allclose(served, mapped, atol=2e-6)
            if cls in seen:  # once per class below: each compiled predict costs seconds on JAX
                continue
            seen.add(cls)
            predicted = wrapper.predict(x[2000:], verbose=0, batch_size=256)
            np.testing.assert_allclose(predicted, expected, atol=1e-3)  # compiled: ulps apart
            # output="logits": softmax/sigmoid of them gives the calibrated probabilities.
            logits = cls(model, output="logits", **kwargs)
            logits.calibrate(x[:2000], y[:2000], verbose=0)
            z = logits(x[2000:])
            back = keras.ops.sigmoid(z) if k == 1 else keras.ops.softmax(z, axis=-1)
            np.testing.assert_allclose(keras.ops.convert_to_numpy(back), served, atol=1e-5)


def _binary_platt_logits_are_exact_and_probability_models_work():
    x, y = problem(0, 2000, 1)
    platt = PlattScaling(scaled_classifier(1), output="logits").calibrate(x, y, verbose=0)
    fitted = platt.calibration_map_
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(platt(x)),
        2.5 * x * fitted.scale[0] + fitted.bias[0],
        rtol=1e-6,
        atol=1e-6,
    )
    assert fitted.scale[0] == pytest.approx(1 / 2.5, rel=0.1)
    # A softmax model: its logits are recovered as log-probabilities (with a warning).
    x, y = problem(1, 2000, 3)
    with pytest.warns(UserWarning, match="log-probabilities"):
        wrapper = IsotonicCalibration(scaled_classifier(3, activation="softmax"))
    wrapper.calibrate(x, y, verbose=0)
    reference = IsotonicCalibration(scaled_classifier(3)).calibrate(x, y, verbose=0)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(wrapper(x[:200])),
        keras.ops.convert_to_numpy(reference(x[:200])),
        atol=1e-4,
    )


def _isotonic_weights_are_sized_once(tmp_path):
    x, y = problem(2, 20_000, 3)
    model = scaled_classifier(3)
    wrapper = IsotonicCalibration(model).calibrate(x[:2000], y[:2000], verbose=0)
    needed = max(len(t) for t in wrapper.calibration_map_.x_thresholds)
    assert wrapper.num_breakpoints == 2 * max(2, needed)  # room to recalibrate
    assert wrapper.x_thresholds.shape == (3, wrapper.num_breakpoints)
    first = wrapper.predict(x[:8], verbose=0)
    wrapper.calibrate(x[2000:4000], y[2000:4000], verbose=0)  # similar data: same weights
    expected = expected_output(IsotonicCalibration, model, x[2000:4000], y[2000:4000], x[:8])
    np.testing.assert_allclose(wrapper.predict(x[:8], verbose=0), expected, atol=1e-5)
    assert np.abs(first - expected).max() > 1e-4
    with pytest.raises(ValueError, match=r"needs \d+ breakpoints.*num_breakpoints=\d+"):
        wrapper.calibrate(x, y, verbose=0)  # 10x the data: more breakpoints than room
    # Built before calibrating (here by a call that raised NotCalibratedError): 1024.
    built = IsotonicCalibration(model)
    with pytest.raises(NotCalibratedError):
        built(x[:2])
    built.calibrate(x, y, verbose=0)
    assert built.num_breakpoints == 1024
    expected = expected_output(IsotonicCalibration, model, x, y, x[:8])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(built(x[:8])), expected, atol=2e-6)
    built.save(tmp_path / "isotonic.keras")
    reloaded = keras.models.load_model(tmp_path / "isotonic.keras")
    assert reloaded.num_breakpoints == 1024
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(x[:8])), expected, atol=2e-6)


def _zero_rows_are_uniform_in_the_graph():
    x, y = problem(8, 1000, 3)
    wrapper = IsotonicCalibration(scaled_classifier(3)).calibrate(x, y, verbose=0)
    weights = wrapper.get_weights()
    weights[-1] = np.zeros_like(weights[-1])  # y_thresholds: every class maps to 0
    wrapper.set_weights(weights)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(wrapper(x[:4])), 1 / 3, atol=1e-7)


def test_wrapper_math(tmp_path):
    """The checks below, run in turn (each is a function of this module)."""
    _served_outputs_equal_fit_functions()
    _binary_platt_logits_are_exact_and_probability_models_work()
    _isotonic_weights_are_sized_once(tmp_path)
    _zero_rows_are_uniform_in_the_graph()


# ---------------------------------------------------------------------------------------
# Streaming: collect_logits batch by batch, spilled to a memmap beyond the budget.
# ---------------------------------------------------------------------------------------


def test_spilled_collection_gives_the_same_maps(tmp_path, monkeypatch):
    x, y = problem(3, 6000, 4)
    model = scaled_classifier(4)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spilled = []
    finish = collect._Store.finish

    def recording_finish(store):
        result = finish(store)
        spilled.append(result.spilled)
        return result

    monkeypatch.setattr(collect._Store, "finish", recording_finish)
    for cls, kwargs in CASES[:4]:
        in_memory = cls(model, **kwargs).calibrate(x, y, verbose=0)
        # 6000 x 4 float32 logits + labels = 120 kB: a 30 kB budget spills to disk.
        streamed = cls(model, **kwargs).calibrate(
            x, y, verbose=0, batch_size=500, max_memory_bytes=30_000
        )
        for a, b in zip(in_memory.get_weights(), streamed.get_weights(), strict=True):
            np.testing.assert_array_equal(a, b)
    assert spilled == [False, True] * 4
    assert os.listdir(tmp_path) == []  # the spill files are gone


@requires_tensorflow
def test_tf_data_streaming_equals_arrays():
    import tensorflow as tf

    x, y = problem(4, 3000, 3)
    model = scaled_classifier(3)
    dataset = tf.data.Dataset.from_tensor_slices((x, np.eye(3)[y])).batch(128)
    unknown_length = dataset.filter(lambda a, b: True)
    for cls, kwargs in CASES[:4]:
        expected = cls(model, **kwargs).calibrate(x, y, verbose=0).get_weights()
        for data in (dataset, unknown_length):
            got = cls(model, **kwargs).calibrate(data, verbose=0).get_weights()
            for a, b in zip(expected, got, strict=True):
                np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# Round trips (.keras without custom_objects; SavedModel on TensorFlow).
# ---------------------------------------------------------------------------------------


class RoundTripTest(LayerConformanceTestCase):
    def _round_trip(self, cls, k, **kwargs):
        x, y = problem(5, 1500, k)
        wrapper = cls(scaled_classifier(k), **kwargs).calibrate(x, y, verbose=0)
        reloaded = self.assert_keras_round_trip(wrapper, x[:64])
        self.assertIsInstance(reloaded, cls)
        ours = {k: v for k, v in wrapper.get_config().items() if k != "model"}
        self.assertEqual({k: reloaded.get_config()[k] for k in ours}, ours)
        self.assert_saved_model_round_trip(wrapper, x[:64])
        return wrapper, reloaded

    def test_histogram_binning_round_trips(self):
        _, reloaded = self._round_trip(HistogramBinning, 3, num_bins=6, strategy="quantile")
        self.assertEqual((reloaded.num_bins, reloaded.strategy), (6, "quantile"))
        self._round_trip(HistogramBinning, 1, output="logits", min_samples_per_bin=5)

    def test_isotonic_calibration_round_trips(self):
        wrapper, reloaded = self._round_trip(IsotonicCalibration, 3)
        self.assertGreater(wrapper.num_breakpoints, 2)
        self.assertEqual(reloaded.num_breakpoints, wrapper.num_breakpoints)
        self._round_trip(IsotonicCalibration, 1)

    def test_platt_scaling_round_trips(self):
        _, reloaded = self._round_trip(PlattScaling, 3, smooth_targets=False)
        self.assertFalse(reloaded.smooth_targets)
        self._round_trip(PlattScaling, 1, output="logits")


# ---------------------------------------------------------------------------------------
# Before calibrate; bad input.
# ---------------------------------------------------------------------------------------

NOT_CALIBRATED = r"is not calibrated yet.*call `calibrate\(x_val, y_val\)`"


def _uncalibrated_wrappers_refuse(tmp_path):
    x, y = problem(6, 400, 3)
    for cls in WRAPPERS:
        wrapper = cls(scaled_classifier(3), **({"num_bins": 5} if cls is HistogramBinning else {}))
        with pytest.raises(NotCalibratedError, match=cls.__name__ + ".*" + NOT_CALIBRATED):
            wrapper(x)
        with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
            wrapper.predict(x, verbose=0)
        with pytest.raises(NotCalibratedError, match="fitted map"):
            _ = wrapper.calibration_map_
        assert not hasattr(wrapper, "calibration_map_")
        if keras.backend.backend() == "tensorflow":
            with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
                wrapper.export(str(tmp_path / f"{cls.__name__}_uncalibrated"), verbose=False)
        # Saved before calibration: reloads uncalibrated, then calibrates.
        wrapper.save(tmp_path / f"{cls.__name__}.keras")
        reloaded = keras.models.load_model(tmp_path / f"{cls.__name__}.keras")
        assert not reloaded.is_calibrated
        reloaded.calibrate(x, y, verbose=0)
        assert reloaded.is_calibrated and reloaded(x[:2]).shape == (2, 3)


def _bad_constructor_arguments():
    model = scaled_classifier(3)
    cases = [
        (HistogramBinning, {"num_bins": 0}, ValueError, "num_bins"),
        (HistogramBinning, {"num_bins": 3.0}, TypeError, "num_bins"),
        (HistogramBinning, {"strategy": "equal"}, ValueError, "strategy"),
        (HistogramBinning, {"min_samples_per_bin": -2}, ValueError, "min_samples_per_bin"),
        (IsotonicCalibration, {"num_breakpoints": 1}, ValueError, "num_breakpoints"),
        (IsotonicCalibration, {"num_breakpoints": "9"}, TypeError, "num_breakpoints"),
        (PlattScaling, {"smooth_targets": "yes"}, TypeError, "smooth_targets"),
        (PlattScaling, {"output": "scores"}, ValueError, "`output`"),
    ]
    for cls, kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            cls(model, **kwargs)
    with pytest.raises(TypeError, match="keras.Model"):
        IsotonicCalibration(keras.layers.Dense(3))


def _bad_calibration_data():
    x, y = problem(7, 300, 3)
    nan_x = np.where(np.eye(300, 3) > 0, np.nan, x).astype("float32")
    for cls in WRAPPERS:
        wrapper = cls(scaled_classifier(3))
        for (inputs, labels), match in [
            ((nan_x, y), "finite"),
            ((x, np.full(300, 3)), r"\[0, 2\]"),
            ((x, y[:-1]), "same number of examples"),
            ((x[:0], y[:0]), "empty"),
            ((x, np.ones(300, int)), "needs held-out examples of at least two classes"),
        ]:
            with pytest.raises(ValueError, match=match):
                wrapper.calibrate(inputs, labels, verbose=0)
        assert not wrapper.is_calibrated
    # Too few examples per bin: a clear error, never NaN.
    with pytest.raises(ValueError, match="min_samples_per_bin=50.*bin"):
        HistogramBinning(scaled_classifier(3), min_samples_per_bin=50).calibrate(x, y, verbose=0)
    with pytest.raises(ValueError, match="separate"):
        PlattScaling(scaled_classifier(1), smooth_targets=False).calibrate(
            x[:, :1], (x[:, 0] > 0).astype(int), verbose=0
        )


def test_not_calibrated_and_bad_input(tmp_path):
    """The checks below, run in turn (each is a function of this module)."""
    _uncalibrated_wrappers_refuse(tmp_path)
    _bad_constructor_arguments()
    _bad_calibration_data()
