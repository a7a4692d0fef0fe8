"""`WeightStandardization`: NumPy formula per layer kind, signal propagation, folding, config."""

import math

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.activations import activation_gain
from keras_normkit.layers import SELU, WeightStandardization
from keras_normkit.utils import fold_weight_standardization
from tests.conformance import LayerConformanceTestCase, build_functional_model
from tests.conftest import max_examples

RELU_GAIN = math.sqrt(2.0 / (1.0 - 1.0 / math.pi))


def _np(x):
    return keras.ops.convert_to_numpy(x)


def np_scaled_ws(w, g=None, gamma=1.0, epsilon=1e-4, depthwise=False):
    """gamma * g * (W - mean) / sqrt(max(N var, eps)) per output unit (Brock et al. 2021a, §4).

    The fan-in of unit j: every axis but the last (Dense, ConvND), the spatial axes of a
    depthwise kernel `(*k, in, multiplier)`, whose units are the last two axes.
    """
    w = w.astype("float64")
    axes = tuple(range(w.ndim - 2)) if depthwise else tuple(range(w.ndim - 1))
    n = np.prod([w.shape[a] for a in axes])
    mean = w.mean(axis=axes, keepdims=True)
    var = ((w - mean) ** 2).mean(axis=axes, keepdims=True)
    out = gamma * (w - mean) / np.sqrt(np.maximum(n * var, epsilon))
    if g is not None:
        out = out * np.reshape(g, w.shape[-2:] if depthwise else w.shape[-1:])
    return out


# -- conformance ------------------------------------------------------------------------


class WeightStandardizationConformanceTest(LayerConformanceTestCase):
    def test_dense(self):
        self.run_conformance_test(
            WeightStandardization,
            {"layer": keras.layers.Dense(4, activation="tanh"), "activation": "relu"},
            input_shape=(3, 5),
            expected_output_shape=(3, 4),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
        )

    def test_conv2d_no_gain(self):
        self.run_conformance_test(
            WeightStandardization,
            {"layer": keras.layers.Conv2D(3, 2, padding="same"), "gain": False},
            input_shape=(2, 5, 5, 2),
            expected_output_shape=(2, 5, 5, 3),
            expected_num_trainable_weights=2,
            atol=1e-5,
        )

    def test_depthwise_conv1d(self):
        self.run_conformance_test(
            WeightStandardization,
            {
                "layer": keras.layers.DepthwiseConv1D(3, padding="same", depth_multiplier=2),
                "activation": "gelu",
            },
            input_shape=(2, 6, 2),
            expected_output_shape=(2, 6, 4),
            atol=1e-5,
        )


# -- the formula ------------------------------------------------------------------------

_CASES = [
    ("dense", lambda: keras.layers.Dense(4, activation="tanh"), (6, 5)),
    ("conv1d", lambda: keras.layers.Conv1D(3, 3, padding="causal", dilation_rate=2), (2, 7, 2)),
    ("conv2d", lambda: keras.layers.Conv2D(3, 2, strides=2, activation="relu"), (2, 6, 6, 2)),
    ("conv3d", lambda: keras.layers.Conv3D(2, 2, padding="same"), (2, 4, 4, 4, 3)),
    ("conv2d_groups", lambda: keras.layers.Conv2D(6, 3, groups=2), (2, 5, 5, 4)),
    ("depthwise1d", lambda: keras.layers.DepthwiseConv1D(3, depth_multiplier=2), (2, 7, 3)),
    ("depthwise2d", lambda: keras.layers.DepthwiseConv2D(2, padding="same"), (2, 5, 5, 3)),
]


@pytest.mark.parametrize("name,make,shape", _CASES, ids=[c[0] for c in _CASES])
def test_matches_plain_layer_with_numpy_kernel(name, make, shape):
    """The wrapper equals the plain layer holding the NumPy standardized kernel."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape).astype("float32")
    wrapper = WeightStandardization(make(), activation="relu")
    wrapper.build(x.shape)
    kernel = rng.normal(loc=0.3, size=wrapper.layer.kernel.shape).astype("float32")
    bias = rng.normal(size=wrapper.layer.bias.shape).astype("float32")
    g = rng.uniform(0.5, 2.0, size=wrapper.g.shape).astype("float32")
    wrapper.layer.kernel.assign(kernel)
    wrapper.layer.bias.assign(bias)
    wrapper.g.assign(g)
    expected_kernel = np_scaled_ws(kernel, g, RELU_GAIN, depthwise=name.startswith("depthwise"))
    np.testing.assert_allclose(_np(wrapper.standardized_kernel()), expected_kernel, atol=1e-6)
    plain = make()
    plain.build(x.shape)
    plain.set_weights([expected_kernel.astype("float32"), bias])
    np.testing.assert_allclose(_np(wrapper(x)), _np(plain(x)), atol=1e-5)


def test_epsilon_bounds_the_denominator():
    """A constant unit (variance 0) gives a zero column, no NaN; a tiny one is scaled by
    rsqrt(eps), as the reference's rsqrt(max(N var, eps))."""
    layer = WeightStandardization(keras.layers.Dense(2, use_bias=False), epsilon=1e-2)
    layer.build((None, 4))
    kernel = np.stack([np.full(4, 3.0), [0.0, 0.01, 0.0, -0.01]], axis=1).astype("float32")
    layer.layer.kernel.assign(kernel)
    w = _np(layer.standardized_kernel())
    np.testing.assert_array_equal(w[:, 0], 0.0)
    np.testing.assert_allclose(w, np_scaled_ws(kernel, epsilon=1e-2), atol=1e-7)
    np.testing.assert_allclose(w[:, 1], kernel[:, 1] / math.sqrt(1e-2), rtol=1e-6)


@settings(max_examples=max_examples(12))
@given(
    fan_in=st.integers(2, 12),
    units=st.integers(1, 5),
    loc=st.floats(-3.0, 3.0),
    scale=st.floats(0.1, 10.0),
    gain_value=st.floats(0.25, 4.0),
)
def test_units_have_mean_zero_and_norm_gamma_g(fan_in, units, loc, scale, gain_value):
    """Property: whatever the raw kernel, each unit has mean 0 and norm gamma * g."""
    rng = np.random.default_rng(fan_in * 7 + units)
    layer = WeightStandardization(keras.layers.Dense(units), activation="tanh", epsilon=1e-12)
    layer.build((None, fan_in))
    layer.layer.kernel.assign((loc + scale * rng.normal(size=(fan_in, units))).astype("float32"))
    layer.g.assign(np.full(units, gain_value, "float32"))
    w = _np(layer.standardized_kernel()).astype("float64")
    np.testing.assert_allclose(w.mean(axis=0), 0.0, atol=1e-5 * gain_value)
    expected = gain_value * activation_gain("tanh")
    np.testing.assert_allclose(np.linalg.norm(w, axis=0), expected, rtol=1e-4)


def test_unit_variance_through_relu_and_the_layer():
    """relu(z), z ~ N(0, 1), through a scaled-WS Dense: each unit has mean 0, variance 1."""
    z = np.random.default_rng(2).normal(size=(20000, 256)).astype("float32")
    x = np.maximum(z, 0.0)  # mean 0.4, variance (1 - 1/pi) / 2
    layer = WeightStandardization(keras.layers.Dense(64, use_bias=False), activation="relu")
    y = _np(layer(x)).astype("float64")
    assert np.abs(y.mean(axis=0)).max() < 0.05
    assert y.var(axis=0).mean() == pytest.approx(1.0, abs=0.03)


def test_activation_gain_per_activation():
    cases = [(None, 1.0), ("relu", RELU_GAIN), ("selu", 1.0)]
    for activation, expected in cases:
        layer = WeightStandardization(keras.layers.Dense(2), activation=activation)
        assert layer.activation_gain == pytest.approx(expected, rel=1e-6)
    selu_layer = WeightStandardization(keras.layers.Dense(2), activation=SELU((0.0, 2.0)))
    assert selu_layer.activation_gain == pytest.approx(activation_gain(SELU((0.0, 2.0))))


def test_mixed_precision_matches_float32():
    x = np.random.default_rng(3).normal(size=(4, 6, 6, 2)).astype("float32")
    layer32 = WeightStandardization(keras.layers.Conv2D(3, 3), activation="relu")
    y32 = _np(layer32(x))
    keras.config.set_dtype_policy("mixed_float16")
    layer16 = WeightStandardization(keras.layers.Conv2D(3, 3), activation="relu")
    layer16.build(x.shape)
    layer16.set_weights(layer32.get_weights())
    y16 = layer16(x)
    assert keras.backend.standardize_dtype(y16.dtype) == "float16"
    assert keras.backend.standardize_dtype(layer16.g.dtype) == "float32"
    np.testing.assert_allclose(_np(y16).astype("float32"), y32, atol=2e-2)


# -- config, saving, folding --------------------------------------------------------------


@pytest.mark.parametrize(
    "activation", ["relu", SELU((-0.1, 1.5)), keras.layers.LeakyReLU(0.1)], ids=str
)
def test_config_keeps_the_activation_and_its_gain(activation):
    layer = WeightStandardization(keras.layers.Conv2D(3, 2), activation=activation, epsilon=1e-3)
    config = layer.get_config()
    assert set(config) >= {"layer", "gain", "activation", "epsilon"}
    clone = WeightStandardization.from_config(config)
    assert clone.activation_gain == pytest.approx(layer.activation_gain, rel=1e-12)
    assert clone.epsilon == 1e-3 and clone.gain is True
    model = build_functional_model(clone, np.zeros((1, 5, 5, 1), "float32"))
    assert model.output_shape == (None, 4, 4, 3)


def _nf_model():
    from keras_normkit.layers import NFResidual

    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 6, 2))
    h = WeightStandardization(keras.layers.Conv2D(4, 3, padding="same"))(inputs)
    branch = keras.Sequential(
        [
            keras.layers.ReLU(),
            WeightStandardization(keras.layers.Conv2D(4, 3, padding="same"), activation="relu"),
        ]
    )
    shortcut = WeightStandardization(keras.layers.Conv2D(4, 1, strides=2), activation="relu")
    h = NFResidual(branch)(h)
    h = NFResidual(
        keras.Sequential(
            [
                keras.layers.ReLU(),
                WeightStandardization(
                    keras.layers.DepthwiseConv2D(3, strides=2, padding="same"), activation="relu"
                ),
            ]
        ),
        shortcut=shortcut,
        beta=1.02,
    )(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    outputs = WeightStandardization(keras.layers.Dense(3, activation="softmax"))(h)
    return keras.Model(inputs, outputs)


def test_fold_gives_plain_layers_and_the_same_function(tmp_path):
    model = _nf_model()
    rng = np.random.default_rng(4)
    for w in model.weights:  # non-trivial gains and biases
        w.assign(rng.uniform(0.5, 1.5, size=w.shape).astype("float32") * _np(w) + 0.01)
    x = rng.normal(size=(5, 6, 6, 2)).astype("float32")
    folded = fold_weight_standardization(model)

    def everything(m):
        found = []
        for layer in m.layers:
            found.append(layer)
            for attr in ("branch", "shortcut"):
                sub = getattr(layer, attr, None)
                if sub is not None:
                    found.extend(sub.layers if isinstance(sub, keras.Model) else [sub])
        return found

    assert any(isinstance(layer, WeightStandardization) for layer in everything(model))
    assert not any(isinstance(layer, WeightStandardization) for layer in everything(folded))
    np.testing.assert_allclose(folded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
    path = str(tmp_path / "folded.keras")
    folded.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5
    )


def test_fold_rejects_a_subclassed_model():
    with pytest.raises(TypeError, match="Sequential or Functional"):
        fold_weight_standardization(keras.layers.Dense(2))


# -- arguments ----------------------------------------------------------------------------


def test_bad_arguments():
    with pytest.raises(TypeError, match="`layer` must be a keras.layers.Layer"):
        WeightStandardization("dense")
    for layer in (
        keras.layers.Conv2DTranspose(2, 3),
        keras.layers.SeparableConv2D(2, 3),
        keras.layers.LayerNormalization(),
    ):
        with pytest.raises(ValueError, match="`layer` must be one of"):
            WeightStandardization(layer)
    with pytest.raises(TypeError, match="`gain` must be a Python bool"):
        WeightStandardization(keras.layers.Dense(2), gain=1)
    with pytest.raises(ValueError, match="`epsilon` must be a number > 0"):
        WeightStandardization(keras.layers.Dense(2), epsilon=0.0)
    with pytest.raises(TypeError, match="`activation` must be None, the name"):
        WeightStandardization(keras.layers.Dense(2), activation=2)
