"""`keras_normkit.ops.layer_norm`: Keras's `LayerNormalization` formula, hand-derived gradient.

Outputs are compared with `keras.layers.LayerNormalization` (same epsilon, gain and shift)
to 1e-6 and gradients (of the input, gain and shift) to 1e-5 in float32, as the layer-norm
RNN cells require; the gradients also against a float64 NumPy reference derived from the
forward formula by central differences. `derived_gradient=False` (automatic differentiation
of the same forward formula, what `FastWeightsRNN` runs) is held to the same tolerances.
"""

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.ops.layer_norm import layer_norm, normalize


def value_and_grads(fn, args, upstream):
    """`fn(*args)` and the gradients of `sum(fn(*args) * upstream)` w.r.t. every arg."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        args = [tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(args)
            y = fn(*args)
            loss = tf.reduce_sum(y * upstream)
        return y.numpy(), [g.numpy() for g in tape.gradient(loss, args)]
    if backend == "jax":
        import jax

        y, vjp = jax.vjp(fn, *args)
        return np.asarray(y), [np.asarray(g) for g in vjp(upstream.astype(y.dtype))]
    # On Keras's device (a GPU where there is one), as the layers' own tensors are.
    args = [keras.ops.convert_to_tensor(a).requires_grad_(True) for a in args]
    y = fn(*args)
    (y * keras.ops.convert_to_tensor(upstream)).sum().backward()
    return y.detach().cpu().numpy(), [a.grad.cpu().numpy() for a in args]


def keras_layer_norm(epsilon, shape):
    """`keras.layers.LayerNormalization`, with the gain and shift as differentiable inputs."""
    norm = keras.layers.LayerNormalization(epsilon=epsilon)
    norm.build(shape)

    def fn(x, gamma, beta):
        return norm.stateless_call([gamma, beta], [], x)[0]

    return fn


def numpy_layer_norm(x, gamma, beta, epsilon):
    x = x.astype("float64")
    mean = x.mean(-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) + beta


def _case(rng, shape, scale=1.0, offset=0.0):
    features = shape[-1]
    x = (offset + scale * rng.normal(size=shape)).astype("float32")
    gamma = rng.uniform(0.5, 1.5, size=features).astype("float32")
    beta = rng.normal(size=features).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    return x, gamma, beta, upstream


@pytest.mark.parametrize("shape", [(64, 512), (3, 7, 20), (2, 3)])
@pytest.mark.parametrize("epsilon", [1e-3, 1e-6])
@pytest.mark.parametrize("derived_gradient", [True, False])
def test_equals_keras_layer_normalization(shape, epsilon, derived_gradient):
    x, gamma, beta, upstream = _case(np.random.default_rng(0), shape, scale=2.0, offset=0.5)

    def ours(x, gamma, beta):
        return layer_norm(x, gamma, beta, epsilon, derived_gradient=derived_gradient)

    y, grads = value_and_grads(ours, [x, gamma, beta], upstream)
    y_keras, keras_grads = value_and_grads(
        keras_layer_norm(epsilon, shape), [x, gamma, beta], upstream
    )
    np.testing.assert_allclose(y, y_keras, atol=1e-6)
    np.testing.assert_allclose(y, numpy_layer_norm(x, gamma, beta, epsilon), atol=1e-5)
    for got, expected in zip(grads, keras_grads, strict=True):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_constant_features_give_the_shift():
    """Zero variance: x_hat = 0 exactly, so y = beta and dx = 0 (no cancellation)."""
    x = np.full((2, 5), 123.25, "float32")
    gamma, beta = np.full(5, 2.0, "float32"), np.linspace(-1, 1, 5).astype("float32")
    y, grads = value_and_grads(lambda *a: layer_norm(*a, 1e-6), [x, gamma, beta], np.ones_like(x))
    np.testing.assert_array_equal(y, np.broadcast_to(beta, x.shape))
    np.testing.assert_array_equal(grads[0], 0.0)


def test_gradients_match_central_differences():
    """The backward formula against the forward formula, in float64 NumPy."""
    rng = np.random.default_rng(1)
    x, gamma, beta, upstream = _case(rng, (3, 6), scale=1.5)
    _, grads = value_and_grads(lambda *a: layer_norm(*a, 1e-3), [x, gamma, beta], upstream)
    args = [a.astype("float64") for a in (x, gamma, beta)]

    def loss(*a):
        return float((numpy_layer_norm(*a, 1e-3) * upstream).sum())

    for i, grad in enumerate(grads):
        numeric = np.zeros_like(args[i])
        for index in np.ndindex(args[i].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[i][index] += 1e-6
            minus[i][index] -= 1e-6
            numeric[index] = (loss(*plus) - loss(*minus)) / 2e-6
        np.testing.assert_allclose(grad, numeric, atol=2e-4, rtol=1e-4)


@settings(max_examples=12, deadline=None)
@given(
    batch=st.integers(1, 5),
    features=st.integers(2, 40),
    scale=st.floats(1e-2, 1e2),
    epsilon=st.sampled_from([1e-5, 1e-3, 1e-1]),
    seed=st.integers(0, 2**16),
)
def test_property_shapes_and_values(batch, features, scale, epsilon, seed):
    x, gamma, beta, upstream = _case(np.random.default_rng(seed), (batch, features), scale)
    y, grads = value_and_grads(lambda *a: layer_norm(*a, epsilon), [x, gamma, beta], upstream)
    assert y.shape == x.shape and y.dtype == np.float32
    expected = numpy_layer_norm(x, gamma, beta, epsilon)
    np.testing.assert_allclose(y, expected, atol=1e-4 * max(1.0, np.abs(expected).max()))
    assert all(np.isfinite(g).all() for g in grads)
    # The input gradient is orthogonal to the directions LN removes (shift of every entry).
    np.testing.assert_allclose(
        grads[0].sum(-1), 0.0, atol=1e-3 * max(1.0, np.abs(grads[0]).max()) * features
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_is_normalized_in_float32(dtype):
    x, gamma, beta, _ = _case(np.random.default_rng(2), (4, 64), scale=3.0, offset=100.0)
    y = layer_norm(keras.ops.cast(x, dtype), gamma, beta, 1e-3)
    assert keras.backend.standardize_dtype(y.dtype) == dtype
    expected = numpy_layer_norm(
        keras.ops.convert_to_numpy(keras.ops.cast(x, dtype)), gamma, beta, 1e-3
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(y, "float32")), expected, atol=0.05
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": -1e-3}, ValueError, "epsilon"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"epsilon": "1e-3"}, TypeError, "epsilon"),
        ({"epsilon": 1e-3, "derived_gradient": 1}, TypeError, "derived_gradient"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, message):
    x = np.ones((2, 3), "float32")
    with pytest.raises(error, match=message):
        layer_norm(x, np.ones(3), np.zeros(3), **kwargs)


def test_normalize_uses_the_layers_weights():
    norm = keras.layers.LayerNormalization(epsilon=1e-2)
    norm.build((None, 8))
    rng = np.random.default_rng(3)
    norm.set_weights([rng.uniform(0.5, 2, 8), rng.normal(size=8)])
    x = rng.normal(size=(5, 8)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(normalize(norm, x)),
        keras.ops.convert_to_numpy(norm(x)),
        atol=1e-6,
    )
