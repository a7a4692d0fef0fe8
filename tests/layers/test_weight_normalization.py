"""`WeightNormalization`: NumPy formula, data-dependent init, TF-Addons port, conformance."""

import os

import keras
import numpy as np
import pytest

from keras_normkit.layers import WeightNormalization
from tests.conformance import LayerConformanceTestCase, build_functional_model
from tests.conftest import requires_xla


def _np(x):
    return keras.ops.convert_to_numpy(x)


def np_weight_norm_kernel(v, g, transpose=False):
    """w = g * v / ||v||, the norm per output unit (Salimans & Kingma 2016, eq. 2)."""
    v = v.astype("float64")
    out_axis = v.ndim - 2 if transpose else v.ndim - 1
    axes = tuple(a for a in range(v.ndim) if a != out_axis)
    norm = np.sqrt((v**2).sum(axis=axes, keepdims=True))
    shape = [1] * v.ndim
    shape[out_axis] = -1
    return np.reshape(g, shape) * v / norm


def _set_random(layer, seed=0):
    """Random v, g and bias (in get_weights order) on a built wrapper; returns them by name."""
    rng = np.random.default_rng(seed)
    values = {}
    for w in layer.weights:
        name = w.path.split("/")[-1]
        if name == "initialized":
            value = np.ones((), "float32")
        elif name.endswith("offset"):
            value = np.zeros(w.shape, "float32")
        elif name == "g":
            value = rng.uniform(0.5, 2.0, size=w.shape).astype("float32")
        else:
            value = rng.normal(size=w.shape).astype("float32")
        w.assign(value)
        values[name] = value
    return values


# -- conformance ------------------------------------------------------------------------


class WeightNormalizationConformanceTest(LayerConformanceTestCase):
    def test_dense(self):
        self.run_conformance_test(
            WeightNormalization,
            {"layer": keras.layers.Dense(4, activation="tanh")},
            input_shape=(3, 5),
            expected_output_shape=(3, 4),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=3,
        )

    def test_dense_no_data_init(self):
        self.run_conformance_test(
            WeightNormalization,
            {"layer": keras.layers.Dense(4), "data_init": False},
            input_shape=(3, 2, 5),
            expected_output_shape=(3, 2, 4),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
        )

    def test_conv2d(self):
        self.run_conformance_test(
            WeightNormalization,
            {"layer": keras.layers.Conv2D(3, 2, padding="same", activation="relu")},
            input_shape=(2, 5, 5, 2),
            expected_output_shape=(2, 5, 5, 3),
            atol=1e-5,
        )

    def test_conv1d_causal_no_bias(self):
        self.run_conformance_test(
            WeightNormalization,
            {"layer": keras.layers.Conv1D(3, 3, padding="causal", use_bias=False)},
            input_shape=(2, 6, 2),
            expected_output_shape=(2, 6, 3),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=2,
            atol=1e-5,
        )

    def test_conv2d_transpose(self):
        self.run_conformance_test(
            WeightNormalization,
            {"layer": keras.layers.Conv2DTranspose(3, 3, strides=2)},
            input_shape=(2, 4, 4, 2),
            expected_output_shape=(2, 9, 9, 3),
            atol=1e-5,
        )


# -- the formula ------------------------------------------------------------------------

_CASES = [
    ("dense", lambda: keras.layers.Dense(4, activation="tanh"), (6, 5), False),
    (
        "conv1d",
        lambda: keras.layers.Conv1D(3, 3, padding="causal", dilation_rate=2),
        (2, 7, 2),
        False,
    ),
    (
        "conv2d",
        lambda: keras.layers.Conv2D(3, 2, strides=2, activation="relu"),
        (2, 6, 6, 2),
        False,
    ),
    ("conv3d", lambda: keras.layers.Conv3D(2, 2, padding="same"), (2, 4, 4, 4, 3), False),
    ("conv1d_t", lambda: keras.layers.Conv1DTranspose(3, 3, strides=2), (2, 5, 2), True),
    ("conv2d_t", lambda: keras.layers.Conv2DTranspose(3, 2, padding="same"), (2, 4, 4, 5), True),
    ("conv3d_t", lambda: keras.layers.Conv3DTranspose(2, 2, strides=2), (2, 3, 3, 3, 4), True),
]


@pytest.mark.parametrize("name,make,shape,transpose", _CASES, ids=[c[0] for c in _CASES])
def test_matches_plain_layer_with_numpy_kernel(name, make, shape, transpose):
    """The wrapper equals the plain layer whose kernel is the NumPy g * v / ||v||."""
    x = np.random.default_rng(1).normal(size=shape).astype("float32")
    wrapper = WeightNormalization(make())
    wrapper.build(x.shape)
    values = _set_random(wrapper)
    # g has one entry per output unit: the filters, also for a transpose (kernel (..., out, in)).
    assert wrapper.g.shape == (wrapper.layer.filters if name != "dense" else 4,)
    plain = make()
    plain.build(x.shape)
    w = np_weight_norm_kernel(values["kernel"], values["g"], transpose=transpose)
    plain.set_weights([w.astype("float32"), values["bias"]])
    expected = _np(plain(x))
    for training in (False, True):  # initialized: training does not change anything
        np.testing.assert_allclose(_np(wrapper(x, training=training)), expected, atol=1e-5)


@pytest.mark.parametrize("transpose", [False, True])
def test_g_scales_one_output_channel(transpose):
    """Per output unit: doubling g[j] doubles output channel j only (pre-activation)."""
    make = (
        (lambda: keras.layers.Conv2DTranspose(3, 3, strides=2, use_bias=False))
        if transpose
        else (lambda: keras.layers.Conv2D(3, 3, use_bias=False))
    )
    x = np.random.default_rng(2).normal(size=(2, 5, 5, 4)).astype("float32")
    layer = WeightNormalization(make(), data_init=False)
    y0 = _np(layer(x))
    layer.g.assign(_np(layer.g) * np.array([1.0, 2.0, 1.0], "float32"))
    y1 = _np(layer(x))
    np.testing.assert_allclose(y1[..., 1], 2 * y0[..., 1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y1[..., [0, 2]], y0[..., [0, 2]], rtol=1e-6, atol=1e-7)
    # And ||v|| does not matter: scaling v's column j leaves the output unchanged.
    v = _np(layer.layer.kernel)
    scale = np.array([3.0, 0.5, 7.0], "float32")
    layer.layer.kernel.assign(v * (scale[:, None] if transpose else scale))
    np.testing.assert_allclose(_np(layer(x)), y1, rtol=1e-5, atol=1e-5)


def test_no_data_init_starts_as_the_plain_layer():
    """data_init=False: g = ||v||, so w = v and the output is the wrapped layer's."""
    x = np.random.default_rng(3).normal(size=(4, 5)).astype("float32")
    inner = keras.layers.Dense(3, bias_initializer="ones")
    layer = WeightNormalization(inner, data_init=False)
    y = _np(layer(x, training=True))
    np.testing.assert_allclose(y, _np(inner(x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(layer.g), np.linalg.norm(_np(inner.kernel), axis=0), rtol=1e-6)


# -- data-dependent initialization --------------------------------------------------------


def _unit_stats(y, channel_axis=-1):
    y = np.moveaxis(y.astype("float64"), channel_axis, -1).reshape(-1, y.shape[channel_axis])
    return y.mean(axis=0), y.var(axis=0)


@pytest.mark.parametrize(
    "make,shape,channel_axis",
    [
        (lambda: keras.layers.Dense(5, activation="linear"), (64, 7), -1),
        (lambda: keras.layers.Conv2D(4, 3), (8, 6, 6, 3), -1),
        pytest.param(
            lambda: keras.layers.Conv2D(4, 3, data_format="channels_first"),
            (8, 3, 6, 6),
            1,
            marks=pytest.mark.skipif(
                keras.backend.backend() == "tensorflow",
                reason="TensorFlow's CPU Conv2D supports channels_last only",
            ),
        ),
        (lambda: keras.layers.Conv2DTranspose(4, 3, strides=2), (8, 4, 4, 3), -1),
        (lambda: keras.layers.Conv1D(4, 3, use_bias=False), (8, 9, 3), -1),
    ],
)
def test_data_init_gives_zero_mean_unit_variance(make, shape, channel_axis):
    rng = np.random.default_rng(4)
    x = (rng.normal(size=shape) * 3.0 + 1.5).astype("float32")
    layer = WeightNormalization(make())
    y_infer = _np(layer(x, training=False))  # inference: no initialization
    assert float(_np(layer.initialized)) == 0.0
    y = _np(layer(x, training=True))
    assert float(_np(layer.initialized)) == 1.0
    mean, var = _unit_stats(y, channel_axis)
    if layer.layer.use_bias:
        np.testing.assert_allclose(mean, 0.0, atol=1e-4)
    np.testing.assert_allclose(var, 1.0, atol=1e-4)
    assert not np.allclose(y, y_infer, atol=1e-3)
    # Effective scale = 1/std of the unit-norm pre-activation (the NumPy statistics).
    probe = WeightNormalization(make(), data_init=False)
    probe.build(x.shape)
    probe.layer.set_weights(
        [_np(layer.layer.kernel)]
        + ([np.zeros(probe.g.shape, "float32")] if probe.layer.use_bias else [])
    )
    probe.g.assign(np.ones(probe.g.shape, "float32"))
    t = _np(probe(x))
    t_mean, t_var = _unit_stats(t, channel_axis)
    np.testing.assert_allclose(_np(layer.scale), 1 / np.sqrt(t_var), rtol=1e-4)
    if layer.layer.use_bias:
        np.testing.assert_allclose(_np(layer.effective_bias), -t_mean / np.sqrt(t_var), atol=1e-4)
    # Once: a second training batch changes nothing, the output is the same function.
    scale = _np(layer.scale)
    y2 = _np(layer(x[::-1] * 2.0, training=True))
    np.testing.assert_allclose(_np(layer.scale), scale)
    np.testing.assert_allclose(_np(layer(x, training=False)), y, atol=1e-5)
    assert y2.shape == y.shape


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((6,)),
            WeightNormalization(keras.layers.Dense(8, activation="relu")),
            WeightNormalization(keras.layers.Dense(3)),
        ]
    )


def _check_fit_initializes(jit_compile):
    x = np.random.default_rng(5).normal(size=(32, 6)).astype("float32") * 4.0
    model = _model()
    model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=jit_compile)
    first = model.layers[0]
    # lr = 0: after one full-batch epoch the weights are exactly the data-init ones.
    model.fit(x, np.zeros((32, 3), "float32"), batch_size=32, epochs=1, verbose=0)
    assert float(_np(first.initialized)) == 1.0
    h = _np(first(x, training=False))
    # The pre-activation of the first layer: recover it with a linear copy of the weights.
    linear = WeightNormalization(keras.layers.Dense(8), data_init=True)
    linear.build((None, 6))
    linear.set_weights(first.get_weights())
    mean, var = _unit_stats(_np(linear(x, training=False)))
    np.testing.assert_allclose(mean, 0.0, atol=1e-4)
    np.testing.assert_allclose(var, 1.0, atol=1e-4)
    np.testing.assert_allclose(h, np.maximum(_np(linear(x)), 0.0), atol=1e-5)
    # A second fit does not re-initialize.
    before = [_np(w) for w in model.weights]
    model.fit(x * 3.0, np.zeros((32, 3), "float32"), batch_size=32, epochs=1, verbose=0)
    for b, w in zip(before, model.weights, strict=True):
        np.testing.assert_allclose(_np(w), b)
    return model, x


def test_data_init_inside_compiled_fit():
    _check_fit_initializes(jit_compile=False)


@requires_xla
def test_data_init_inside_xla_fit():
    _check_fit_initializes(jit_compile=True)


def test_reload_never_reinitializes(tmp_path):
    model, x = _check_fit_initializes(jit_compile=False)
    path = os.path.join(tmp_path, "wn.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    expected = _np(model(x))
    reloaded.compile(keras.optimizers.SGD(0.0), "mse")
    reloaded.fit(x * 5.0 + 1.0, np.zeros((32, 3), "float32"), batch_size=32, verbose=0)
    np.testing.assert_allclose(_np(reloaded(x)), expected, atol=1e-5)


def test_mixed_precision_matches_float32():
    x = np.random.default_rng(6).normal(size=(16, 5)).astype("float32")
    layer32 = WeightNormalization(keras.layers.Dense(4))
    y32 = _np(layer32(x, training=True))
    keras.config.set_dtype_policy("mixed_float16")
    layer16 = WeightNormalization(keras.layers.Dense(4))
    layer16.build(x.shape)
    layer16.set_weights(layer32.get_weights())
    y16 = layer16(x, training=False)
    assert keras.backend.standardize_dtype(y16.dtype) == "float16"
    assert keras.backend.standardize_dtype(layer16.g.dtype) == "float32"
    np.testing.assert_allclose(_np(y16).astype("float32"), y32, atol=2e-2)


# -- TF-Addons port -----------------------------------------------------------------------


def tfa_weight_norm_forward(x, tfa_weights, activation=np.tanh):
    """TF-Addons' WeightNormalization(Dense) forward, from its source, in NumPy.

    `tfa_weights` is its `get_weights()`: `[g, v, bias, initialized]` (the wrapper's own
    trainable `g`, then the wrapped layer's kernel `v` and bias, then the boolean flag;
    with `data_init=True` followed by the data-init clone's copies of kernel and bias).
    Initialized, its call is `kernel = l2_normalize(v, axis=[0]) * g` (l2_normalize divides
    by `sqrt(max(sum(v**2), 1e-12))`) followed by the Dense layer: `act(x @ kernel + b)`.
    """
    g, v, b, initialized = tfa_weights[:4]
    assert initialized
    v = v.astype("float64")
    kernel = v / np.sqrt(np.maximum((v**2).sum(axis=0, keepdims=True), 1e-12)) * g
    return activation(x.astype("float64") @ kernel + b)


def _tfa_to_ours(tfa_weights, data_init=True):
    """TF-Addons `[g, v, bias, initialized(, v_copy, bias_copy)]` -> ours (class docstring)."""
    g, v, b, initialized = tfa_weights[:4]
    if data_init:
        return [g, np.float32(initialized), np.zeros_like(g), np.zeros_like(b), v, b]
    return [g, v, b]


@pytest.mark.parametrize("data_init", [True, False])
def test_tfa_port_gives_the_same_outputs(data_init):
    rng = np.random.default_rng(7)
    g = rng.uniform(0.3, 3.0, size=(4,)).astype("float32")
    v = rng.normal(size=(6, 4)).astype("float32") * 0.05
    b = rng.normal(size=(4,)).astype("float32")
    tfa_weights = [g, v, b, np.array(True)]
    if data_init:  # the clone's copies, as initialized at build time (stale afterwards)
        tfa_weights += [rng.normal(size=(6, 4)).astype("float32"), np.zeros(4, "float32")]
    x = rng.normal(size=(10, 6)).astype("float32")
    model = keras.Sequential(
        [
            keras.Input((6,)),
            WeightNormalization(keras.layers.Dense(4, activation="tanh"), data_init=data_init),
        ]
    )
    model.set_weights(_tfa_to_ours(tfa_weights, data_init))
    expected = tfa_weight_norm_forward(x, tfa_weights)
    np.testing.assert_allclose(_np(model(x)), expected, atol=1e-6)
    # A ported, initialized model is not re-initialized by training.
    model.compile(keras.optimizers.SGD(0.0), "mse")
    model.fit(x, np.zeros((10, 4)), batch_size=10, verbose=0)
    np.testing.assert_allclose(_np(model(x)), expected, atol=1e-6)


# -- arguments ----------------------------------------------------------------------------


def test_bad_arguments():
    with pytest.raises(TypeError, match="`layer` must be a keras.layers.Layer"):
        WeightNormalization("dense")
    with pytest.raises(ValueError, match="`layer` must be one of"):
        WeightNormalization(keras.layers.SeparableConv2D(2, 3))
    with pytest.raises(ValueError, match="`layer` must be one of"):
        WeightNormalization(keras.layers.LayerNormalization())
    with pytest.raises(TypeError, match="`data_init` must be a Python bool"):
        WeightNormalization(keras.layers.Dense(2), data_init=1)


def test_config_round_trip():
    layer = WeightNormalization(keras.layers.Conv2D(3, 2, strides=2), data_init=False, name="wn")
    config = layer.get_config()
    assert config["data_init"] is False
    clone = WeightNormalization.from_config(config)
    assert isinstance(clone.layer, keras.layers.Conv2D) and clone.layer.strides == (2, 2)
    assert clone.compute_output_shape((None, 8, 8, 1)) == (None, 4, 4, 3)
    model = build_functional_model(clone, np.zeros((1, 8, 8, 1), "float32"))
    assert model.output_shape == (None, 4, 4, 3)


# -- training speed (slow) ----------------------------------------------------------------


def _digits_loss(weight_norm, epochs=3, depth=8, seed=0):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((64,))]
    for _ in range(depth):
        dense = keras.layers.Dense(
            64, activation="tanh", kernel_initializer=keras.initializers.RandomNormal(0.0, 0.05)
        )
        layers.append(WeightNormalization(dense) if weight_norm else dense)
    layers.append(keras.layers.Dense(10))
    model = keras.Sequential(layers)
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(x, y, batch_size=64, epochs=epochs, shuffle=True, verbose=0)
    return history.history["loss"][-1]


@pytest.mark.slow
def test_deep_net_trains_faster_on_digits():
    plain = _digits_loss(weight_norm=False)
    normalized = _digits_loss(weight_norm=True)
    # Seen: 3 epochs, 8 tanh layers: about 1.06 without, 0.11 with (TensorFlow).
    assert normalized < 0.5 * plain, (normalized, plain)
