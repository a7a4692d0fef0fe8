"""Initializers: delta-orthogonal kernels (dynamical isometry) and LSUV."""

import os
import tempfile
import warnings

import keras
import numpy as np
import pytest

from keras_normkit.initializers import ConvolutionDeltaOrthogonal, lsuv_initialize


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


# --------------------------------------------------------------------------------------
# ConvolutionDeltaOrthogonal
# --------------------------------------------------------------------------------------


def test_delta_orthogonal_structure():
    for shape, centre in [
        ((3, 3, 4, 8), (1, 1)),
        ((5, 2, 6), (2,)),
        ((3, 3, 3, 2, 2), (1, 1, 1)),
        ((2, 2, 3, 3), (0, 0)),  # even size: the tap 'same' padding aligns, (k - 1) // 2
        ((1, 1, 5, 5), (0, 0)),
    ]:
        kernel = to_numpy(ConvolutionDeltaOrthogonal(gain=1.5, seed=1)(shape))
        assert kernel.shape == shape
        h = kernel[centre]
        np.testing.assert_allclose(h @ h.T, 1.5**2 * np.eye(shape[-2]), atol=1e-5)
        rest = kernel.copy()
        rest[centre] = 0
        assert np.all(rest == 0), shape


def _deep_linear_cnn(initializer, depth=50, dtype="float64"):
    model = keras.Sequential([keras.Input((8, 8, 4), dtype=dtype)])
    for _ in range(depth):
        model.add(
            keras.layers.Conv2D(
                4, 3, padding="same", use_bias=False, kernel_initializer=initializer, dtype=dtype
            )
        )
    return model


def _jacobian_singular_values(model):
    # The network is linear, so its Jacobian's columns are its outputs on the 256 basis
    # inputs: one batched forward pass gives the full 256 x 256 Jacobian.
    basis = np.eye(8 * 8 * 4).reshape(256, 8, 8, 4)
    jacobian = to_numpy(model(basis)).reshape(256, 256).T
    return np.linalg.svd(jacobian, compute_uv=False)


def test_dynamical_isometry_of_50_layer_linear_cnn():
    keras.utils.set_random_seed(0)
    delta = _jacobian_singular_values(_deep_linear_cnn(ConvolutionDeltaOrthogonal()))
    assert np.all(np.abs(delta - 1.0) <= 1e-4), (delta.min(), delta.max())
    glorot = _jacobian_singular_values(_deep_linear_cnn("glorot_uniform"))
    assert glorot[0] / glorot[-1] > 1e6, glorot[0] / glorot[-1]


def test_even_kernel_same_padding_is_an_isometry():
    layer = keras.layers.Conv2D(
        6, 2, padding="same", use_bias=False, kernel_initializer=ConvolutionDeltaOrthogonal()
    )
    x = np.random.default_rng(0).normal(size=(3, 5, 5, 4)).astype("float32")
    y = to_numpy(layer(x))
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_delta_orthogonal_seed_config_and_round_trip():
    init = ConvolutionDeltaOrthogonal(gain=2.0, seed=7)
    np.testing.assert_array_equal(to_numpy(init((3, 3, 2, 4))), to_numpy(init((3, 3, 2, 4))))
    assert init.get_config() == {"gain": 2.0, "seed": 7}
    # Unseeded instances differ from each other (as Keras's own initializers do).
    a, b = ConvolutionDeltaOrthogonal(), ConvolutionDeltaOrthogonal()
    assert not np.allclose(to_numpy(a((3, 3, 4, 4))), to_numpy(b((3, 3, 4, 4))))
    inputs = keras.Input((6, 6, 2))
    outputs = keras.layers.Conv2D(4, 3, kernel_initializer=init)(inputs)
    model = keras.Model(inputs, outputs)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
    restored = loaded.layers[1].kernel_initializer
    assert isinstance(restored, ConvolutionDeltaOrthogonal)
    assert restored.get_config() == {"gain": 2.0, "seed": 7}
    np.testing.assert_array_equal(loaded.layers[1].kernel.numpy(), model.layers[1].kernel.numpy())


def test_delta_orthogonal_bad_input():
    with pytest.raises(ValueError, match=r"cout >= cin.*cin=8, cout=4"):
        ConvolutionDeltaOrthogonal()((3, 3, 8, 4))
    with pytest.raises(ValueError, match="shape"):
        ConvolutionDeltaOrthogonal()((4, 4))
    for kwargs, error in [
        ({"gain": 0.0}, ValueError),
        ({"gain": float("inf")}, ValueError),
        ({"gain": "1"}, TypeError),
    ]:
        with pytest.raises(error, match="gain"):
            ConvolutionDeltaOrthogonal(**kwargs)
    with pytest.raises(TypeError, match="seed"):
        ConvolutionDeltaOrthogonal(seed=1.0)


# --------------------------------------------------------------------------------------
# LSUV
# --------------------------------------------------------------------------------------


def _pre_activation_variances(model, x):
    """Var(kernel . h + bias) of every kernel layer, recomputed independently in NumPy."""
    variances, h = [], x
    for layer in model.layers:
        if hasattr(layer, "kernel"):
            w, b = layer.kernel.numpy(), layer.bias.numpy()
            if w.ndim == 2:
                z = h @ w + b
            else:
                z = to_numpy(keras.ops.conv(h, w, padding=layer.padding)) + b
            variances.append(float(np.var(z)))
            h = to_numpy(layer.activation(z))
        else:
            h = to_numpy(layer(h))
    return variances


def _deep_tanh_mlp(depth=20, width=32):
    layers = [keras.layers.Dense(width, activation="tanh") for _ in range(depth)]
    return keras.Sequential([keras.Input((16,))] + layers + [keras.layers.Dense(10)])


def test_lsuv_unit_variance_on_20_layer_tanh_mlp():
    x = np.random.default_rng(0).normal(size=(256, 16)).astype("float32") * 3.0
    model = _deep_tanh_mlp()
    before = _pre_activation_variances(model, x)
    report = lsuv_initialize(model, x, tolerance=0.05, seed=0)
    after = _pre_activation_variances(model, x)
    assert len(report) == 21 and [r["layer"] for r in report] == [m.name for m in model.layers]
    assert max(abs(v - 1.0) for v in before) > 0.2  # Glorot was not already there
    assert all(abs(v - 1.0) <= 0.05 for v in after), after
    np.testing.assert_allclose([r["variance"] for r in report], after, rtol=1e-4)
    assert all(r["converged"] for r in report)
    # Orthogonal then rescaled: each kernel is c * (matrix with orthonormal columns/rows).
    for layer in model.layers[1:]:
        w = layer.kernel.numpy()
        gram = w.T @ w if w.shape[1] <= w.shape[0] else w @ w.T
        np.testing.assert_allclose(gram / gram[0, 0], np.eye(len(gram)), atol=1e-4)


def test_lsuv_small_functional_cnn_and_skipped_layers():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 8, 8, 1)).astype("float32")
    inputs = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(16, 3, activation="relu")(h)
    h = keras.layers.Dropout(0.5)(h)
    h = keras.layers.Flatten()(h)
    outputs = keras.layers.Dense(10, activation="softmax")(h)
    model = keras.Model(inputs, outputs)
    report = lsuv_initialize(model, x, target_variance=2.0, tolerance=0.02, seed=1)
    assert [r["layer"] for r in report] == [model.layers[i].name for i in (1, 3, 6)]
    variances = _pre_activation_variances(keras.Sequential(model.layers[1:]), x)
    assert all(abs(v - 2.0) <= 0.02 for v in variances), variances


def test_lsuv_reports_non_convergence_honestly():
    x = np.random.default_rng(2).normal(size=(128, 16)).astype("float32")
    model = _deep_tanh_mlp(depth=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = lsuv_initialize(model, x, tolerance=1e-9, max_iterations=1)
    assert all(r["iterations"] == 1 for r in report)
    # One rescaling is exact for a bias-free, zero-bias layer: it gets within float error.
    assert all(abs(r["variance"] - 1.0) < 1e-5 for r in report)
    # Layers that missed the (absurd) tolerance are named, with the reason.
    missed = [r for r in report if not r["converged"]]
    assert all("after max_iterations=1 rescalings" in r["reason"] for r in missed)
    assert all(r["reason"] is None for r in report if r["converged"])
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    if missed:
        assert len(messages) == 1 and "increase `max_iterations` or `tolerance`" in messages[0]
    else:
        assert not messages


@pytest.mark.parametrize("value", [0.0, 3.0])
def test_lsuv_on_a_constant_batch_warns_with_the_reason(value):
    x = np.full((64, 16), value, "float32")
    model = _deep_tanh_mlp(depth=3)
    if value == 0.0:
        # Every pre-activation is 0: no rescaling can give it variance 1.
        with pytest.warns(UserWarning) as record:
            report = lsuv_initialize(model, x, seed=0)
        # Only the UserWarnings: on PyTorch, Keras's convert_to_numpy also emits NumPy 2's
        # DeprecationWarning about torch's `__array__` (not this library's).
        (message,) = [str(w.message) for w in record if issubclass(w.category, UserWarning)]
        assert "lsuv_initialize did not reach target_variance=1.0" in message
        assert f"for {len(report)} of {len(report)} layer(s)" in message
        assert "output variance on `x` is 0" in message and "constant" in message
        for r in report:
            assert r["converged"] is False and r["variance"] == 0.0 and r["iterations"] == 0
            assert "no rescaling of the kernel can reach the target" in r["reason"]
            assert f"{r['layer']!r}: its output variance on `x` is 0" in message
        for layer in model.layers:  # the kernels were not blown up by a division by 0
            assert np.isfinite(keras.ops.convert_to_numpy(layer.kernel)).all()
    else:
        # A constant non-zero batch still varies across units: LSUV works, silently.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # Third-party: NumPy 2's DeprecationWarning about torch's `__array__` (PyTorch).
            warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
            report = lsuv_initialize(model, x, seed=0)
        assert all(r["converged"] for r in report)


def test_lsuv_non_finite_batch_warns():
    x = np.random.default_rng(0).normal(size=(64, 16)).astype("float32")
    x[3, 2] = np.nan
    with pytest.warns(UserWarning, match=r"not finite \(nan\); check `x` for NaN or inf"):
        report = lsuv_initialize(_deep_tanh_mlp(depth=2), x, seed=0)
    assert report[0]["iterations"] == 0 and not report[0]["converged"]


def test_lsuv_bad_input():
    model = _deep_tanh_mlp(depth=2)
    x = np.zeros((8, 16), "float32")
    for kwargs, error, name in [
        ({"target_variance": 0.0}, ValueError, "target_variance"),
        ({"tolerance": -1.0}, ValueError, "tolerance"),
        ({"tolerance": "0.1"}, TypeError, "tolerance"),
        ({"max_iterations": 0}, ValueError, "max_iterations"),
        ({"max_iterations": 2.0}, TypeError, "max_iterations"),
    ]:
        with pytest.raises(error, match=name):
            lsuv_initialize(model, x, **kwargs)
    with pytest.raises(ValueError, match="non-empty"):
        lsuv_initialize(model, np.zeros((0, 16), "float32"))
    with pytest.raises(TypeError, match="model"):
        lsuv_initialize("not a model", x)

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(3)

        def call(self, inputs):
            return self.dense(inputs)

    with pytest.raises(TypeError, match="Sequential or Functional"):
        lsuv_initialize(Subclassed(), x)
