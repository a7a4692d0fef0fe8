"""`AdaptiveGradientClipping`: NumPy reference, optax, compiled training, saving, errors."""

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.optimizers import AdaptiveGradientClipping
from tests.conftest import max_examples, requires_xla


def _np(x):
    return keras.ops.convert_to_numpy(x)


def np_agc(grad, param, clipping, eps=1e-3):
    """NFNets §4.1: per unit i (norms over every axis but the last; a vector is one unit),
    G_i <- clipping * max(|W_i|, eps) / |G_i| * G_i where |G_i| / max(|W_i|, eps) > clipping."""
    grad, param = grad.astype("float64"), param.astype("float64")
    axes = None if grad.ndim <= 1 else tuple(range(grad.ndim - 1))
    g_norm = np.sqrt((grad**2).sum(axis=axes, keepdims=True))
    p_norm = np.maximum(np.sqrt((param**2).sum(axis=axes, keepdims=True)), eps)
    ratio = g_norm / p_norm
    return np.where(ratio > clipping, grad * clipping * p_norm / np.maximum(g_norm, 1e-6), grad)


SHAPES = [(), (5,), (4, 3), (3, 4, 5), (3, 3, 2, 4), (2, 2, 2, 3, 4)]


def _pair(shape, seed):
    """A parameter and a gradient whose units straddle the clipping threshold."""
    rng = np.random.default_rng(seed)
    param = rng.normal(size=shape).astype("float32")
    grad = rng.normal(size=shape).astype("float32")
    units = shape[-1] if len(shape) >= 2 else 1
    scales = np.geomspace(1e-4, 1.0, units).astype("float32")
    return param, (grad * (scales if len(shape) >= 2 else scales[0] * 0.05)).astype("float32")


def _optimizer_step(shapes, clipping, eps, exclude=None, seed=0):
    """One AGC + SGD(lr=1) step on variables of `shapes`; returns (params, grads, new)."""
    variables, params, grads = [], [], []
    for i, shape in enumerate(shapes):
        param, grad = _pair(shape, seed + i)
        variables.append(keras.Variable(param, name=f"v{i}"))
        params.append(param)
        grads.append(grad)
    optimizer = AdaptiveGradientClipping(
        keras.optimizers.SGD(1.0), clipping=clipping, eps=eps, exclude=exclude
    )
    optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads], variables)
    return params, grads, [_np(v) for v in variables]


@pytest.mark.parametrize("clipping,eps", [(0.01, 1e-3), (0.16, 1e-3), (0.05, 1.0)])
def test_step_matches_numpy(clipping, eps):
    params, grads, new = _optimizer_step(SHAPES, clipping, eps)
    for p, g, n in zip(params, grads, new, strict=True):
        np.testing.assert_allclose(n, p - np_agc(g, p, clipping, eps), atol=1e-6)
    # The test is not vacuous: some units are clipped and some are not.
    clipped = [
        not np.allclose(np_agc(g, p, clipping, eps), g) for p, g in zip(params, grads, strict=True)
    ]
    assert any(clipped) and not all(clipped)


def test_equals_optax_adaptive_grad_clip():
    """To 1e-6 on the same gradients and parameters (optax 0.2.8's reductions for ranks
    1, 2, 4, 5; for a 3-D Conv1D kernel optax reduces axis 0 only by default, so it is
    given our fan-in axes (0, 1) explicitly)."""
    optax = pytest.importorskip("optax")
    jnp = pytest.importorskip("jax.numpy")
    clipping, eps = 0.02, 1e-3
    params, grads, new = _optimizer_step(SHAPES, clipping, eps, seed=10)
    for p, g, n in zip(params, grads, new, strict=True):
        axis = (0, 1) if p.ndim == 3 else None
        transform = optax.adaptive_grad_clip(clipping, eps, axis=axis)
        updates, _ = transform.update(
            jnp.asarray(g), transform.init(jnp.asarray(p)), jnp.asarray(p)
        )
        np.testing.assert_allclose(p - n, np.asarray(updates), atol=1e-6, rtol=0)


def test_exclude_leaves_matching_variables_unclipped():
    params, grads, new = _optimizer_step([(4, 3), (3,)], 0.001, 1e-3, exclude=["v1"])
    np.testing.assert_allclose(new[0], params[0] - np_agc(grads[0], params[0], 0.001), atol=1e-6)
    np.testing.assert_allclose(new[1], params[1] - grads[1], atol=1e-6)  # excluded: raw SGD


@settings(max_examples=max_examples(20))
@given(
    rows=st.integers(1, 6),
    units=st.integers(1, 6),
    clipping=st.floats(1e-3, 1.0),
    grad_scale=st.floats(1e-3, 1e3),
)
def test_clipped_units_are_bounded_and_keep_their_direction(rows, units, clipping, grad_scale):
    from keras_normkit.optimizers.adaptive_gradient_clipping import clip_unitwise

    rng = np.random.default_rng(rows * 10 + units)
    param = rng.normal(size=(rows, units)).astype("float32")
    grad = (grad_scale * rng.normal(size=(rows, units))).astype("float32")
    out = _np(clip_unitwise(keras.ops.convert_to_tensor(grad), param, clipping, 1e-3))
    bound = clipping * np.maximum(np.linalg.norm(param, axis=0), 1e-3)
    assert np.all(np.linalg.norm(out, axis=0) <= bound * (1 + 1e-5))
    # Same direction: out = c * grad per unit with 0 < c <= 1.
    c = (out * grad).sum(axis=0) / np.maximum((grad * grad).sum(axis=0), 1e-30)
    np.testing.assert_allclose(out, grad * c, rtol=1e-4, atol=1e-6 * grad_scale)
    assert np.all((c > 0) & (c <= 1 + 1e-6))


# -- inside model.fit -----------------------------------------------------------------------


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(4, activation="tanh", name="hidden"),
            keras.layers.Dense(2, name="classifier"),
        ]
    )


def _fit_matches_numpy(jit_compile):
    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    y = 10.0 * np.random.default_rng(1).normal(size=(8, 2)).astype("float32")
    model = _model()
    weights = [w.astype("float64") for w in model.get_weights()]
    lr, momentum, clipping = 0.5, 0.9, 0.05
    optimizer = AdaptiveGradientClipping(
        keras.optimizers.SGD(lr, momentum=momentum), clipping=clipping, exclude="classifier"
    )
    model.compile(optimizer, "mse", jit_compile=jit_compile)
    model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    # By hand: forward, mse gradient, AGC on the hidden layer only, Keras's momentum SGD.
    w1, b1, w2, b2 = weights
    velocity = [np.zeros_like(w) for w in weights]
    for _ in range(3):
        h = np.tanh(x @ w1 + b1)
        out = h @ w2 + b2
        d_out = 2.0 * (out - y) / out.size
        g_w2, g_b2 = h.T @ d_out, d_out.sum(0)
        d_h = d_out @ w2.T * (1 - h**2)
        g_w1, g_b1 = x.T @ d_h, d_h.sum(0)
        grads = [np_agc(g_w1, w1, clipping), np_agc(g_b1, b1, clipping), g_w2, g_b2]
        params = [w1, b1, w2, b2]
        for i in range(4):
            velocity[i] = momentum * velocity[i] - lr * grads[i]
            params[i] = params[i] + velocity[i]
        w1, b1, w2, b2 = params
    assert not np.allclose(np_agc(g_w1, w1, clipping), g_w1)  # the hidden layer was clipped
    for actual, expected in zip(model.get_weights(), [w1, b1, w2, b2], strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
    return model, x, y


def test_fit_matches_numpy():
    _fit_matches_numpy(jit_compile=False)


@requires_xla
def test_fit_matches_numpy_with_xla():
    _fit_matches_numpy(jit_compile=True)


def test_keras_round_trip_keeps_the_wrapper_and_its_state(tmp_path):
    model, x, y = _fit_matches_numpy(jit_compile=False)
    path = str(tmp_path / "agc.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    optimizer = reloaded.optimizer
    assert isinstance(optimizer, AdaptiveGradientClipping)
    assert optimizer.clipping == 0.05 and optimizer.exclude == ("classifier",)
    assert isinstance(optimizer.inner_optimizer, keras.optimizers.SGD)
    assert int(_np(optimizer.iterations)) == 3
    for a, b in zip(model.optimizer.variables, optimizer.variables, strict=True):
        np.testing.assert_allclose(_np(a), _np(b))
    # Both continue identically (momentum state included).
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    reloaded.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), reloaded.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_learning_rate_and_iterations_are_the_wrapped_optimizers():
    inner = keras.optimizers.Adam(1e-3)
    optimizer = AdaptiveGradientClipping(inner)
    optimizer.learning_rate = 5e-4
    assert float(_np(inner.learning_rate)) == pytest.approx(5e-4)
    assert optimizer.iterations is inner.iterations


def test_mixed_precision_loss_scaling_wraps_it():
    keras.config.set_dtype_policy("mixed_float16")
    model = _model()
    model.compile(AdaptiveGradientClipping(keras.optimizers.SGD(0.1)), "mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    x = np.ones((4, 3), "float32")
    model.fit(x, np.ones((4, 2), "float32"), verbose=0)
    assert all(np.all(np.isfinite(w)) for w in model.get_weights())


def test_bad_arguments():
    sgd = keras.optimizers.SGD(0.1)
    with pytest.raises(ValueError, match="`clipping` must be a number > 0"):
        AdaptiveGradientClipping(sgd, clipping=0.0)
    with pytest.raises(ValueError, match="`clipping` must be a number > 0"):
        AdaptiveGradientClipping(sgd, clipping=-0.1)
    with pytest.raises(ValueError, match="`eps` must be a number >= 0"):
        AdaptiveGradientClipping(sgd, eps=-1.0)
    with pytest.raises(TypeError, match="`optimizer` must be a keras.optimizers.Optimizer"):
        AdaptiveGradientClipping("sgd")
    with pytest.raises(ValueError, match="must not be a LossScaleOptimizer"):
        AdaptiveGradientClipping(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()))
    with pytest.raises(ValueError, match="must not scale the loss"):
        AdaptiveGradientClipping(keras.optimizers.SGD(loss_scale_factor=8.0))
    with pytest.raises(TypeError, match="`exclude` must be None, a string or a list"):
        AdaptiveGradientClipping(sgd, exclude=[1])
    with pytest.raises(ValueError, match="regular expressions"):
        AdaptiveGradientClipping(sgd, exclude=["("])
