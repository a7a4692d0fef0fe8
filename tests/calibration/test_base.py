"""The machinery every wrapper shares (`base.py`: logits recovery, `calibrate` from arrays,
tf.data and spilled memmaps, NotCalibratedError, round trips, bad input), through
TemperatureScaling / VectorScaling / MatrixScaling, and their math on a digits MLP."""

import os
import tempfile
import warnings

import keras
import numpy as np
import pytest
from sklearn.calibration import _TemperatureScaling
from sklearn.datasets import load_digits

from keras_normkit.calibration import (
    MatrixScaling,
    MatrixScalingMap,
    NotCalibratedError,
    TemperatureScaling,
    TemperatureScalingMap,
    VectorScaling,
    VectorScalingMap,
    expected_calibration_error,
    fit_temperature,
    negative_log_likelihood,
)
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_tensorflow


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def linear_classifier(kernel, bias, activation=None):
    """A Dense classifier with fixed weights (its logits are x @ kernel + bias)."""
    kernel = np.asarray(kernel, "float32")
    model = keras.Sequential(
        [keras.Input((kernel.shape[0],)), keras.layers.Dense(kernel.shape[1], activation)]
    )
    model.layers[0].set_weights([kernel, np.asarray(bias, "float32")])
    return model


def overconfident_problem(seed=0, n=4000, k=5, factor=2.5):
    """Inputs x whose calibrated logits are x itself; a classifier outputting factor * x."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, k)) * 2).astype("float32")
    y = (softmax(x.astype(float)).cumsum(1) > rng.random((n, 1))).argmax(1)
    return x, y, np.eye(k) * factor, np.zeros(k)


@pytest.fixture(scope="module")
def digits_mlp():
    """An over-fit MLP on 300 digits, with 600 validation and 897 test digits."""
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        keras.optimizers.Adam(3e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x[:300], y[:300], epochs=60, batch_size=100, verbose=0)
    return model, (x[300:900], y[300:900]), (x[900:], y[900:])


# ---------------------------------------------------------------------------------------
# The digits MLP (acceptance: NLL and ECE fall, argmax unchanged, sklearn agreement).
# ---------------------------------------------------------------------------------------


def test_digits_mlp(digits_mlp):
    model, (x_val, y_val), (x_test, y_test) = digits_mlp
    val_logits = model.predict(x_val, verbose=0).astype(np.float64)
    test_logits = model.predict(x_test, verbose=0)
    expected_t = 1.0 / float(_TemperatureScaling().fit(val_logits, y_val).beta_)
    assert fit_temperature(val_logits, y_val).temperature == pytest.approx(expected_t, rel=1e-4)

    before_nll = negative_log_likelihood(test_logits, y_test, from_logits=True)
    before_ece = expected_calibration_error(softmax(test_logits), y_test)
    temperature = TemperatureScaling(model).calibrate(x_val, y_val, verbose=0)
    assert temperature.temperature_ == pytest.approx(expected_t, rel=1e-4)
    assert temperature.temperature_ > 1.0  # an over-fit network is over-confident
    probabilities = keras.ops.convert_to_numpy(temperature(x_test))
    np.testing.assert_array_equal(probabilities.argmax(1), test_logits.argmax(1))
    after_nll = negative_log_likelihood(probabilities, y_test)
    after_ece = expected_calibration_error(probabilities, y_test)
    # ECE on ~900 digits is noisy (it rose on some splits we tried): report it, assert NLL.
    assert after_nll < before_nll
    report = {"uncalibrated": (before_nll, before_ece), "temperature": (after_nll, after_ece)}
    for name, wrapper in [("vector", VectorScaling(model)), ("matrix", MatrixScaling(model))]:
        p = keras.ops.convert_to_numpy(wrapper.calibrate(x_val, y_val, verbose=0)(x_test))
        report[name] = (negative_log_likelihood(p, y_test), expected_calibration_error(p, y_test))
        assert report[name][0] < before_nll, (name, report)
    print({k: f"NLL {v[0]:.4f} ECE {100 * v[1]:.2f} %" for k, v in report.items()})


# ---------------------------------------------------------------------------------------
# Math of the wrappers.
# ---------------------------------------------------------------------------------------


def _temperature_wrapper_recovers_known_miscalibration():
    x, y, kernel, bias = overconfident_problem()
    model = linear_classifier(kernel, bias)
    wrapper = TemperatureScaling(model).calibrate(x, y, verbose=0, batch_size=512)
    assert wrapper.temperature_ == pytest.approx(2.5, rel=0.05)
    assert wrapper.temperature_ == pytest.approx(fit_temperature(2.5 * x, y).temperature, rel=1e-5)
    expected = softmax(2.5 * x.astype(float) / wrapper.temperature_)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(wrapper(x)), expected, atol=1e-5)
    logits = TemperatureScaling(model, output="logits")
    logits.set_weights(wrapper.get_weights())  # a map fitted elsewhere counts as calibrated
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(logits(x)), 2.5 * x / wrapper.temperature_, rtol=1e-5
    )


def _vector_and_matrix_wrappers_apply_their_maps():
    x, y, kernel, bias = overconfident_problem(k=4)
    model = linear_classifier(kernel, bias)
    vector = VectorScaling(model, output="logits").calibrate(x, y, verbose=0)
    w, b = (keras.ops.convert_to_numpy(v) for v in (vector.scale, vector.bias))
    np.testing.assert_allclose(w, 0.4, rtol=0.1)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(vector(x)), 2.5 * x * w + b, atol=1e-4)
    matrix = MatrixScaling(model, output="logits").calibrate(x, y, verbose=0)
    a, b = (keras.ops.convert_to_numpy(v) for v in (matrix.kernel, matrix.bias))
    np.testing.assert_allclose(np.diag(a), 0.4, rtol=0.1)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(matrix(x)), 2.5 * x @ a + b, atol=1e-4)
    # The served map is the wrapper's `calibration_map_`: its `predict` gives the same.
    temperature = TemperatureScaling(model).calibrate(x, y, verbose=0)
    for wrapper, map_class in (
        (temperature, TemperatureScalingMap),
        (VectorScaling(model).calibrate(x, y, verbose=0), VectorScalingMap),
        (MatrixScaling(model).calibrate(x, y, verbose=0), MatrixScalingMap),
    ):
        fitted = wrapper.calibration_map_
        assert isinstance(fitted, map_class)
        served = keras.ops.convert_to_numpy(wrapper(x))
        np.testing.assert_allclose(fitted.predict(2.5 * x), served, atol=1e-5)
    assert temperature.calibration_map_.temperature == temperature.temperature_


def _softmax_model_is_calibrated_through_log_probabilities():
    x, y, kernel, bias = overconfident_problem()
    logits_model = linear_classifier(kernel, bias)
    softmax_model = linear_classifier(kernel, bias, activation="softmax")
    with pytest.warns(UserWarning, match="log-probabilities"):
        wrapper = TemperatureScaling(softmax_model)
    assert wrapper.model_output == "probabilities"
    wrapper.calibrate(x, y, verbose=0)
    reference = TemperatureScaling(logits_model).calibrate(x, y, verbose=0)
    assert wrapper.temperature_ == pytest.approx(reference.temperature_, rel=1e-4)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(wrapper(x)), keras.ops.convert_to_numpy(reference(x)), atol=1e-5
    )


def _binary_sigmoid_and_logit_models():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 1)).astype("float32") * 2
    y = (rng.random(3000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    logit_model = linear_classifier([[3.0]], [0.0])
    sigmoid_model = linear_classifier([[3.0]], [0.0], activation="sigmoid")
    reference = fit_temperature(3.0 * x, y).temperature
    assert reference == pytest.approx(3.0, rel=0.1)
    logit_wrapper = TemperatureScaling(logit_model).calibrate(x, y, verbose=0)
    with pytest.warns(UserWarning, match="log-probabilities"):
        sigmoid_wrapper = TemperatureScaling(sigmoid_model)
    sigmoid_wrapper.calibrate(x, y, verbose=0)
    assert logit_wrapper.temperature_ == pytest.approx(reference, rel=1e-4)
    # float32 sigmoid saturates to 1 for z > ~17: those logits are only recovered as 87.
    assert sigmoid_wrapper.temperature_ == pytest.approx(reference, rel=1e-3)
    # float32 p = sigmoid(z) resolves 1 - p only to ~6e-8: logits are exact for |z| < ~8.
    unsaturated = np.abs(3.0 * x[:, 0]) < 8
    for wrapper, rows in ((logit_wrapper, slice(None)), (sigmoid_wrapper, unsaturated)):
        p = keras.ops.convert_to_numpy(wrapper(x))
        assert p.shape == (3000, 1)
        expected = 1 / (1 + np.exp(-3.0 * x / wrapper.temperature_))
        np.testing.assert_allclose(p[rows], expected[rows], atol=1e-5)
    platt = VectorScaling(logit_model).calibrate(x, y, verbose=0)
    assert keras.ops.convert_to_numpy(platt.scale)[0] * 3.0 == pytest.approx(1.0, rel=0.1)


@requires_tensorflow
def test_tf_data_input_equals_arrays_and_one_hot_labels():
    import tensorflow as tf

    x, y, kernel, bias = overconfident_problem(n=1000)
    model = linear_classifier(kernel, bias)
    expected = TemperatureScaling(model).calibrate(x, y, verbose=0).temperature_
    dataset = tf.data.Dataset.from_tensor_slices((x, np.eye(5)[y])).batch(64)
    got = TemperatureScaling(model).calibrate(dataset, verbose=0).temperature_
    assert got == pytest.approx(expected, rel=1e-6)
    unknown_length = dataset.filter(lambda a, b: True)  # cardinality unknown: no target
    got = TemperatureScaling(model).calibrate(unknown_length, verbose=0).temperature_
    assert got == pytest.approx(expected, rel=1e-6)


def test_spill_to_disk_gives_the_same_result_and_cleans_up(tmp_path, monkeypatch):
    x, y, kernel, bias = overconfident_problem(n=3000)
    model = linear_classifier(kernel, bias)
    expected = TemperatureScaling(model).calibrate(x, y, verbose=0).temperature_
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from keras_normkit.calibration import collect

    seen = []
    original = collect._Store.finish

    def finish(store):
        result = original(store)
        seen.append((result.spilled, sorted(os.listdir(tmp_path))))
        return result

    monkeypatch.setattr(collect._Store, "finish", finish)
    # 3000 x 5 float32 logits + int32 labels = 72 kB: a 20 kB budget spills.
    wrapper = TemperatureScaling(model).calibrate(
        x, y, verbose=0, batch_size=100, max_memory_bytes=20_000
    )
    assert wrapper.temperature_ == pytest.approx(expected, rel=1e-6)
    assert seen[0][0] and len(seen[0][1]) == 2  # logits and labels files existed
    assert os.listdir(tmp_path) == []  # and were removed
    TemperatureScaling(model).calibrate(x, y, verbose=0, max_memory_bytes=10**9)
    assert seen[1] == (False, [])


# ---------------------------------------------------------------------------------------
# Round trips.
# ---------------------------------------------------------------------------------------


class RoundTripTest(LayerConformanceTestCase):
    def _calibrated(self, cls, **kwargs):
        x, y, kernel, bias = overconfident_problem(n=500, k=4)
        model = linear_classifier(kernel + 0.1, bias + 0.2)
        return cls(model, **kwargs).calibrate(x, y, verbose=0), x[:16]

    def test_temperature_scaling_round_trips(self):
        wrapper, x = self._calibrated(TemperatureScaling)
        reloaded = self.assert_keras_round_trip(wrapper, x)
        self.assertIsInstance(reloaded, TemperatureScaling)
        assert reloaded.temperature_ == pytest.approx(wrapper.temperature_, rel=1e-7)
        assert abs(wrapper.temperature_ - 1.0) > 0.1  # a fitted T, not the initial 1
        self.assert_saved_model_round_trip(wrapper, x)

    def test_vector_scaling_round_trips(self):
        wrapper, x = self._calibrated(VectorScaling, output="logits")
        reloaded = self.assert_keras_round_trip(wrapper, x)
        self.assertEqual(reloaded.output_type, "logits")
        self.assert_saved_model_round_trip(wrapper, x)

    def test_matrix_scaling_round_trips(self):
        wrapper, x = self._calibrated(MatrixScaling, l2=0.01)
        reloaded = self.assert_keras_round_trip(wrapper, x)
        self.assertEqual(reloaded.l2, 0.01)
        self.assert_saved_model_round_trip(wrapper, x)

    def test_probability_model_round_trip_keeps_resolved_output_and_does_not_warn(self):
        x, y, kernel, bias = overconfident_problem(n=500, k=3)
        model = linear_classifier(kernel, bias, activation="softmax")
        wrapper = TemperatureScaling(model, model_output="probabilities")
        wrapper.calibrate(x, y, verbose=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            reloaded = self.assert_keras_round_trip(wrapper, x[:8])
        self.assertEqual(reloaded.model_output, "probabilities")
        config = wrapper.get_config()
        self.assertEqual(TemperatureScaling.from_config(config).get_config(), config)


def _subclassed_model_builds_weights_lazily():
    class Classifier(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(3)

        def call(self, x):
            return self.dense(x)

    x, y, _, _ = overconfident_problem(n=300, k=3)
    classifier = Classifier()
    classifier(x[:2])
    classifier.dense.set_weights([np.eye(3, dtype="float32") * 2.5, np.zeros(3, "float32")])
    wrapper = MatrixScaling(classifier)
    wrapper.build(x[:2].shape)  # weights created by build(), before calibration
    assert keras.ops.convert_to_numpy(wrapper.kernel).shape == (3, 3)
    wrapper.calibrate(x, y, verbose=0)
    assert wrapper(x[:2]).shape == (2, 3)
    assert keras.ops.convert_to_numpy(wrapper.kernel).shape == (3, 3)
    unbuilt = VectorScaling(Classifier())
    unbuilt.calibrate(x, y, verbose=0)  # weights created from the collected logits
    assert keras.ops.convert_to_numpy(unbuilt.scale).shape == (3,)


# ---------------------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------------------


def _bad_constructor_arguments():
    model = linear_classifier(np.eye(3), np.zeros(3))
    with pytest.raises(TypeError, match="`model` must be a trained keras.Model.*of type Dense"):
        TemperatureScaling(keras.layers.Dense(3))
    with pytest.raises(ValueError, match="`output` must be one of 'probabilities', 'logits'"):
        TemperatureScaling(model, output="proba")
    with pytest.raises(TypeError, match="`output`.*Received: output=1 of type int"):
        TemperatureScaling(model, output=1)
    with pytest.raises(ValueError, match="`model_output`"):
        TemperatureScaling(model, model_output="scores")
    with pytest.raises(TypeError, match="`model_output`"):
        TemperatureScaling(model, model_output=None)
    with pytest.raises(ValueError, match="l2"):
        MatrixScaling(model, l2=-0.5)
    inputs = keras.Input((3,))
    two_outputs = keras.Model(
        inputs, [keras.layers.Dense(2)(inputs), keras.layers.Dense(2)(inputs)]
    )
    with pytest.raises(ValueError, match="single output"):
        TemperatureScaling(two_outputs)
    with pytest.raises(ValueError, match="single unit"), pytest.warns(UserWarning):
        TemperatureScaling(linear_classifier(np.ones((3, 1)), [0.0], activation="softmax"))
    flat = keras.Model(inputs, keras.layers.Reshape(())(keras.layers.Dense(1)(inputs)))
    with pytest.raises(ValueError, match="num_classes"):
        VectorScaling(flat)


def _bad_calibration_data():
    x, y, kernel, bias = overconfident_problem(n=100, k=3)
    model = linear_classifier(kernel, bias)
    wrapper = TemperatureScaling(model)
    cases = [
        ((x, None), "`y`"),
        ((x, y[:-1]), "same number of examples"),
        ((x, np.full(100, 3)), r"\[0, 2\]"),
        ((x, y.astype(float) + 0.5), "integers"),
        ((x[:0], y[:0]), "empty"),
        ((np.where(np.eye(100, 3) > 0, np.nan, x).astype("float32"), y), "finite"),
        ((x, np.full(100, 2)), "Temperature scaling needs .* two classes.*all of class 2"),
    ]
    for (inputs, labels), match in cases:
        with pytest.raises(ValueError, match=match):
            wrapper.calibrate(inputs, labels, verbose=0)
    for kwargs, error, match in [
        ({"max_memory_bytes": 0}, ValueError, r"`max_memory_bytes` must be an integer >= 1"),
        ({"max_memory_bytes": 2.0**20}, TypeError, r"max_memory_bytes=1048576.0 of type float"),
        ({"batch_size": 0}, ValueError, r"`batch_size` must be an integer >= 1"),
        ({"batch_size": "32"}, TypeError, r"batch_size='32' of type str"),
        ({"verbose": "loud"}, ValueError, r"`verbose` must be one of 'auto', 0, 1, 2"),
    ]:
        with pytest.raises(error, match=match):
            wrapper.calibrate(x, y, **{"verbose": 0, **kwargs})
    for cls in (VectorScaling, MatrixScaling):  # one class: no finite optimum
        with pytest.raises(ValueError, match="scaling needs .* two classes"):
            cls(model).calibrate(x, np.zeros(100, int), verbose=0)
    assert not wrapper.is_calibrated  # nothing was fitted
    with pytest.raises(NotCalibratedError, match="calibrate"):
        _ = wrapper.temperature_


@requires_tensorflow
def test_bad_datasets():
    import tensorflow as tf

    x, y, kernel, bias = overconfident_problem(n=64, k=3)
    wrapper = TemperatureScaling(linear_classifier(kernel, bias))
    with pytest.raises(ValueError, match=r"\(x, y\) pairs"):
        wrapper.calibrate(tf.data.Dataset.from_tensor_slices(x).batch(8), verbose=0)
    with pytest.raises(ValueError, match="empty"):
        empty = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).take(0)
        wrapper.calibrate(empty, verbose=0)
    with pytest.raises(ValueError, match="`y` must be None"):
        wrapper.calibrate(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), y, verbose=0)


def test_bad_input():
    """The checks below, run in turn (each is a function of this module)."""
    _bad_constructor_arguments()
    _bad_calibration_data()


def test_wrapper_math():
    """The checks below, run in turn (each is a function of this module)."""
    _temperature_wrapper_recovers_known_miscalibration()
    _vector_and_matrix_wrappers_apply_their_maps()
    _softmax_model_is_calibrated_through_log_probabilities()
    _binary_sigmoid_and_logit_models()
    _subclassed_model_builds_weights_lazily()


# ---------------------------------------------------------------------------------------
# Used before `calibrate`: NotCalibratedError, not a silent identity map.
# ---------------------------------------------------------------------------------------

WRAPPERS = (TemperatureScaling, VectorScaling, MatrixScaling)
NOT_CALIBRATED = r"is not calibrated yet.*call `calibrate\(x_val, y_val\)`"


def _uncalibrated_wrappers_refuse_to_predict(tmp_path):
    x, y, kernel, bias = overconfident_problem(n=32, k=3)
    for cls in WRAPPERS:
        wrapper = cls(linear_classifier(kernel, bias))
        assert not wrapper.is_calibrated
        with pytest.raises(NotCalibratedError, match=cls.__name__ + ".*" + NOT_CALIBRATED):
            wrapper(x)
        with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
            wrapper.predict(x, verbose=0)
        with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
            wrapper.evaluate(x, y, verbose=0)
        # The refusals left the classifier intact (on JAX a trace-time error would not).
        np.testing.assert_allclose(
            wrapper.classifier.predict(x[:4], verbose=0),
            x[:4] @ kernel + bias,
            rtol=1e-4,
            atol=1e-5,
        )
        if keras.backend.backend() == "tensorflow":
            with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
                wrapper.export(str(tmp_path / f"{cls.__name__}_uncalibrated"), verbose=False)
        with pytest.raises(NotCalibratedError, match="fitted map.*calibrate"):
            _ = wrapper.calibration_map_
    # As scikit-learn's NotFittedError: both a ValueError and an AttributeError.
    assert issubclass(NotCalibratedError, ValueError)
    assert issubclass(NotCalibratedError, AttributeError)
    wrapper = TemperatureScaling(linear_classifier(kernel, bias))
    assert not hasattr(wrapper, "temperature_")
    with pytest.raises(NotCalibratedError, match="fitted temperature.*calibrate"):
        _ = wrapper.temperature_


def _uncalibrated_wrappers_still_build_and_wire_into_models():
    x, y, kernel, bias = overconfident_problem(n=400, k=3)
    for cls in WRAPPERS:
        wrapper = cls(linear_classifier(kernel, bias))
        wrapper.build((None, 3))
        assert wrapper.built and len(wrapper.non_trainable_weights) >= 1
        inputs = keras.Input((3,))
        outputs = wrapper(inputs)  # symbolic: no prediction is made
        assert tuple(outputs.shape) == (None, 3)
        served = keras.Model(inputs, outputs)
        with pytest.raises(NotCalibratedError):
            if keras.backend.backend() == "jax":
                # Keras's JAX `predict` detaches the model's variable values for its loop and
                # reattaches them at the end, so an error raised while tracing loses them (a
                # Keras behaviour for any error; documented in the wrappers' module
                # docstring); the eager call shows the same refusal without that side effect.
                served(x[:4])
            else:
                served.predict(x[:4], verbose=0)
        wrapper.calibrate(x, y, verbose=0)
        assert wrapper.is_calibrated
        np.testing.assert_allclose(
            served.predict(x[:4], verbose=0), keras.ops.convert_to_numpy(wrapper(x[:4])), atol=1e-6
        )


def _calibration_state_survives_saving(tmp_path):
    x, y, kernel, bias = overconfident_problem(n=400, k=3)
    calibrated = TemperatureScaling(linear_classifier(kernel, bias)).calibrate(x, y, verbose=0)
    expected = keras.ops.convert_to_numpy(calibrated(x[:8]))
    calibrated.save(tmp_path / "calibrated.keras")
    reloaded = keras.models.load_model(tmp_path / "calibrated.keras")
    assert reloaded.is_calibrated
    assert reloaded.temperature_ == pytest.approx(calibrated.temperature_)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(x[:8])), expected, atol=1e-6)
    # Weights files carry the flag too.
    calibrated.save_weights(tmp_path / "calibrated.weights.h5")
    fresh = TemperatureScaling(linear_classifier(kernel, bias))
    fresh.build((None, 3))
    fresh.load_weights(tmp_path / "calibrated.weights.h5")
    assert fresh.is_calibrated and fresh.temperature_ == pytest.approx(calibrated.temperature_)
    # A wrapper saved before calibration reloads uncalibrated: it still refuses to predict.
    for cls in (TemperatureScaling, MatrixScaling):
        uncalibrated = cls(linear_classifier(kernel, bias))
        uncalibrated.save(tmp_path / f"uncalibrated_{cls.__name__}.keras")
        reloaded = keras.models.load_model(tmp_path / f"uncalibrated_{cls.__name__}.keras")
        assert not reloaded.is_calibrated
        with pytest.raises(NotCalibratedError, match=NOT_CALIBRATED):
            reloaded(x[:2])
        reloaded.calibrate(x, y, verbose=0)
        assert reloaded.is_calibrated
    # Files written before the flag existed only held calibrated wrappers.
    old_format = {"0": np.array(1.7, "float32")}
    legacy = TemperatureScaling(linear_classifier(kernel, bias))
    legacy.load_own_variables(old_format)
    assert legacy.is_calibrated and legacy.temperature_ == pytest.approx(1.7)
    # `from_config`/`clone_model` give a new, uncalibrated wrapper (weights are not config).
    clone = TemperatureScaling.from_config(calibrated.get_config())
    assert not clone.is_calibrated


def test_not_calibrated(tmp_path):
    """The checks below, run in turn (each is a function of this module)."""
    _uncalibrated_wrappers_refuse_to_predict(tmp_path)
    _uncalibrated_wrappers_still_build_and_wire_into_models()
    _calibration_state_survives_saving(tmp_path)
