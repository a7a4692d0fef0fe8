"""Constraints: the Parseval retraction and the simplex projection against references."""

import itertools
import math
import os
import tempfile

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize

from keras_normkit.constraints import ParsevalConstraint, Simplex, project_to_simplex
from tests.conftest import max_examples, requires_xla


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
        # The (3, 3, 4, 6) kernel with conv scaling is outside the basin (s_max ~ 5 >
        # sqrt(1 + 1/0.05) = 4.6): rescaled first, then retracted (see the safeguard tests).
        np.testing.assert_allclose(
            to_numpy(out), numpy_safeguarded_step(w, 0.05, conv_scaling), rtol=1e-5, atol=1e-6
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
    # exactly the retraction of its initial value (Keras applies constraints after it);
    # the Glorot conv kernel is outside the basin for beta = 0.3, so it is rescaled first.
    for conv in (False, True):
        model = _constrained_model(ParsevalConstraint(beta=0.3), conv=conv)
        kernel = model.layers[1].kernel
        before = kernel.numpy().copy()
        model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=jit_compile)
        x = np.random.default_rng(0).normal(size=(4,) + model.input_shape[1:]).astype("float32")
        model.fit(x, np.zeros((4,) + model.output_shape[1:], "float32"), epochs=1, verbose=0)
        np.testing.assert_allclose(kernel.numpy(), numpy_safeguarded_step(before, 0.3), atol=1e-5)


def _subsets_drawn_in_training(steps, jit_compile):
    """The output units each `train_on_batch` step changed (row_fraction 0.4 of 5 units).

    With a zero learning rate only the retraction changes the kernel, so the changed
    output units are exactly the subset of that step. The kernel's initializer is seeded
    too: on JAX the subset's key is folded with the kernel (see `_subset_seed`).
    """
    keras.utils.set_random_seed(0)
    model = _constrained_model(ParsevalConstraint(beta=0.3, row_fraction=0.4, seed=1))
    model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=jit_compile)
    x = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    y = np.random.default_rng(1).normal(size=(4, 5)).astype("float32")
    kernel = model.layers[1].kernel
    subsets = []
    for _ in range(steps):
        before = kernel.numpy().copy()
        model.train_on_batch(x, y)
        subsets.append(tuple(np.flatnonzero(np.any(kernel.numpy() != before, axis=0))))
    return subsets


@pytest.mark.parametrize(
    "jit_compile", [False, "auto", pytest.param(True, marks=requires_xla)], ids=str
)
def test_row_fraction_draws_a_new_subset_at_every_compiled_step(jit_compile):
    """Every backend: the compiled train step redraws the subset (on JAX from the kernel)."""
    subsets = _subsets_drawn_in_training(20, jit_compile)
    assert all(len(subset) == 2 for subset in subsets)  # round(0.4 * 5) units per step
    # Seeded, so deterministic on every backend. For any seed, uniform draws leave a unit
    # out of all 20 steps with probability 5 * 0.6^20 < 2e-4 and give fewer than 4 of the 10
    # possible subsets with less; one subset drawn again and again fails this.
    assert len(set(subsets)) >= 4, subsets
    assert set().union(*subsets) == set(range(5)), subsets  # every unit gets updated


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX key derivation")
def test_row_fraction_subset_on_jax_is_keyed_by_seed_and_kernel():
    import jax

    w = np.random.default_rng(2).normal(size=(30, 10)).astype("float32") * 0.3

    def changed(out, w):
        return tuple(np.flatnonzero(np.any(np.asarray(out) != w, axis=0)))

    constraint = ParsevalConstraint(beta=0.1, row_fraction=0.3, seed=4)

    @jax.jit
    def compiled(kernel):  # as the optimizer applies it: the generator's update is dropped
        with keras.StatelessScope():
            return constraint(kernel)

    # Under jit the generator's state is a constant: the same kernel gives the same subset,
    # another kernel another one (the generator itself still advances between eager calls).
    assert changed(compiled(w), w) == changed(compiled(w), w)
    subsets = set()
    for i in range(12):
        other = w.copy()
        other[0, 0] += 1e-3 * (i + 1)
        subsets.add(changed(compiled(other), other))
    assert len(subsets) >= 6, subsets


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


# --------------------------------------------------------------------------------------
# ParsevalConstraint: the basin safeguard
# --------------------------------------------------------------------------------------
#
# Per singular value the step is f(s) = (1 + beta) s - beta s^3. Its basin of 1 is
# (0, sqrt(1 + 1/beta)); the constraint lets through singular values up to
# t(beta) = sqrt(2 (1 + beta) / (3 beta)) and rescales the (conv-scaled) matrix by the
# scalar t / sqrt(||G||_inf) when the row-sum bound ||G||_inf of s_max^2 exceeds t^2.
# The formulas are written out here independently of the library.


def safe_bound(beta):
    return math.sqrt(2 * (1 + beta) / (3 * beta))


def conv_scale(shape, conv_scaling=True):
    return math.sqrt(np.prod(shape[:-2])) if conv_scaling and len(shape) > 2 else 1.0


def scaled_matrix(w, conv_scaling=True):
    """The (conv-scaled) matrix whose singular values the constraint drives to 1."""
    w = np.asarray(w, dtype="float64")
    return w.reshape(-1, w.shape[-1]) * conv_scale(w.shape, conv_scaling)


def scaled_singular_values(w):
    return np.linalg.svd(scaled_matrix(w), compute_uv=False)


def row_sum_bound(w, conv_scaling=True):
    """||G||_inf, the largest absolute row sum of the smaller Gram matrix (>= s_max^2)."""
    m = scaled_matrix(w, conv_scaling)
    gram = m.T @ m if m.shape[1] <= m.shape[0] else m @ m.T
    return np.max(np.sum(np.abs(gram), axis=1))


def numpy_safeguarded_step(w, beta, conv_scaling=True):
    """The documented step in float64: multiply by min(1, t / sqrt(||G||_inf)), retract."""
    bound = row_sum_bound(w, conv_scaling)
    c = 1.0 if bound <= safe_bound(beta) ** 2 else safe_bound(beta) / np.sqrt(bound)
    return numpy_retraction(np.asarray(w, "float64") * c, beta, conv_scaling)


def polar_factor(m):
    u, _, vt = np.linalg.svd(m, full_matrices=False)
    return u @ vt


def plain_constraint(w, beta, num_iterations=1):
    """The constraint as it was before the safeguard (frozen copy): scale, plain steps, unscale."""
    w = keras.ops.convert_to_tensor(w)
    scale = conv_scale(w.shape)
    m = keras.ops.reshape(w, (-1, w.shape[-1]))
    if scale != 1.0:
        m = m * keras.ops.cast(scale, m.dtype)
    b = keras.ops.cast(beta, m.dtype)
    for _ in range(num_iterations):
        rows, cols = m.shape
        if cols <= rows:
            product = keras.ops.matmul(m, keras.ops.matmul(keras.ops.transpose(m), m))
        else:
            product = keras.ops.matmul(keras.ops.matmul(m, keras.ops.transpose(m)), m)
        m = (1.0 + b) * m - b * product
    if scale != 1.0:
        m = m / keras.ops.cast(scale, m.dtype)
    return to_numpy(keras.ops.reshape(m, w.shape))


def conv_lipschitz(kernel, size=16, iterations=60, seed=0):
    """The Lipschitz constant of the stride-1 'same' convolution on size x size images.

    Power iteration on conv_transpose(conv(x)): `keras.ops.conv_transpose` with the same
    kernel and 'same' padding is the adjoint of `keras.ops.conv` (checked here), so this is
    power iteration on A^T A and returns a lower bound of ||A||_2 that converges to it.
    Padding: zeros ('same'), what `Conv2D(padding="same")` does. For it the bound is
    ||A||_2 <= sqrt(kh*kw) * ||W_matrix||_2, because each input pixel lies in at most kh*kw
    zero-padded patches (periodic padding: exactly kh*kw, same bound). So a scaled matrix
    with every singular value within 1e-3 of 1 gives ||A||_2 <= 1.001; 1.01 leaves room for
    float32 round-off in 2 * iterations convolutions, and is still far below what a
    kernel without the sqrt(kh*kw) scaling gives (see test_conv_kernel_gets_lipschitz_bound_one).
    """
    kernel = keras.ops.convert_to_tensor(np.asarray(kernel, "float32"))
    cin, cout = kernel.shape[2], kernel.shape[3]
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(1, size, size, cin)).astype("float32")
    b = rng.normal(size=(1, size, size, cout)).astype("float32")
    forward = to_numpy(keras.ops.conv(a, kernel, padding="same"))
    adjoint = to_numpy(keras.ops.conv_transpose(b, kernel, strides=1, padding="same"))
    np.testing.assert_allclose(np.sum(forward * b), np.sum(a * adjoint), rtol=1e-4)
    x = keras.ops.convert_to_tensor(a)
    for _ in range(iterations):
        y = keras.ops.conv(x, kernel, padding="same")
        x = keras.ops.conv_transpose(y, kernel, strides=1, padding="same")
        x = x / keras.ops.sqrt(keras.ops.sum(x * x))
    y = keras.ops.conv(x, kernel, padding="same")
    return float(to_numpy(keras.ops.sqrt(keras.ops.sum(y * y))))


def test_plain_step_of_the_reported_failure_overflows():
    # The failure the safeguard is for (issue 17): without it, |w| ~ 1e9 after 3 calls and
    # inf after 5; with it, finite and inside the bound at every call.
    w = np.random.default_rng(0).normal(0, 0.3, (3, 3, 4, 8)).astype("float32")
    assert scaled_singular_values(w)[0] > math.sqrt(1 + 1 / 0.1)  # outside the basin
    with np.errstate(all="ignore"):
        assert np.max(np.abs(plain_constraint(w, 0.1, 3))) > 1e8
        assert not np.all(np.isfinite(plain_constraint(w, 0.1, 5)))
    out = w
    for _ in range(5):
        out = to_numpy(ParsevalConstraint(beta=0.1)(out))
        assert np.all(np.isfinite(out))
        assert scaled_singular_values(out)[0] <= safe_bound(0.1) * (1 + 1e-5)


@pytest.mark.parametrize("beta", [1e-3, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("shape", [(40, 6), (6, 40), (3, 3, 4, 6)])
def test_rescale_happens_exactly_above_t_beta(beta, shape):
    # Orthogonal columns (rows when cols > rows): the Gram matrix is diagonal, so the
    # row-sum bound is s_max^2 itself and the rescale must start exactly at s_max = t(beta).
    t = safe_bound(beta)
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    q, _ = np.linalg.qr(np.random.default_rng(rows).normal(size=(max(rows, cols), min(rows, cols))))
    for ratio in (0.999, 1.001):
        values = np.linspace(0.3, 1.0, min(rows, cols)) * ratio * t
        m = q * values if cols <= rows else (q * values).T
        w = (m / conv_scale(shape)).reshape(shape).astype("float32")
        out = to_numpy(ParsevalConstraint(beta=beta)(w))
        c = 1.0 if ratio < 1 else 1.0 / ratio  # the largest value is put at t exactly
        s = np.sort(c * values)[::-1]
        expected_values = np.sort((1 + beta) * s - beta * s**3)[::-1]
        np.testing.assert_allclose(scaled_singular_values(out), expected_values, rtol=2e-5)
        expected = numpy_retraction(w.astype("float64") * c, beta)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * np.max(np.abs(expected)))


@pytest.mark.parametrize("beta", [1e-3, 0.1, 0.5, 0.9])
def test_every_singular_value_up_to_t_beta_converges_without_crossing_zero(beta):
    # A diagonal kernel: its singular values are its diagonal, and the bound is exact.
    t = safe_bound(beta)
    values = np.concatenate([np.linspace(0.02, 1.0, 40) * t, [t * (1 - 1e-6)]])
    w = np.diag(values).astype("float32")
    constraint = ParsevalConstraint(beta=beta, num_iterations=5)
    distance = np.abs(values - 1.0)
    for _ in range(40 if beta < 0.01 else 30):
        w = to_numpy(constraint(w))
        d = np.diag(w).astype("float64")
        assert np.all(np.isfinite(w)) and np.all(d > 0) and np.all(d <= t * (1 + 1e-6))
        np.testing.assert_array_equal(w - np.diag(np.diag(w)), 0.0)  # stays diagonal
        if beta <= 0.5:  # f is then monotone towards 1 on (0, t]: never farther from 1
            assert np.all(np.abs(d - 1.0) <= distance + 1e-6)
        distance = np.abs(d - 1.0)
    if beta >= 0.1:
        assert np.all(distance <= 1e-3), distance.max()
    else:  # 200 steps of beta = 1e-3: every unit has moved towards 1
        assert np.all(distance < np.abs(values - 1.0) - 1e-3 * np.abs(values - 1.0))


LARGE_KERNELS = [
    pytest.param((256, 512), 1.0, id="dense-256x512-std1"),
    pytest.param((256, 512), 10.0, id="dense-256x512-std10"),
    pytest.param((3, 3, 4, 8), 0.3, id="conv-3x3x4x8-std0.3"),
    pytest.param((3, 3, 64, 64), 1.0, id="conv-3x3x64x64-std1"),
]


@pytest.mark.parametrize("beta,calls", [(0.1, 60), (0.5, 20), (0.9, 45)])
@pytest.mark.parametrize("shape,std", LARGE_KERNELS)
def test_large_random_kernels_stay_finite_and_converge(shape, std, beta, calls):
    w = np.random.default_rng(len(shape) + int(std)).normal(0, std, shape).astype("float32")
    assert scaled_singular_values(w)[0] > math.sqrt(1 + 1 / beta)  # outside the basin
    constraint = ParsevalConstraint(beta=beta)
    for call in range(calls):
        w = to_numpy(constraint(w))
        assert np.all(np.isfinite(w)), call
        if call < 2:  # every call returns singular values <= t(beta)
            assert scaled_singular_values(w)[0] <= safe_bound(beta) * (1 + 1e-5)
    s = scaled_singular_values(w)
    assert np.all(np.abs(s - 1.0) <= 1e-3), (s.min(), s.max())
    if len(shape) == 4:
        assert conv_lipschitz(w) <= 1.01


@pytest.mark.parametrize("shape,std", LARGE_KERNELS)
def test_large_random_kernels_small_beta_make_monotone_progress(shape, std):
    # beta = 1e-3 needs thousands of steps to reach 1e-3; here: finite after every call,
    # every singular value <= t(beta) = 25.8 from the first call on, and then the spread
    # around 1 shrinks at every call (the largest comes down, the smallest goes up).
    beta = 1e-3
    w = np.random.default_rng(7).normal(0, std, shape).astype("float32")
    constraint = ParsevalConstraint(beta=beta, num_iterations=10)
    previous = None
    for call in range(8):
        w = to_numpy(constraint(w))
        assert np.all(np.isfinite(w)), call
        s = scaled_singular_values(w)
        assert s[0] <= safe_bound(beta) * (1 + 1e-5)
        if previous is not None:
            assert s[0] <= previous[0] + 1e-5 and (s[-1] >= previous[-1] - 1e-5 or s[-1] >= 1)
        previous = s


@given(
    seed=st.integers(0, 2**16),
    beta=st.floats(1e-4, 0.9999),
    log_scale=st.floats(-4.0, 30.0),
    shape=st.sampled_from([(12, 6), (6, 12), (3, 3, 2, 4)]),
)
def test_property_finite_bounded_same_frame_for_any_beta_and_scale(seed, beta, log_scale, shape):
    w = np.random.default_rng(seed).normal(size=shape) * 10.0**log_scale
    w = w.astype("float32")
    constraint = ParsevalConstraint(beta=beta)
    out = to_numpy(constraint(w))
    assert np.all(np.isfinite(out))
    # The documented step (rescale by min(1, t / sqrt(||G||_inf)), then retract).
    expected = numpy_safeguarded_step(w, beta)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * np.max(np.abs(expected)))
    assert scaled_singular_values(out)[0] <= safe_bound(beta) * (1 + 1e-5)
    # Scalar rescales and steps inside the basin keep the singular vectors and their signs:
    # the kernel heads for the same frame (the polar factor of the input) at every call.
    target = polar_factor(scaled_matrix(w))
    for _ in range(4):
        out = to_numpy(constraint(out))
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(polar_factor(scaled_matrix(out)), target, atol=1e-3)


@pytest.mark.parametrize("beta", [1e-3, 0.05, 0.5, 0.9])
def test_kernels_inside_the_basin_are_unchanged(beta):
    # Near a frame (orthogonal initializer, small perturbations as between optimizer
    # steps) the row-sum bound is below t(beta)^2 and the constraint is the plain step of
    # before the safeguard, bit for bit; moderate random kernels too for small beta.
    rng = np.random.default_rng(5)
    orthogonal = keras.initializers.Orthogonal(seed=1)
    kernels = [
        to_numpy(orthogonal((128, 64))) + rng.normal(0, 0.002, (128, 64)),
        to_numpy(orthogonal((64, 128))) + rng.normal(0, 0.002, (64, 128)),
        (to_numpy(orthogonal((144, 32))) / 3 + rng.normal(0, 0.002, (144, 32))).reshape(
            3, 3, 16, 32
        ),
    ]
    if beta <= 0.05:  # the kernels of test_one_step_matches_numpy, and larger ones
        kernels += [rng.normal(0, 0.2, (20, 8)), rng.normal(0, 0.1, (3, 3, 4, 6))]
        kernels += [rng.normal(0, 0.03, (256, 512)), rng.normal(0, 0.04, (3, 3, 16, 16))]
    for w in kernels:
        w = w.astype("float32")
        assert row_sum_bound(w) < safe_bound(beta) ** 2 * (1 - 1e-3)  # inside the gate
        out = to_numpy(ParsevalConstraint(beta=beta, num_iterations=3)(w))
        np.testing.assert_array_equal(out, plain_constraint(w, beta, 3))  # bit for bit
        expected = w
        for _ in range(3):
            expected = numpy_retraction(expected, beta)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
        # Just above the gate the kernel is rescaled, so the step differs from the plain one.
        if beta >= 0.5:
            over = w * (safe_bound(beta) / math.sqrt(row_sum_bound(w)) * 1.01)
            out = to_numpy(ParsevalConstraint(beta=beta)(over.astype("float32")))
            assert np.max(np.abs(out - plain_constraint(over.astype("float32"), beta))) > 1e-4


def test_non_finite_kernel_is_returned_unchanged():
    for bad in (np.nan, np.inf, -np.inf):
        w = np.random.default_rng(0).normal(0, 0.1, (3, 3, 4, 8)).astype("float32")
        w[1, 2, 3, 4] = bad
        np.testing.assert_array_equal(to_numpy(ParsevalConstraint(beta=0.1)(w)), w)
        # With a subset the bad entry stays where it is, whether its unit is drawn or not.
        constraint = ParsevalConstraint(beta=0.1, row_fraction=0.5, seed=0)
        out = w
        for _ in range(6):
            out = to_numpy(constraint(out))
            assert np.sum(~np.isfinite(out)) == 1 and not np.isfinite(out[1, 2, 3, 4])


def test_huge_finite_kernels_give_finite_results():
    rng = np.random.default_rng(1)
    signs = rng.choice([-1.0, 1.0], size=(64, 32))
    for w in (rng.normal(0, 1e30, (64, 32)), signs * 3.4e38, signs * 1e-30):
        w = w.astype("float32")
        constraint = ParsevalConstraint(beta=0.5)
        for _ in range(20):
            w = to_numpy(constraint(w))
            assert np.all(np.isfinite(w))
            assert scaled_singular_values(w)[0] <= safe_bound(0.5) * (1 + 1e-5)


def test_zero_and_rank_deficient_kernels():
    zero = to_numpy(
        ParsevalConstraint(beta=0.5, num_iterations=3)(np.zeros((3, 3, 4, 8), "float32"))
    )
    np.testing.assert_array_equal(zero, 0.0)
    # A zero column is an exact zero singular value: it stays zero, the rest goes to 1
    # (a partial isometry), with no NaN on the way.
    w = np.random.default_rng(2).normal(0, 3.0, (30, 10)).astype("float32")
    w[:, 4] = 0.0
    constraint = ParsevalConstraint(beta=0.5)
    for _ in range(40):
        w = to_numpy(constraint(w))
        assert np.all(np.isfinite(w))
    np.testing.assert_array_equal(w[:, 4], 0.0)
    s = scaled_singular_values(w)
    np.testing.assert_allclose(s[:-1], 1.0, atol=1e-3)
    assert s[-1] <= 1e-6
    # Tiny singular values grow by about 1 + beta per step; nothing is divided by them.
    tiny = np.diag([1e-30, 1e-12, 1e-6, 0.5, 1.0]).astype("float32")
    out = to_numpy(ParsevalConstraint(beta=0.5)(tiny))
    np.testing.assert_allclose(
        np.diag(out), numpy_safeguarded_step(tiny, 0.5).diagonal(), rtol=1e-6
    )


def test_row_fraction_brings_a_large_kernel_back():
    # Each call rescales and retracts only the drawn units (their own Gram matrix).
    w = np.random.default_rng(3).normal(0, 10.0, (64, 40)).astype("float32")
    constraint = ParsevalConstraint(beta=0.5, row_fraction=0.5, seed=0)
    for _ in range(200):
        w = to_numpy(constraint(w))
        assert np.all(np.isfinite(w))
    np.testing.assert_allclose(scaled_singular_values(w), 1.0, atol=1e-3)


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


@settings(max_examples=max_examples(25))
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
    # (the dot product adds n more roundings of size |v|: n·atol, still ~1e-10 of |v|)
    certificate = np.sum(residual * w, -1, keepdims=True) + atol * np.shape(v)[-1]
    assert np.all(residual <= certificate)
    # Each row is projected independently, and points on the simplex are fixed.
    np.testing.assert_allclose(to_numpy(project_to_simplex(v[:1])), w[:1], atol=atol)
    np.testing.assert_allclose(to_numpy(project_to_simplex(w)), w, atol=atol)
