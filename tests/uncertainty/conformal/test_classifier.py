"""ConformalClassifier: the Keras sets equal the NumPy ones, covers on held-out data, saves,
loads, exports and serves, and refuses bad arguments and uncalibrated use."""

import keras
import numpy as np
import pytest

from keras_normkit.calibration import NotCalibratedError
from keras_normkit.uncertainty import ConformalClassifier, coverage, prediction_sets
from tests.conftest import requires_tensorflow

K = 4


def _data(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    kernel = np.array([[2.0, -1.0, 0.5, 0.0], [0.0, 1.5, -2.0, 1.0], [1.0, 0.0, 0.0, -1.5]])
    z = x @ kernel
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1).astype("int32")
    return x, y, kernel


def _model(activation=None):
    _, _, kernel = _data(10)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(K, activation=activation)])
    model.layers[0].set_weights([3.0 * kernel.astype("float32"), np.zeros(K, "float32")])
    return model  # over-confident: logits 3 x the true ones


def _probabilities(model, x):
    z = np.asarray(model.predict(x, verbose=0), np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_sets_equal_numpy_and_cover(score):
    x, y, _ = _data()
    model = _model()
    wrapper = ConformalClassifier(model, score=score, alpha=0.1, randomized=False)
    wrapper.calibrate(x[:500], y[:500], seed=0, verbose=0)
    sets = wrapper.predict(x[500:], verbose=0)
    assert sets.dtype == bool and sets.shape == (500, K)
    expected = prediction_sets(
        _probabilities(model, x[500:]),
        wrapper.threshold_,
        score,
        False,
        wrapper.k_reg_,
        wrapper.lam_,
    )
    assert (sets != expected).sum() <= 1  # float32 against float64 at a boundary, at most
    assert coverage(sets, y[500:]) >= 0.85
    if score == "raps":
        assert wrapper.k_reg_ >= 1 and wrapper.lam_ in (0.001, 0.01, 0.1, 0.2, 0.5)
    else:
        assert (wrapper.k_reg_, wrapper.lam_) == (0, 0.0)


def test_randomized_sets_sit_inside_the_deterministic_ones():
    x, y, _ = _data()
    model = _model()
    deterministic = ConformalClassifier(model, "aps", randomized=False).calibrate(
        x[:500], y[:500], seed=1, verbose=0
    )
    randomized = ConformalClassifier(model, "aps", randomized=True, seed=0).calibrate(
        x[:500], y[:500], seed=1, verbose=0
    )
    assert randomized.threshold_ == deterministic.threshold_  # same calibration draws
    a, b = randomized.predict(x[500:], verbose=0), randomized.predict(x[500:], verbose=0)
    assert (a <= deterministic.predict(x[500:], verbose=0)).all()
    assert (a != b).any()  # a new draw per call
    assert a.sum() < deterministic.predict(x[500:], verbose=0).sum()


def test_calibrate_from_logits_and_probability_models():
    x, y, _ = _data()
    model = _model()
    a = ConformalClassifier(model, "lac").calibrate(x[:500], y[:500], seed=0, verbose=0)
    logits = model.predict(x[:500], verbose=0)
    b = ConformalClassifier(model, "lac").calibrate_from_logits(logits, y[:500])
    assert a.threshold_ == pytest.approx(b.threshold_, rel=1e-6)
    np.testing.assert_array_equal(a.predict(x[500:], verbose=0), b.predict(x[500:], verbose=0))
    softmax_model = _model("softmax")
    c = ConformalClassifier(softmax_model, "lac").calibrate(x[:500], y[:500], seed=0, verbose=0)
    assert c.model_output == "probabilities"
    assert c.threshold_ == pytest.approx(a.threshold_, abs=1e-5)


def test_mondrian_and_binary():
    x, y, _ = _data()
    mondrian = ConformalClassifier(_model(), "aps", mondrian=True, randomized=False)
    mondrian.calibrate(x[:600], y[:600], seed=0, verbose=0)
    assert mondrian.threshold_.shape == (K,)
    binary = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    sets = ConformalClassifier(binary, "lac").calibrate(x[:200], (y[:200] > 1), verbose=0)
    assert sets.predict(x[:5], verbose=0).shape == (5, 2)


@pytest.mark.filterwarnings("ignore:You are saving a model that has not yet been built")
def test_save_load_round_trip(tmp_path):
    x, y, _ = _data()
    wrapper = ConformalClassifier(_model(), "raps", alpha=0.05, randomized=False, lam=0.1)
    wrapper.calibrate(x[:500], y[:500], seed=0, verbose=0)
    expected = wrapper.predict(x[500:], verbose=0)
    wrapper.save(tmp_path / "sets.keras")
    loaded = keras.saving.load_model(tmp_path / "sets.keras")
    assert isinstance(loaded, ConformalClassifier) and loaded.is_calibrated
    assert loaded.get_config()["lam"] == 0.1 and loaded.get_config()["k_reg"] is None
    assert (loaded.threshold_, loaded.k_reg_, loaded.lam_) == (
        wrapper.threshold_,
        wrapper.k_reg_,
        wrapper.lam_,
    )
    np.testing.assert_array_equal(loaded.predict(x[500:], verbose=0), expected)
    fresh = ConformalClassifier(_model(), "lac")
    fresh.save(tmp_path / "fresh.keras")
    assert not keras.saving.load_model(tmp_path / "fresh.keras").is_calibrated


@requires_tensorflow
def test_export_and_serve(tmp_path):
    import tensorflow as tf

    x, y, _ = _data()
    wrapper = ConformalClassifier(_model(), "aps", randomized=False)
    wrapper.calibrate(x[:500], y[:500], seed=0, verbose=0)
    wrapper.export(str(tmp_path / "served"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "served"))
    out = served.serve(tf.constant(x[500:]))
    np.testing.assert_array_equal(out.numpy(), wrapper.predict(x[500:], verbose=0))
    randomized = ConformalClassifier(_model(), "raps", seed=1).calibrate(
        x[:500], y[:500], verbose=0
    )
    randomized.export(str(tmp_path / "randomized"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "randomized"))  # kept: it owns the variables
    out = loaded.serve(tf.constant(x[500:]))
    assert out.dtype == tf.bool and tuple(out.shape) == (500, K)


def test_errors():
    x, y, _ = _data(100)
    model = _model()
    wrapper = ConformalClassifier(model)
    with pytest.raises(NotCalibratedError, match="not calibrated"):
        wrapper.predict(x, verbose=0)
    with pytest.raises(NotCalibratedError):
        _ = wrapper.threshold_
    assert not hasattr(wrapper, "threshold_")
    with pytest.raises(ValueError, match="alpha"):
        ConformalClassifier(model, alpha=1.0)
    with pytest.raises(ValueError, match="score"):
        ConformalClassifier(model, score="topk")
    with pytest.raises(TypeError, match="keras.Model"):
        ConformalClassifier(lambda t: t)
    with pytest.raises(ValueError, match="k_reg"):
        ConformalClassifier(model, "raps", k_reg=-1)
    with pytest.raises(ValueError, match="at least 19 calibration examples"):
        ConformalClassifier(model, alpha=0.05).calibrate(x[:10], y[:10], verbose=0)
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        ConformalClassifier(model).calibrate(x, y + 4, verbose=0)
    with pytest.raises(ValueError, match="4 classes"):
        ConformalClassifier(model).calibrate_from_logits(np.zeros((20, 3)), np.zeros(20, int))


def test_mixed_precision_model():
    x, y, kernel = _data()
    keras.config.set_dtype_policy("mixed_float16")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(K)])
    keras.config.set_dtype_policy("float32")
    model.layers[0].set_weights([kernel.astype("float32"), np.zeros(K, "float32")])
    wrapper = ConformalClassifier(model, "raps", randomized=False)
    sets = wrapper.calibrate(x[:500], y[:500], seed=0, verbose=0).predict(x[500:], verbose=0)
    assert sets.dtype == bool and 0.85 <= coverage(sets, y[500:]) <= 0.97


@requires_tensorflow
def test_calibrate_on_a_dataset():
    import tensorflow as tf

    x, y, _ = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x[:500], y[:500])).batch(64)
    a = ConformalClassifier(_model(), "aps").calibrate(dataset, seed=0, verbose=0)
    b = ConformalClassifier(_model(), "aps").calibrate(x[:500], y[:500], seed=0, verbose=0)
    assert a.threshold_ == b.threshold_
