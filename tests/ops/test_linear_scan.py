"""`keras_normkit.ops.linear_scan` against a sequential NumPy loop: values and gradients."""

import keras
import numpy as np
import pytest

from keras_normkit.ops import linear_scan
from keras_normkit.ops.linear_scan import MAX_DYNAMIC_STEPS
from tests.conftest import requires_tensorflow

# Chunks of 8 steps for scalar decays (recursion levels at 8, 64, 512 steps), blocks of 32
# for one decay per unit (levels at 32, 1024): lengths on both sides of each boundary.
LENGTHS = [1, 2, 7, 8, 9, 31, 32, 33, 65, 513, 1025, 1100]


def numpy_scan(a, b):
    """The recurrence itself, one step at a time, in float64."""
    h, out = np.zeros(b.shape[::2]), np.zeros(b.shape)
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def numpy_scan_gradients(a, b, upstream):
    """`(dL/da, dL/db)` of `L = sum(upstream * h)`, back-propagated through the loop."""
    h = numpy_scan(a, b)
    h_prev = np.concatenate([np.zeros_like(h[:, :1]), h[:, :-1]], axis=1)
    grad_h = np.zeros(b.shape[::2])  # dL/dh_t, carried backward through h_{t+1} = a h_t + b
    grad_a, grad_b = np.zeros(b.shape), np.zeros(b.shape)
    for t in reversed(range(b.shape[1])):
        grad_h = upstream[:, t] + (a[:, t + 1] * grad_h if t + 1 < b.shape[1] else 0.0)
        grad_b[:, t] = grad_h
        grad_a[:, t] = grad_h * h_prev[:, t]
    if a.shape[-1] == 1:
        grad_a = grad_a.sum(axis=-1, keepdims=True)
    return grad_a, grad_b


def to_numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(tensor))


def scan_gradients(a, b, upstream):
    """`(h, dL/da, dL/db)` of `L = sum(upstream * linear_scan(a, b))` on the active backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        a, b = tf.constant(a), tf.constant(b)
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            h = linear_scan(a, b)
            loss = tf.reduce_sum(h * upstream)
        grad_a, grad_b = tape.gradient(loss, [a, b])
    elif backend == "jax":
        import jax

        def loss(a, b):
            h = linear_scan(a, b)
            return (h * upstream).sum(), h

        (_, h), (grad_a, grad_b) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(a, b)
    elif backend == "torch":
        import torch

        a, b = (torch.tensor(v, requires_grad=True) for v in (a, b))
        h = linear_scan(a, b)
        (h * torch.tensor(upstream)).sum().backward()
        grad_a, grad_b, h = a.grad, b.grad, h.detach()
    else:  # pragma: no cover
        pytest.skip(f"no gradient helper for backend {backend}")
    return to_numpy(h), to_numpy(grad_a), to_numpy(grad_b)


def random_problem(steps, gates, units=3, seed=None, dtype="float32"):
    rng = np.random.default_rng(steps if seed is None else seed)
    a = rng.uniform(0, 1, size=(2, steps, gates)) ** 0.1  # mostly near 1: long memory
    b = rng.normal(size=(2, steps, units))
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("gates", [1, 3], ids=["scalar_decays", "vector_decays"])
@pytest.mark.parametrize("steps", LENGTHS)
def test_values_match_the_loop(steps, gates):
    a, b = random_problem(steps, gates)
    out = to_numpy(linear_scan(a, b))
    assert out.shape == b.shape and out.dtype == np.float32
    np.testing.assert_allclose(
        out, numpy_scan(a.astype("float64"), b.astype("float64")), atol=2e-5, rtol=1e-5
    )


@pytest.mark.parametrize("gates", [1, 3], ids=["scalar_decays", "vector_decays"])
@pytest.mark.parametrize("steps", [1, 7, 8, 9, 33, 70])
def test_gradients_match_the_loop(steps, gates):
    a, b = random_problem(steps, gates, seed=100 + steps)
    upstream = np.random.default_rng(steps).normal(size=b.shape).astype("float32")
    h, grad_a, grad_b = scan_gradients(a, b, upstream)
    expected_a, expected_b = numpy_scan_gradients(
        a.astype("float64"), b.astype("float64"), upstream.astype("float64")
    )
    np.testing.assert_allclose(h, numpy_scan(a.astype("float64"), b), atol=2e-5, rtol=1e-5)
    assert grad_a.shape == a.shape and grad_b.shape == b.shape
    np.testing.assert_allclose(grad_b, expected_b, atol=5e-5, rtol=1e-5)
    np.testing.assert_allclose(grad_a, expected_a, atol=1e-4, rtol=1e-5)


def test_numpy_gradient_reference_matches_finite_differences():
    """The hand-derived backward loop above is itself right (central differences)."""
    a, b = random_problem(5, 1, units=2, seed=3, dtype="float64")
    upstream = np.random.default_rng(4).normal(size=b.shape)
    grad_a, grad_b = numpy_scan_gradients(a, b, upstream)
    eps = 1e-6
    for array, grad in ((a, grad_a), (b, grad_b)):
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + eps
            up = (numpy_scan(a, b) * upstream).sum()
            array[index] = saved - eps
            down = (numpy_scan(a, b) * upstream).sum()
            array[index] = saved
            assert abs((up - down) / (2 * eps) - grad[index]) < 1e-6


@pytest.mark.parametrize("gates", [1, 2], ids=["scalar_decays", "vector_decays"])
@pytest.mark.parametrize("steps", [1, 9, 40])
def test_float64_is_kept_and_exact(steps, gates):
    if keras.backend.backend() != "tensorflow":
        # keras.src.backend.common.dtypes: float64 promotes to float32 outside TensorFlow.
        pytest.skip("Keras computes float64 in float32 on this backend (type promotion)")
    a, b = random_problem(steps, gates, units=2, dtype="float64")
    out = to_numpy(linear_scan(a, b))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, numpy_scan(a, b), atol=1e-12, rtol=1e-12)


def test_single_step_is_b():
    a = np.array([[[0.3]]], "float32")
    b = np.array([[[2.0, -1.0]]], "float32")
    np.testing.assert_array_equal(to_numpy(linear_scan(a, b)), b)


def test_exact_zero_and_one_decays():
    """Decay 1 carries the state unchanged, decay 0 resets it: exact integers."""
    a = np.array([[1, 0, 1, 1, 0, 0, 1]], "float32")[..., None]
    b = np.arange(1, 8, dtype="float32")[None, :, None]
    np.testing.assert_array_equal(to_numpy(linear_scan(a, b))[0, :, 0], [1, 2, 5, 9, 5, 6, 13])
    vector_a = np.concatenate([a, 1 - a], axis=-1)  # the same per unit, and its complement
    out = to_numpy(linear_scan(vector_a, np.concatenate([b, b], axis=-1)))[0]
    np.testing.assert_array_equal(out[:, 0], [1, 2, 5, 9, 5, 6, 13])
    np.testing.assert_array_equal(out[:, 1], [1, 3, 3, 4, 9, 15, 7])


def test_all_ones_is_a_cumulative_sum_and_all_zeros_is_b():
    b = np.random.default_rng(1).normal(size=(2, 70, 3)).astype("float32")
    for gates in (1, 3):
        ones = np.ones((2, 70, gates), "float32")
        np.testing.assert_allclose(to_numpy(linear_scan(ones, b)), np.cumsum(b, axis=1), atol=1e-4)
        np.testing.assert_array_equal(to_numpy(linear_scan(0 * ones, b)), b)


def test_zero_tiny_and_unit_decays_across_chunks():
    """Exact 0, subnormal and 1 decays mixed over many chunks: no NaN, loop == scan."""
    rng = np.random.default_rng(0)
    a = rng.choice(np.array([0.0, 1e-39, 1e-20, 0.5, 1.0], "float32"), size=(3, 300, 1))
    b = rng.normal(size=(3, 300, 4)).astype("float32")
    for decays in (a, np.repeat(a, 4, axis=-1)):
        out = to_numpy(linear_scan(decays, b))
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out, numpy_scan(decays.astype("float64"), b), atol=1e-5)


@pytest.mark.parametrize("gates", [1, 2], ids=["scalar_decays", "vector_decays"])
def test_long_sequences_stay_finite(gates):
    """T=20000 with decays at, near and far from 1: finite values and gradients."""
    rng = np.random.default_rng(9)
    steps = 20000
    a = rng.choice(np.array([1.0, 1 - 1e-7, 0.999, 0.0], "float32"), size=(1, steps, gates))
    a[:, : steps // 2] = 1.0  # a long stretch of pure accumulation
    b = rng.normal(size=(1, steps, 2)).astype("float32")
    upstream = np.ones_like(b)
    h, grad_a, grad_b = scan_gradients(a, b, upstream)
    assert np.isfinite(h).all() and np.isfinite(grad_a).all() and np.isfinite(grad_b).all()
    expected = numpy_scan(a.astype("float64"), b.astype("float64"))
    np.testing.assert_allclose(h, expected, atol=1e-3 * np.abs(expected).max(), rtol=0)


@requires_tensorflow  # tf.function with an unknown time axis
def test_unknown_time_axis_matches_the_loop():
    import tensorflow as tf

    for gates in (1, 3):
        spec = [tf.TensorSpec((None, None, gates)), tf.TensorSpec((None, None, 3))]
        dynamic_scan = tf.function(linear_scan, input_signature=spec)
        for steps in LENGTHS:
            a, b = random_problem(steps, gates)
            np.testing.assert_allclose(
                to_numpy(dynamic_scan(a, b)),
                numpy_scan(a.astype("float64"), b.astype("float64")),
                atol=2e-5,
                rtol=1e-5,
                err_msg=f"{steps} steps, {gates} gates",
            )
    assert MAX_DYNAMIC_STEPS == 2**26


@requires_tensorflow  # a TensorFlow graph with an unknown batch size, as in `fit`
@pytest.mark.parametrize("gates", [1, 3], ids=["scalar_decays", "vector_decays"])
def test_unknown_batch_keeps_the_static_length(gates):
    """In `fit` the batch size is unknown; the length must stay static through every level,
    the output and the gradient's scan (a lost length sent the backward scan down the
    unknown-length path: 0.1 s instead of 1 ms per step for 10 steps)."""
    import tensorflow as tf

    def graph(batch, steps):
        spec = [tf.TensorSpec((batch, steps, gates)), tf.TensorSpec((batch, steps, 3))]

        def forward_backward(a, b):
            with tf.GradientTape() as tape:
                tape.watch([a, b])
                h = linear_scan(a, b)
                loss = tf.reduce_sum(h * h)
            return (h, *tape.gradient(loss, [a, b]))

        return tf.function(forward_backward, input_signature=spec).get_concrete_function()

    for steps in (10, 70):
        known, unknown = graph(4, steps), graph(None, steps)
        shapes = [tuple(t.shape) for t in unknown.outputs]  # h, dL/da, dL/db
        assert shapes == [(None, steps, 3), (None, steps, gates), (None, steps, 3)]
        # The same algorithm, so a graph of about the same size: the unknown batch size
        # adds shape operations (~1.5x), the unknown-length path was 4.5-14x larger.
        n_known = len(known.graph.get_operations())
        n_unknown = len(unknown.graph.get_operations())
        assert n_unknown < 2 * n_known, (steps, n_known, n_unknown)
    a, b = random_problem(10, gates)
    h, grad_a, grad_b = graph(None, 10)(a, b)
    expected_a, expected_b = numpy_scan_gradients(
        a.astype("float64"), b.astype("float64"), 2 * numpy_scan(a, b)
    )
    np.testing.assert_allclose(to_numpy(grad_b), expected_b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_numpy(grad_a), expected_a, rtol=1e-4, atol=1e-4)


def test_bad_shapes():
    with pytest.raises(ValueError, match="rank 3"):
        linear_scan(np.ones((2, 5), "float32"), np.ones((2, 5, 3), "float32"))
    with pytest.raises(ValueError, match="must be 1 .* or that of `b`"):
        linear_scan(np.ones((2, 5, 2), "float32"), np.ones((2, 5, 3), "float32"))
