"""ExpectedCalibrationError: the streaming metric equals the array function."""

import os
import tempfile

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.calibration import TemperatureScaling, expected_calibration_error
from keras_normkit.metrics import ExpectedCalibrationError
from tests.conftest import max_examples, requires_tensorflow


def random_probabilities(seed, n, k, sharpness=3.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * sharpness
    p = np.exp(z - z.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)).astype("float32"), rng.integers(0, k, size=n)


def _hand_computed_example():
    metric = ExpectedCalibrationError(num_bins=5)
    metric.update_state([0, 1], np.array([[0.9, 0.1], [0.9, 0.1]]))
    metric.update_state([0, 1], np.array([[0.6, 0.4], [0.3, 0.7]]))
    # 2/4 * |0.5 - 0.9| + 1/4 * |1 - 0.6| + 1/4 * |1 - 0.7| (0.6 is in bin (0.4, 0.6]).
    assert float(metric.result()) == pytest.approx(0.375, abs=1e-6)
    metric.reset_state()
    assert float(metric.result()) == 0.0


@settings(max_examples=max_examples(25))
@given(
    seed=st.integers(0, 10_000),
    num_bins=st.integers(1, 25),
    k=st.integers(2, 8),
    splits=st.lists(st.integers(1, 199), max_size=4),
)
def test_streaming_equals_function(seed, num_bins, k, splits):
    p, y = random_probabilities(seed, 200, k)
    metric = ExpectedCalibrationError(num_bins=num_bins)
    bounds = [0, *sorted(set(splits)), 200]
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        labels = y[start:stop] if seed % 2 else np.eye(k)[y[start:stop]]  # sparse or one-hot
        metric.update_state(labels, p[start:stop])
    expected = expected_calibration_error(p, y, num_bins)
    assert float(metric.result()) == pytest.approx(expected, abs=1e-5)


def _sample_weight_equals_repeated_examples():
    p, y = random_probabilities(0, 100, 4)
    weights = np.random.default_rng(1).integers(0, 4, size=100)
    metric = ExpectedCalibrationError()
    metric.update_state(y, p, sample_weight=weights.astype("float32"))
    repeated = expected_calibration_error(np.repeat(p, weights, 0), np.repeat(y, weights))
    assert float(metric.result()) == pytest.approx(repeated, abs=1e-5)


def _binary_single_probability_and_column_labels():
    rng = np.random.default_rng(0)
    p1 = rng.random((300, 1)).astype("float32")
    y = (rng.random((300, 1)) < p1).astype("int32")
    metric = ExpectedCalibrationError(num_bins=10)
    metric.update_state(y, p1)
    expected = expected_calibration_error(p1, y, num_bins=10)
    assert float(metric.result()) == pytest.approx(expected, abs=1e-6)
    # k = 2 classes with a batch of 2 sparse labels is not mistaken for one-hot labels.
    metric = ExpectedCalibrationError(num_bins=5)
    metric.update_state(np.array([0, 1]), np.array([[0.9, 0.1], [0.9, 0.1]]))
    assert float(metric.result()) == pytest.approx(0.4, abs=1e-6)


def _metric_equals_function_after_evaluate_and_round_trips():
    p_logits = np.random.default_rng(0).normal(size=(600, 6)).astype("float32") * 4
    y = np.random.default_rng(1).integers(0, 6, size=600)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(6, "softmax")])
    model.layers[0].set_weights([np.eye(6, dtype="float32"), np.zeros(6, "float32")])
    model.compile(loss="sparse_categorical_crossentropy", metrics=[ExpectedCalibrationError()])
    results = model.evaluate(p_logits, y, batch_size=64, verbose=0, return_dict=True)
    expected = expected_calibration_error(model.predict(p_logits, verbose=0), y)
    assert results["expected_calibration_error"] == pytest.approx(expected, abs=1e-5)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)  # no custom_objects
    results = reloaded.evaluate(p_logits, y, batch_size=64, verbose=0, return_dict=True)
    assert results["expected_calibration_error"] == pytest.approx(expected, abs=1e-5)
    config = ExpectedCalibrationError(num_bins=7, name="ece7").get_config()
    assert ExpectedCalibrationError.from_config(config).get_config() == config


def _metric_on_a_calibrated_wrapper():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(800, 4)).astype("float32") * 2
    p = np.exp(x - x.max(1, keepdims=True))
    y = ((p / p.sum(1, keepdims=True)).cumsum(1) > rng.random((800, 1))).argmax(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
    model.layers[0].set_weights([np.eye(4, dtype="float32") * 3, np.zeros(4, "float32")])
    wrapper = TemperatureScaling(model).calibrate(x[:400], y[:400], verbose=0)
    wrapper.compile(loss="sparse_categorical_crossentropy", metrics=[ExpectedCalibrationError()])
    ece = wrapper.evaluate(x[400:], y[400:], verbose=0, return_dict=True)
    expected = expected_calibration_error(wrapper.predict(x[400:], verbose=0), y[400:])
    assert ece["expected_calibration_error"] == pytest.approx(expected, abs=1e-5)


@requires_tensorflow
def test_under_tf_distribute():
    import tensorflow as tf

    p, y = random_probabilities(3, 256, 5)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        metric = ExpectedCalibrationError()
        model = keras.Sequential([keras.Input((5,)), keras.layers.Identity()])
        model.compile(loss="sparse_categorical_crossentropy", metrics=[metric])
    results = model.evaluate(p, y, batch_size=32, verbose=0, return_dict=True)
    expected = expected_calibration_error(p, y)
    assert results["expected_calibration_error"] == pytest.approx(expected, abs=1e-5)


def _bad_num_bins():
    for num_bins, error in (
        (0, ValueError),
        (-1, ValueError),
        (2.5, TypeError),
        (True, TypeError),
        ("15", TypeError),
    ):
        with pytest.raises(error, match="num_bins"):
            ExpectedCalibrationError(num_bins=num_bins)


def test_hand_computed_binary_weights_and_bad_input():
    """The metric's values by hand, with sample weights, binary outputs and bad arguments."""
    _hand_computed_example()
    _sample_weight_equals_repeated_examples()
    _binary_single_probability_and_column_labels()
    _bad_num_bins()


def test_metric_in_compiled_models():
    """The metric inside compiled models: equal to the function, saved and reloaded."""
    _metric_equals_function_after_evaluate_and_round_trips()
    _metric_on_a_calibrated_wrapper()


# ---------------------------------------------------------------------------------------
# Equal-mass streaming ECE and the Brier score.
# ---------------------------------------------------------------------------------------


def fine_bin_centers(rng, n, k):
    """Softmax-like rows whose top probability sits at the centre of one fine bin, with
    several rows per fine bin, so that each fine bin holds equal confidences."""
    from keras_normkit.metrics import FINE_BINS, FINE_SURPRISE

    low = int(np.ceil(-np.log(1 - 1 / k) * FINE_BINS / FINE_SURPRISE)) + 1
    chosen = rng.choice(np.arange(low, FINE_BINS - 1), size=max(2, n // 4), replace=False)
    fine = rng.choice(chosen, size=n)
    confidence = 1 - np.exp(-(fine + 0.5) * FINE_SURPRISE / FINE_BINS)
    p = np.tile(((1 - confidence) / (k - 1))[:, None], (1, k))
    top = rng.integers(0, k, size=n)
    p[np.arange(n), top] = confidence
    return p.astype("float32"), rng.integers(0, k, size=n)


@settings(max_examples=max_examples(12), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    num_bins=st.integers(1, 20),
    k=st.integers(2, 6),
    splits=st.lists(st.integers(1, 199), max_size=2),
)
def test_equal_mass_streaming_equals_function_when_fine_bins_hold_ties(seed, num_bins, k, splits):
    p, y = fine_bin_centers(np.random.default_rng(seed), 200, k)
    metric = ExpectedCalibrationError(num_bins=num_bins, binning="equal_mass")
    bounds = [0, *sorted(set(splits)), 200]
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        labels = y[start:stop] if seed % 2 else np.eye(k)[y[start:stop]]
        metric.update_state(labels, p[start:stop])
    expected = expected_calibration_error(p, y, num_bins, binning="equal_mass")
    assert float(metric.result()) == pytest.approx(expected, abs=1e-5)


def test_equal_mass_streaming_on_continuous_confidences_and_weights():
    # Continuous confidences: the fine bins round them (0.4 % of 1 - c); the result stays
    # within 2e-3 of the exact equal-mass ECE here, and far from the equal-width one.
    p, y = random_probabilities(0, 5000, 10, sharpness=4.0)
    metric = ExpectedCalibrationError(binning="equal_mass")
    for start in range(0, 5000, 512):
        metric.update_state(y[start : start + 512], p[start : start + 512])
    exact = expected_calibration_error(p, y, binning="equal_mass")
    assert float(metric.result()) == pytest.approx(exact, abs=2e-3)
    # Integer sample weights count like repeated examples (repeats are ties).
    q, labels = fine_bin_centers(np.random.default_rng(1), 100, 3)
    weights = np.random.default_rng(2).integers(0, 4, size=100)
    metric = ExpectedCalibrationError(num_bins=6, binning="equal_mass")
    metric.update_state(labels, q, sample_weight=weights.astype("float32"))
    repeated = expected_calibration_error(
        np.repeat(q, weights, 0), np.repeat(labels, weights), 6, binning="equal_mass"
    )
    assert float(metric.result()) == pytest.approx(repeated, abs=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0
    config = ExpectedCalibrationError(num_bins=7, binning="equal_mass").get_config()
    assert config["binning"] == "equal_mass"
    assert ExpectedCalibrationError.from_config(config).get_config() == config
    old = {"name": "expected_calibration_error", "dtype": "float32", "num_bins": 15}
    assert ExpectedCalibrationError.from_config(old).binning == "equal_width"
    with pytest.raises(ValueError, match="binning"):
        ExpectedCalibrationError(binning="quantile")


def test_brier_score_metric_equals_function_and_sklearn():
    from sklearn.metrics import brier_score_loss

    from keras_normkit.calibration import brier_score
    from keras_normkit.metrics import BrierScore

    for k in (2, 5):
        p, y = random_probabilities(k, 300, k)
        metric = BrierScore()
        for start in range(0, 300, 64):
            labels = y[start : start + 64] if k == 2 else np.eye(k)[y[start : start + 64]]
            metric.update_state(labels, p[start : start + 64])
        p64 = p.astype("float64") / p.astype("float64").sum(1, keepdims=True)
        expected = brier_score_loss(y, p64, labels=np.arange(k))
        assert float(metric.result()) == pytest.approx(expected, abs=1e-5)
        assert brier_score(p, y) == pytest.approx(expected, abs=1e-6)
        for scale in (True, False):
            metric = BrierScore(scale_by_half=scale)
            metric.update_state(y, p)
            expected = brier_score_loss(y, p64, labels=np.arange(k), scale_by_half=scale)
            assert float(metric.result()) == pytest.approx(expected, abs=1e-5)
    # A sigmoid output (batch, 1): the classic binary score mean (p - y)^2.
    rng = np.random.default_rng(0)
    p1 = rng.random((200, 1)).astype("float32")
    y1 = (rng.random((200, 1)) < p1).astype("int32")
    metric = BrierScore()
    metric.update_state(y1, p1)
    assert float(metric.result()) == pytest.approx(np.mean((p1 - y1) ** 2), abs=1e-6)
    # Sample weights are repeated examples.
    p, y = random_probabilities(3, 100, 4)
    weights = rng.integers(0, 4, size=100)
    metric = BrierScore()
    metric.update_state(y, p, sample_weight=weights.astype("float32"))
    repeated = brier_score(np.repeat(p, weights, 0), np.repeat(y, weights))
    assert float(metric.result()) == pytest.approx(repeated, abs=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0
    config = BrierScore(scale_by_half=False, name="bs").get_config()
    assert BrierScore.from_config(config).get_config() == config
    for bad, error in (("yes", ValueError), (None, TypeError), (1, TypeError)):
        with pytest.raises(error, match="scale_by_half"):
            BrierScore(scale_by_half=bad)


def test_new_metrics_in_a_compiled_model_round_trip():
    from keras_normkit.metrics import BrierScore

    x = np.random.default_rng(0).normal(size=(400, 5)).astype("float32") * 3
    y = np.random.default_rng(1).integers(0, 5, size=400)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Softmax()])
    model.compile(
        loss="sparse_categorical_crossentropy",
        metrics=[ExpectedCalibrationError(binning="equal_mass", name="ace"), BrierScore()],
    )
    results = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    p = model.predict(x, verbose=0)
    from keras_normkit.calibration import brier_score

    assert results["brier_score"] == pytest.approx(brier_score(p, y), abs=1e-5)
    exact = expected_calibration_error(p, y, binning="equal_mass")
    assert results["ace"] == pytest.approx(exact, abs=2e-3)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)  # no custom_objects
    again = reloaded.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    assert again["ace"] == pytest.approx(results["ace"], abs=1e-6)
    assert again["brier_score"] == pytest.approx(results["brier_score"], abs=1e-6)
