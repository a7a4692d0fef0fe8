"""`keras_normkit.ops.fast_weights_rnn`: mode, form, projection, and the engine.

The engine is given a step function written from the paper's equations and tensors (no
layer, no cell), and checked against the NumPy reference.
"""

import keras
import numpy as np
import pytest

import keras_normkit.ops.fast_weights_rnn as engine_module
from keras_normkit.ops import layer_norm
from keras_normkit.ops.fast_weights_rnn import (
    choose_implementation,
    fast_weights_rnn,
    loop_mode,
    project_inputs,
    run_fast_weights,
)
from tests.conftest import requires_tensorflow
from tests.layers.test_fast_weights import ragged_mask, random_weights
from tests.references.fast_weights import numpy_fast_weights

ops = keras.ops


def paper_step(inner_steps):
    """`b = x_t + W·h`, `h_0 = relu(b)`, `S` times `h <- relu(LN(b + A·h))`; the weights
    come as keyword tensors, as the engine passes them."""

    def step(x_t, h, fast_apply, recurrent_kernel, gamma, beta, recurrent_mask=None):
        h_rec = h if recurrent_mask is None else h * recurrent_mask
        boundary = x_t + ops.matmul(h_rec, recurrent_kernel)
        hs = ops.relu(boundary)
        for _ in range(inner_steps):
            hs = ops.relu(layer_norm(boundary + fast_apply(hs), gamma, beta, 1e-5))
        return hs

    return step


def as_tensors(weights, dtype="float32"):
    return [ops.convert_to_tensor(w, dtype) for w in weights]


# --- the "auto" rule ------------------------------------------------------------------------


def test_choose_implementation_rule():
    # (mode, min units, ratio): memory iff units >= min units and T <= ratio * units.
    for mode, min_units, ratio in (("plain", 64, 0.8), ("xla_clusters", 48, 1.2), ("xla", 48, 1.3)):
        for units in (min_units, 2 * min_units):
            longest = int(ratio * units)
            assert choose_implementation("auto", units, longest, mode) == "memory"
            assert choose_implementation("auto", units, longest + 1, mode) == "matrix"
            assert choose_implementation("auto", units, 1, mode) == "memory"
        assert choose_implementation("auto", min_units - 1, 1, mode) == "matrix"
        assert choose_implementation("auto", 256, None, mode) == "matrix"  # unknown T
        assert choose_implementation("auto", 256, 4, mode, stateful=True) == "matrix"
        for form in ("matrix", "memory"):  # explicit forms are kept whatever the case
            assert choose_implementation(form, 1, 999, mode, stateful=True) == form


def test_choose_implementation_without_mode_asks_the_backend():
    # Eager here: plain ops on TensorFlow and PyTorch; JAX always compiles with XLA.
    expected = "memory" if keras.backend.backend() == "jax" else "matrix"
    assert choose_implementation("auto", 48, 24) == expected


def test_choose_implementation_checks_its_arguments():
    with pytest.raises(ValueError, match="`implementation`.*Received: implementation='fast'"):
        choose_implementation("fast", 8, 8, "plain")
    with pytest.raises(ValueError, match="`mode`.*Received: mode='jit'"):
        choose_implementation("auto", 8, 8, "jit")


# --- how the loop runs ----------------------------------------------------------------------


def test_loop_mode_of_eager_calls():
    x = np.zeros((2, 5, 3), "float32")
    expected = "xla" if keras.backend.backend() == "jax" else "plain"
    for training in (False, True):
        assert loop_mode(x, training) == expected


@requires_tensorflow  # graphs with and without XLA
def test_loop_mode_while_tracing_tensorflow_graphs():
    import tensorflow as tf

    seen = []

    def trace(x, training):
        seen.append(loop_mode(x, training))
        return x

    x = tf.zeros((2, 5, 3))
    tf.function(lambda x: trace(x, True))(x)  # training, static T, plain graph
    tf.function(lambda x: trace(x, False))(x)  # inference
    unknown = tf.TensorSpec((2, None, 3))
    tf.function(lambda x: trace(x, True), input_signature=[unknown])(x)  # unknown T
    tf.function(lambda x: trace(x, True), jit_compile=True)(x)  # the whole step under XLA
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        tf.function(lambda x: trace(x, True))(x)  # tf.distribute: the plain graph
    assert seen == ["xla_clusters", "plain", "plain", "xla", "plain"]


# --- the input projection -------------------------------------------------------------------


@pytest.mark.parametrize("go_backwards", [False, True])
def test_project_inputs_matches_numpy(go_backwards):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    kernel = rng.normal(size=(3, 4)).astype("float32")
    bias = rng.normal(size=(4,)).astype("float32")
    mask = ragged_mask(rng, 2, 5)
    projected, flipped = project_inputs(x, kernel, bias, mask, go_backwards)
    expected = np.einsum("btf,fh->bth", x, kernel) + bias
    order = slice(None, None, -1) if go_backwards else slice(None)
    np.testing.assert_allclose(ops.convert_to_numpy(projected), expected[:, order], atol=1e-5)
    np.testing.assert_array_equal(ops.convert_to_numpy(flipped), mask[:, order])
    projected, none = project_inputs(x, kernel)
    np.testing.assert_allclose(ops.convert_to_numpy(projected), expected - bias, atol=1e-5)
    assert none is None


# --- the engine -----------------------------------------------------------------------------


# One chunk; a chunk and a tail; eight chunks (the memory form's two loops) and a tail.
@pytest.mark.parametrize("steps", [6, 21, 69])
@pytest.mark.parametrize("implementation", ["matrix", "memory"])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_engine_matches_numpy_reference(go_backwards, implementation, steps):
    rng = np.random.default_rng(steps + 2 * go_backwards)
    batch, dim, units = 3, 4, 5
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    mask = ragged_mask(rng, batch, steps)
    h0 = np.abs(rng.normal(size=(batch, units))).astype("float32")
    a0 = rng.normal(scale=0.3, size=(batch, units, units)).astype("float32")
    weights = random_weights(rng, dim, units)
    kernel, recurrent, bias, gamma, beta = as_tensors(weights)
    last, outputs, h, a = run_fast_weights(
        paper_step(2),
        x,
        kernel,
        ops.convert_to_tensor(h0),
        ops.convert_to_tensor(a0),
        decay=0.85,
        learning_rate=0.4,
        bias=bias,
        step_tensors={"recurrent_kernel": recurrent, "gamma": gamma, "beta": beta},
        mask=ops.convert_to_tensor(mask),
        implementation=implementation,
        go_backwards=go_backwards,
        return_sequences=True,
    )
    ref_out, ref_h, ref_a = numpy_fast_weights(
        x, weights, units, inner_steps=2, decay=0.85, eta=0.4, use_layer_norm=True,
        mask=mask, h0=h0, a0=a0, go_backwards=go_backwards,
    )  # fmt: skip
    # Masked steps before the first unmasked one output zeros, as in Keras's RNN loop.
    seen = np.cumsum(mask[:, ::-1] if go_backwards else mask, axis=1) > 0
    ref_out = np.where(seen[..., None], ref_out, 0.0)
    outputs, last, h, a = (ops.convert_to_numpy(t) for t in (outputs, last, h, a))
    np.testing.assert_allclose(outputs, ref_out, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(last, outputs[:, -1])
    np.testing.assert_allclose(h, ref_h, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a, ref_a, rtol=1e-4, atol=1e-4)


def test_step_tensors_that_are_none_leave_the_steps_default():
    """A `None` step tensor is not passed (the step's default applies); a given one is."""
    rng = np.random.default_rng(4)
    batch, steps, dim, units = 2, 5, 3, 4
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    weights = random_weights(rng, dim, units)
    kernel, recurrent, bias, gamma, beta = as_tensors(weights)
    tensors = {"recurrent_kernel": recurrent, "gamma": gamma, "beta": beta}
    h0 = ops.zeros((batch, units))

    def run(recurrent_mask):
        step_tensors = {**tensors, "recurrent_mask": recurrent_mask}
        out = run_fast_weights(
            paper_step(1), x, kernel, h0, decay=0.9, learning_rate=0.5, bias=bias,
            step_tensors=step_tensors,
        )  # fmt: skip
        return ops.convert_to_numpy(out[0])

    ref = numpy_fast_weights(x, weights, units, inner_steps=1, decay=0.9, eta=0.5,
                             use_layer_norm=True)[0]  # fmt: skip
    np.testing.assert_allclose(run(None), ref[:, -1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(ops.ones((batch, units))), ref[:, -1], rtol=1e-4, atol=1e-4)
    dropped = run(ops.zeros((batch, units)))  # `W·h` dropped entirely: another result
    assert np.abs(dropped - ref[:, -1]).max() > 1e-3


def test_engine_checks_its_arguments():
    x, kernel, h0 = ops.zeros((1, 2, 3)), ops.zeros((3, 4)), ops.zeros((1, 4))
    kwargs = dict(decay=0.5, learning_rate=0.5)
    with pytest.raises(ValueError, match="`step_tensors`.*'mask'"):
        run_fast_weights(
            lambda x_t, h, f, mask: h, x, kernel, h0, step_tensors={"mask": h0}, **kwargs
        )
    with pytest.raises(ValueError, match="`implementation`"):
        run_fast_weights(lambda x_t, h, f: h, x, kernel, h0, implementation="fast", **kwargs)
    with pytest.raises(ValueError, match="`decay`"):
        run_fast_weights(lambda x_t, h, f: h, x, kernel, h0, decay=1.5, learning_rate=0.5)


def test_deprecated_alias_warns_and_runs_as_it_ran():
    """`fast_weights_rnn`, the engine's old name, warns and computes what
    `run_fast_weights` computes; it still takes a form and a mode, and checks them."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 21, 3)).astype("float32")
    weights = random_weights(rng, 3, 4)
    kernel, recurrent, bias, gamma, beta = as_tensors(weights)
    kwargs = dict(
        decay=0.9, learning_rate=0.5, bias=bias, return_sequences=True,
        step_tensors={"recurrent_kernel": recurrent, "gamma": gamma, "beta": beta},
    )  # fmt: skip
    h0 = ops.zeros((2, 4))
    for form in ("matrix", "memory"):
        with pytest.warns(DeprecationWarning, match="run_fast_weights"):
            old = fast_weights_rnn(paper_step(1), x, kernel, h0, implementation=form, **kwargs)
        new = run_fast_weights(paper_step(1), x, kernel, h0, implementation=form, **kwargs)
        for got, expected in zip(old, new, strict=True):
            np.testing.assert_allclose(
                ops.convert_to_numpy(got), ops.convert_to_numpy(expected), rtol=1e-5, atol=1e-5
            )
    step = lambda x_t, h, f: h  # noqa: E731
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="`mode`.*Received: mode='jit'"):
            fast_weights_rnn(step, x, kernel, h0, mode="jit", decay=0.5, learning_rate=0.5)
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="`implementation`"):
            fast_weights_rnn(
                step, x, kernel, h0, implementation="auto", decay=0.5, learning_rate=0.5
            )


@requires_tensorflow  # XLA clusters inside a plain TensorFlow graph
def test_xla_clusters_mode_matches_the_plain_graph(monkeypatch):
    """A training call in a plain TensorFlow graph runs the loop (and its gradient) as XLA
    clusters: the same values and gradients as the plain graph, in float64."""
    import tensorflow as tf

    compiled = []
    real = engine_module.xla_compiled
    monkeypatch.setattr(engine_module, "xla_compiled", lambda fn: compiled.append(fn) or real(fn))
    rng = np.random.default_rng(9)
    batch, steps, dim, units = 3, 17, 4, 5
    x = tf.constant(rng.normal(size=(batch, steps, dim)))
    mask = tf.constant(ragged_mask(rng, batch, steps))
    weights = as_tensors(random_weights(rng, dim, units), "float64")
    h0 = tf.constant(rng.normal(scale=0.3, size=(batch, units)))

    def gradients():
        @tf.function
        def run(x, weights, h0):
            kernel, recurrent, bias, gamma, beta = weights
            with tf.GradientTape() as tape:
                tape.watch([x, h0, *weights])
                last, outputs, h, a = run_fast_weights(
                    paper_step(1), x, kernel, h0, decay=0.9, learning_rate=0.5, bias=bias,
                    step_tensors={"recurrent_kernel": recurrent, "gamma": gamma, "beta": beta},
                    mask=mask, implementation="matrix", training=True, return_sequences=True,
                )  # fmt: skip
                loss = tf.reduce_sum(outputs**2) + tf.reduce_sum(h) + 0.1 * tf.reduce_sum(a)
            return [loss, *tape.gradient(loss, [x, h0, *weights])]

        return [t.numpy() for t in run(x, weights, h0)]

    clustered = gradients()
    assert len(compiled) == 1
    monkeypatch.setattr(engine_module, "can_compile_cluster", lambda: False)
    plain = gradients()
    assert len(compiled) == 1
    for got, expected in zip(clustered, plain, strict=True):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
