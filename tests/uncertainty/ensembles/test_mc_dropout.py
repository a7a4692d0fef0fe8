"""MonteCarloDropout: only the dropout layers sample (batch norm stays in inference mode and
its moving statistics untouched), the masks really vary, the mean is the mean of sampled
passes, and the wrapper saves, reloads and refuses models it cannot rebuild."""

import keras
import numpy as np
import pytest

from keras_normkit.layers import AlphaDropout
from keras_normkit.uncertainty import MonteCarloDropout
from tests.conftest import requires_tensorflow


def _model(dropout=None, seed=0):
    keras.utils.set_random_seed(seed)
    dropout = dropout or keras.layers.Dropout(0.5)
    inputs = keras.Input((6,))
    x = keras.layers.Dense(16)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    x = dropout(x)
    outputs = keras.layers.Dense(4)(x)
    model = keras.Model(inputs, outputs)
    bn = model.layers[2]
    bn.moving_mean.assign(np.linspace(-1, 1, 16).astype("float32"))
    bn.moving_variance.assign(np.linspace(0.5, 2, 16).astype("float32"))
    return model


def _x(n=8):
    return np.random.default_rng(1).normal(size=(n, 6)).astype("float32")


def _np(x):
    return keras.ops.convert_to_numpy(x)


def test_batch_norm_is_in_inference_mode_and_untouched():
    model = _model(keras.layers.Dropout(0.0))  # no dropping: the MC mean is the plain model
    stats = [_np(v).copy() for v in model.layers[2].non_trainable_variables]
    mc = MonteCarloDropout(model, samples=3, seed=0)
    expected = _np(keras.ops.softmax(model(_x(), training=False)))
    np.testing.assert_allclose(_np(mc(_x())), expected, atol=1e-6)
    np.testing.assert_allclose(mc.predict(_x(), verbose=0), expected, atol=1e-6)
    for before, variable in zip(stats, model.layers[2].non_trainable_variables, strict=True):
        np.testing.assert_array_equal(before, _np(variable))
    # model(x, training=True) normalizes with the batch's statistics: not the same.
    trained = _np(keras.ops.softmax(model(_x(), training=True)))
    assert np.abs(trained - expected).max() > 1e-3


@pytest.mark.parametrize(
    "dropout",
    [
        keras.layers.Dropout(0.5),
        keras.layers.GaussianDropout(0.5),
        keras.layers.AlphaDropout(0.3),
        AlphaDropout(0.3),
    ],
    ids=["Dropout", "GaussianDropout", "keras-AlphaDropout", "our-AlphaDropout"],
)
def test_dropout_layers_sample(dropout):
    model = _model(dropout)
    single = MonteCarloDropout(model, samples=1, seed=3)
    a, b = single.predict(_x(), verbose=0), single.predict(_x(), verbose=0)
    plain = _np(keras.ops.softmax(model(_x())))
    assert np.abs(a - b).max() > 1e-3  # a new mask each call
    assert np.abs(a - plain).max() > 1e-3
    np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-5)


def test_the_mean_of_many_samples_is_the_mean_of_single_passes():
    model = _model()
    x = _x(4)
    many = _np(MonteCarloDropout(model, samples=400, seed=0)(x))
    # one pass of 400 copies of each input through a single-sample wrapper: one mask each
    single = _np(MonteCarloDropout(model, samples=1, seed=1)(np.repeat(x, 400, axis=0)))
    np.testing.assert_allclose(many, single.reshape(4, 400, -1).mean(axis=1), atol=0.04)
    # the same seed gives the same masks on a fresh wrapper
    np.testing.assert_allclose(
        _np(MonteCarloDropout(model, samples=5, seed=7)(x)),
        _np(MonteCarloDropout(model, samples=5, seed=7)(x)),
        atol=1e-6,
    )


def test_probabilities_output_and_binary_output():
    keras.utils.set_random_seed(0)
    softmax = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dropout(0.5), keras.layers.Dense(2, "softmax")]
    )
    out = _np(MonteCarloDropout(softmax, samples=4, seed=0)(_x()[:, :3]))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-5)
    binary = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dropout(0.5), keras.layers.Dense(1, "sigmoid")]
    )
    out = _np(MonteCarloDropout(binary, samples=4, seed=0)(_x()[:, :3]))
    assert out.shape == (8, 2)


def test_save_and_load(tmp_path):
    model = _model(keras.layers.Dropout(0.0))
    mc = MonteCarloDropout(model, samples=3, seed=0)
    expected = mc.predict(_x(), verbose=0)
    mc.save(tmp_path / "mc.keras")
    loaded = keras.saving.load_model(tmp_path / "mc.keras")
    assert isinstance(loaded, MonteCarloDropout) and loaded.samples == 3
    np.testing.assert_allclose(loaded.predict(_x(), verbose=0), expected, atol=1e-6)
    assert loaded.get_config()["seed"] == 0


def test_errors():
    no_dropout = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="no dropout layer"):
        MonteCarloDropout(no_dropout)

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)
            self.drop = keras.layers.Dropout(0.5)

        def call(self, x):
            return self.dense(self.drop(x))

    with pytest.raises(ValueError, match="functional or Sequential"):
        MonteCarloDropout(Subclassed())
    with pytest.raises(TypeError, match="keras.Model"):
        MonteCarloDropout("model")
    with pytest.raises(ValueError, match="samples"):
        MonteCarloDropout(_model(), samples=0)


@requires_tensorflow
def test_export_and_serve(tmp_path):
    import tensorflow as tf

    mc = MonteCarloDropout(_model(), samples=4, seed=0)
    mc.export(str(tmp_path / "mc"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "mc"))
    a, b = served.serve(tf.constant(_x())).numpy(), served.serve(tf.constant(_x())).numpy()
    assert a.shape == (8, 4) and np.allclose(a.sum(axis=1), 1.0, atol=1e-5)
    assert np.abs(a - b).max() > 1e-4  # the served model still samples


def test_mixed_precision_model():
    keras.config.set_dtype_policy("mixed_float16")
    model = _model()
    keras.config.set_dtype_policy("float32")
    p = _np(MonteCarloDropout(model, samples=4, seed=0)(_x()))
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)


def test_dropout_in_a_nested_model_samples_and_weights_are_shared():
    keras.utils.set_random_seed(0)
    inner = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8), keras.layers.Dropout(0.5)])
    inputs = keras.Input((6,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inner(inputs)))
    mc = MonteCarloDropout(model, samples=1, seed=0)
    assert np.abs(_np(mc(_x())) - _np(mc(_x()))).max() > 1e-3
    assert len(mc.trainable_weights) == len(model.trainable_weights)  # shared, not copied
    inner.layers[0].kernel.assign(np.zeros((6, 8), "float32"))  # the wrapper sees the change
    np.testing.assert_allclose(_np(mc(_x())), _np(keras.ops.softmax(model(_x()))), atol=1e-6)
