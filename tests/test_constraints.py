"""Constraints: the Parseval retraction and the simplex projection against references."""

import itertools
import math
import os
import tempfile

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize

from keras_normkit.constraints import ParsevalConstraint, Simplex, project_to_simplex
from tests.conftest import requires_tensorflow, requires_xla


def numpy_retraction(w, beta, conv_scaling=True):
    """W <- (1 + beta) W - beta W W^T W on the reshaped (scaled) kernel."""
    w = np.asarray(w, dtype="float64")
    m = w.reshape(-1, w.shape[-1])
    scale = math.sqrt(np.prod(w.shape[:-2])) if conv_scaling and w.ndim > 2 else 1.0
    m = m * scale
    m = (1 + beta) * m - beta * m @ m.T @ m
    return (m / scale).reshape(w.shape)


def matrix_with_singular_values(rows, cols, values, seed=0):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(rows, len(values))))
    v, _ = np.linalg.qr(rng.normal(size=(cols, len(values))))
    return u @ np.diag(values) @ v.T, u, v


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


# --------------------------------------------------------------------------------------
# ParsevalConstraint
# --------------------------------------------------------------------------------------


def test_one_step_matches_numpy():
    cases = [((20, 8), True), ((8, 20), True), ((3, 3, 4, 6), True), ((3, 3, 4, 6), False)]
    for shape, conv_scaling in cases + [((5, 3, 7), True)]:
        w = np.random.default_rng(0).normal(size=shape).astype("float32") * 0.2
        out = ParsevalConstraint(beta=0.05, conv_scaling=conv_scaling)(w)
        np.testing.assert_allclose(
            to_numpy(out), numpy_retraction(w, 0.05, conv_scaling), rtol=1e-5, atol=1e-6
        )


def test_num_iterations_is_repeated_steps():
    w = np.random.default_rng(1).normal(size=(12, 5)).astype("float32") * 0.3
    expected = w
    for _ in range(4):
        expected = numpy_retraction(expected, 0.1)
    out = ParsevalConstraint(beta=0.1, num_iterations=4)(w)
    np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-5, atol=1e-6)


def test_repeated_retraction_drives_singular_values_to_one():
    for rows, cols in [(24, 10), (10, 24), (16, 16)]:
        values = np.linspace(0.3, 2.0, min(rows, cols))
        w, u, v = matrix_with_singular_values(rows, cols, values, seed=rows)
        constraint = ParsevalConstraint(beta=0.2)
        x = w.astype("float32")
        for _ in range(60):
            x = constraint(x)
        s = np.linalg.svd(to_numpy(x), compute_uv=False)
        assert np.all(np.abs(s - 1.0) <= 1e-3), s
        # Singular vectors are kept: the limit is the polar factor U V^T (closest frame).
        np.testing.assert_allclose(to_numpy(x), u @ v.T, atol=2e-3)


def _conv_operator(kernel, size):
    """The matrix of the 'same'-padded convolution on size x size x cin images."""
    cin = kernel.shape[2]
    n = size * size * cin
    basis = np.eye(n, dtype="float32").reshape(n, size, size, cin)
    out = to_numpy(keras.ops.conv(basis, kernel, padding="same"))
    return out.reshape(n, -1).T.astype("float64")


def _power_iteration(a, iterations=300, seed=0):
    v = np.random.default_rng(seed).normal(size=a.shape[1])
    for _ in range(iterations):
        v = a.T @ (a @ v)
        v /= np.linalg.norm(v)
    return float(np.linalg.norm(a @ v))


@pytest.mark.parametrize("cin,cout", [(3, 5), (6, 4)])
def test_conv_kernel_gets_lipschitz_bound_one(cin, cout):
    w = np.random.default_rng(cin).normal(size=(3, 3, cin, cout)).astype("float32") * 0.05
    scaled = to_numpy(ParsevalConstraint(beta=0.2, num_iterations=100)(w))
    operator = _conv_operator(scaled, 8)
    lipschitz = _power_iteration(operator)
    assert lipschitz <= 1.0 + 1e-5
    exact = np.linalg.norm(operator, 2)
    assert exact <= 1.0 + 1e-5 and lipschitz <= exact + 1e-6 and lipschitz >= 0.99 * exact
    # Without the 1/sqrt(kh*kw) scaling the reshaped kernel is a frame but the convolution
    # is not 1-Lipschitz: the scaling is what gives the bound.
    unscaled = to_numpy(ParsevalConstraint(beta=0.2, num_iterations=100, conv_scaling=False)(w))
    assert _power_iteration(_conv_operator(unscaled, 8)) > 1.2


def test_row_fraction_updates_a_random_subset_of_output_units():
    w = np.random.default_rng(2).normal(size=(30, 10)).astype("float32") * 0.3
    constraint = ParsevalConstraint(beta=0.1, row_fraction=0.3, seed=4)
    out = to_numpy(constraint(w))
    changed = np.flatnonzero(np.any(out != w, axis=0))
    assert len(changed) == 3
    # The updated units are the retraction of the sub-matrix; the others are untouched.
    np.testing.assert_allclose(out[:, changed], numpy_retraction(w[:, changed], 0.1), atol=1e-6)
    unchanged = np.setdiff1d(np.arange(10), changed)
    np.testing.assert_array_equal(out[:, unchanged], w[:, unchanged])
    subsets = {tuple(np.flatnonzero(np.any(to_numpy(constraint(w)) != w, 0))) for _ in range(10)}
    assert len(subsets) > 3  # a fresh subset at each call


def test_row_fraction_on_conv_kernel_keeps_scaling():
    w = np.random.default_rng(3).normal(size=(3, 3, 2, 8)).astype("float32") * 0.1
    out = to_numpy(ParsevalConstraint(beta=0.1, row_fraction=0.5, seed=0)(w))
    changed = np.flatnonzero(np.any(out != w, axis=(0, 1, 2)))
    assert len(changed) == 4
    np.testing.assert_allclose(out[..., changed], numpy_retraction(w[..., changed], 0.1), atol=1e-6)


def _constrained_model(constraint, conv=False):
    if conv:
        inputs = keras.Input((6, 6, 2))
        h = keras.layers.Conv2D(4, 3, kernel_constraint=constraint)(inputs)
        outputs = keras.layers.Dense(3)(keras.layers.Flatten()(h))
    else:
        inputs = keras.Input((8,))
        outputs = keras.layers.Dense(5, kernel_constraint=constraint)(inputs)
    return keras.Model(inputs, outputs)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=requires_xla)])
def test_applied_after_each_optimizer_step(jit_compile):
    # With a zero learning rate the update is zero, so after one step the kernel is
    # exactly the retraction of its initial value (Keras applies constraints after it).
    for conv in (False, True):
        model = _constrained_model(ParsevalConstraint(beta=0.3), conv=conv)
        kernel = model.layers[1].kernel
        before = kernel.numpy().copy()
        model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=jit_compile)
        x = np.random.default_rng(0).normal(size=(4,) + model.input_shape[1:]).astype("float32")
        model.fit(x, np.zeros((4,) + model.output_shape[1:], "float32"), epochs=1, verbose=0)
        np.testing.assert_allclose(kernel.numpy(), numpy_retraction(before, 0.3), atol=1e-5)


@requires_tensorflow  # JAX's compiled step does not carry the constraint's seed state.
def test_row_fraction_in_compiled_training():
    model = _constrained_model(ParsevalConstraint(beta=0.3, row_fraction=0.4, seed=1))
    model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=True)
    x = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    kernel = model.layers[1].kernel
    subsets = set()
    for _ in range(4):
        before = kernel.numpy().copy()
        model.train_on_batch(x, np.zeros((4, 5), "float32"))
        changed = np.flatnonzero(np.any(kernel.numpy() != before, axis=0))
        assert len(changed) == 2
        subsets.add(tuple(changed))
    assert len(subsets) > 1  # the subset is redrawn inside the compiled step


def test_keras_round_trip_and_config():
    constraint = ParsevalConstraint(
        beta=0.01, num_iterations=2, row_fraction=0.5, conv_scaling=False, seed=3
    )
    config = constraint.get_config()
    assert config == {
        "beta": 0.01,
        "num_iterations": 2,
        "row_fraction": 0.5,
        "conv_scaling": False,
        "seed": 3,
    }
    model = _constrained_model(constraint, conv=True)
    inputs = keras.Input((3,))
    simplex_layer = keras.layers.Dense(3, kernel_constraint=Simplex())
    simplex_model = keras.Model(inputs, simplex_layer(inputs))
    x = np.random.default_rng(0).normal(size=(2, 6, 6, 2)).astype("float32")
    with tempfile.TemporaryDirectory() as tmp:
        for m in (model, simplex_model):
            m.save(os.path.join(tmp, f"{m.name}.keras"))
        loaded = keras.models.load_model(os.path.join(tmp, f"{model.name}.keras"))
        loaded_simplex = keras.models.load_model(os.path.join(tmp, f"{simplex_model.name}.keras"))
    assert isinstance(loaded.layers[1].kernel_constraint, ParsevalConstraint)
    assert loaded.layers[1].kernel_constraint.get_config() == config
    assert isinstance(loaded_simplex.layers[1].kernel_constraint, Simplex)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    restored = keras.constraints.deserialize(keras.constraints.serialize(constraint))
    assert restored.get_config() == config


BAD_ARGUMENTS = [
    ({"beta": 0.0}, ValueError, "beta"),
    ({"beta": 1.0}, ValueError, "beta"),
    ({"beta": "0.1"}, TypeError, "beta"),
    ({"num_iterations": 0}, ValueError, "num_iterations"),
    ({"num_iterations": 1.5}, TypeError, "num_iterations"),
    ({"row_fraction": 0.0}, ValueError, "row_fraction"),
    ({"row_fraction": 1.5}, ValueError, "row_fraction"),
    ({"row_fraction": None}, TypeError, "row_fraction"),
    ({"conv_scaling": 1}, TypeError, "conv_scaling"),
    ({"seed": 1.5}, TypeError, "seed"),
]


def test_bad_arguments():
    for kwargs, error, name in BAD_ARGUMENTS:
        with pytest.raises(error, match=name):
            ParsevalConstraint(**kwargs)
    with pytest.raises(ValueError, match="kernel.shape"):
        ParsevalConstraint()(np.ones(3, "float32"))
    with pytest.raises(ValueError, match="rank >= 1"):
        Simplex()(np.float32(1.0))


# --------------------------------------------------------------------------------------
# Simplex
# --------------------------------------------------------------------------------------


def qp_projection(v):
    """Brute-force QP: argmin ||w - v||^2 s.t. w >= 0, sum(w) = 1 (SLSQP)."""
    n = len(v)
    result = minimize(
        lambda w: np.sum((w - v) ** 2),
        np.full(n, 1.0 / n),
        jac=lambda w: 2 * (w - v),
        bounds=[(0.0, None)] * n,
        constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0, "jac": lambda w: np.ones(n)}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert result.success
    return result.x


def tolerance(result, v):
    """Round-off allowance: float64 inputs stay float64 on TensorFlow, become float32 on JAX."""
    scale = max(1.0, float(np.max(np.abs(v)))) * np.shape(v)[-1]
    return 50 * np.finfo(result.dtype).eps * scale


def enumerated_projection(v):
    """Brute force over supports S: w_S = v_S - (sum v_S - 1)/|S| if >= 0; keep the closest."""
    best, best_distance = None, np.inf
    for mask in itertools.product([False, True], repeat=len(v)):
        support = np.array(mask)
        if not support.any():
            continue
        w = np.zeros_like(v)
        w[support] = v[support] - (v[support].sum() - 1.0) / support.sum()
        if np.all(w >= 0) and np.sum((w - v) ** 2) < best_distance:
            best, best_distance = w, np.sum((w - v) ** 2)
    return best


def test_simplex_matches_brute_force_qp():
    rng = np.random.default_rng(0)
    for _ in range(10):
        v = rng.normal(size=rng.integers(2, 8)) * rng.choice([0.1, 0.5, 1.0])
        ours = to_numpy(Simplex()(v.astype("float64")))
        np.testing.assert_allclose(ours, qp_projection(v), atol=1e-6)
        np.testing.assert_allclose(ours, enumerated_projection(v), atol=tolerance(ours, v))


def test_simplex_matches_support_enumeration_at_large_scale():
    rng = np.random.default_rng(100)
    for _ in range(10):
        v = rng.normal(size=rng.integers(2, 9)) * rng.choice([5.0, 100.0])
        ours = to_numpy(Simplex()(v.astype("float64")))
        np.testing.assert_allclose(ours, enumerated_projection(v), atol=tolerance(ours, v))


def test_simplex_known_values():
    np.testing.assert_allclose(
        to_numpy(Simplex()(np.array([0.5, 1.2, -0.3], "float32"))), [0.15, 0.85, 0.0], atol=1e-6
    )
    np.testing.assert_allclose(to_numpy(Simplex()(np.zeros(4, "float32"))), [0.25] * 4)
    np.testing.assert_allclose(to_numpy(Simplex()(np.array([5.0, 1.0]))), [1.0, 0.0])


@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(1, 12)),
        elements=st.floats(-50, 50, allow_nan=False),
    )
)
def test_simplex_property_on_simplex_and_closest(v):
    w = to_numpy(project_to_simplex(v))
    assert np.all(w >= 0)
    atol = tolerance(w, v)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=atol)
    # Optimality certificate: w is the projection iff (v - w) . (y - w) <= 0 for every y
    # on the simplex, i.e. for every vertex e_i: (v - w)_i <= (v - w) . w.
    residual = v - w
    assert np.all(residual <= np.sum(residual * w, -1, keepdims=True) + atol)
    # Each row is projected independently, and points on the simplex are fixed.
    np.testing.assert_allclose(to_numpy(project_to_simplex(v[:1])), w[:1], atol=atol)
    np.testing.assert_allclose(to_numpy(project_to_simplex(w)), w, atol=atol)
