"""`keras_normkit.ops.fast_weights_loop`: the engine on its own, against a NumPy loop.

The engine is given a plain step function and tensors here (no layer, no cell): the step
functions below are written from the paper's equations with `keras.ops`.
"""

import keras
import numpy as np
import pytest

from keras_normkit.ops import layer_norm
from keras_normkit.ops._shapes import padding_to_multiple
from keras_normkit.ops.fast_weights_loop import (
    CHUNK,
    chunk_size,
    fast_weights_loop,
    matvec,
    memory_segments,
    static_steps,
)
from tests.conftest import requires_tensorflow
from tests.layers.test_fast_weights import ragged_mask, random_weights
from tests.references.fast_weights import numpy_fast_weights

ops = keras.ops


def paper_step(weights, inner_steps, project=False):
    """The step of Ba et al. as a plain function of `(x_t, h, fast_apply)`.

    `b = x_t + W·h` for projected inputs `x_t = C·x + bias` (with `project`, the step takes
    the raw `x_t` and computes `b = C·x_t + bias + W·h` itself), `h_0 = relu(b)`, then
    `S` times `h <- relu(LN(b + A·h))`.
    """
    kernel, recurrent, bias, gamma, beta = (ops.convert_to_tensor(w, "float32") for w in weights)

    def step(x_t, h, fast_apply):
        if project:
            x_t = ops.matmul(x_t, kernel) + bias
        boundary = x_t + ops.matmul(h, recurrent)
        hs = ops.relu(boundary)
        for _ in range(inner_steps):
            hs = ops.relu(layer_norm(boundary + fast_apply(hs), gamma, beta, 1e-5))
        return hs

    return step


def run_loop(
    implementation,
    x,
    weights,
    units,
    mask=None,
    h0=None,
    a0=None,
    inner_steps=1,
    decay=0.95,
    eta=0.5,
    project=False,
):
    """`(outputs, h, A)` of `fast_weights_loop` on `x` with the step `paper_step(weights)`."""
    weights = [w.astype("float32") for w in weights]
    x = ops.convert_to_tensor(x, "float32")
    inputs = x if project else ops.matmul(x, weights[0]) + weights[2]
    batch = x.shape[0]
    last, outputs, h, a = fast_weights_loop(
        paper_step(weights, inner_steps, project),
        inputs,
        ops.zeros((batch, units)) if h0 is None else ops.convert_to_tensor(h0),
        None if a0 is None else ops.convert_to_tensor(a0),
        decay=decay,
        learning_rate=eta,
        mask=None if mask is None else ops.convert_to_tensor(mask),
        implementation=implementation,
        return_sequences=True,
    )
    outputs, last, h, a = (ops.convert_to_numpy(t) for t in (outputs, last, h, a))
    np.testing.assert_array_equal(last, outputs[:, -1])
    return outputs, h, a


# Lengths: one step, one chunk of 8, the longest single chunk (12), a chunk and a tail,
# 8 chunks (the memory form's two loops) and 16 chunks (its four loops), with a tail.
@pytest.mark.parametrize("steps", [1, CHUNK, 12, 13, 17, 70, 133])
@pytest.mark.parametrize("implementation", ["matrix", "memory"])
def test_matches_the_step_by_step_reference(implementation, steps):
    rng = np.random.default_rng(steps)
    units, dim = 5, 3
    x = rng.normal(size=(2, steps, dim))
    weights = random_weights(rng, dim, units)
    out, h, a = run_loop(implementation, x, weights, units, decay=0.9, eta=0.5)
    ref_out, ref_h, ref_a = numpy_fast_weights(
        x, weights, units, inner_steps=1, decay=0.9, eta=0.5, use_layer_norm=True
    )
    np.testing.assert_allclose(out, ref_out, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(h, ref_h, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(a, ref_a, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("implementation", ["matrix", "memory"])
def test_masked_steps_and_initial_state(implementation):
    """Masked steps neither write nor decay `A`; a non-zero `A(0)` is applied and decayed."""
    rng = np.random.default_rng(3)
    units, dim, steps = 4, 3, 21
    x = rng.normal(size=(3, steps, dim))
    mask = ragged_mask(rng, 3, steps)
    h0 = rng.normal(scale=0.3, size=(3, units)).astype("float32")
    a0 = rng.normal(scale=0.1, size=(3, units, units)).astype("float32")
    weights = random_weights(rng, dim, units)
    out, h, a = run_loop(implementation, x, weights, units, mask=mask, h0=h0, a0=a0, inner_steps=2)
    ref_out, ref_h, ref_a = numpy_fast_weights(
        x, weights, units, inner_steps=2, decay=0.95, eta=0.5, use_layer_norm=True,
        mask=mask, h0=h0, a0=a0,
    )  # fmt: skip
    np.testing.assert_allclose(out, ref_out, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(h, ref_h, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(a, ref_a, atol=1e-4, rtol=1e-4)


# A chunk and a tail; 8 chunks (the memory form's two loops) and a tail.
@pytest.mark.parametrize("steps", [21, 69])
@pytest.mark.parametrize("implementation", ["matrix", "memory"])
def test_step_inputs_of_another_width(implementation, steps):
    """The inputs need not have the state's width: here the step takes the raw `x_t`
    (3 features, 5 units) and projects it itself; masks travel beside them."""
    rng = np.random.default_rng(steps + 1)
    units, dim = 5, 3
    x = rng.normal(size=(3, steps, dim))
    mask = ragged_mask(rng, 3, steps)
    weights = random_weights(rng, dim, units)
    out, h, a = run_loop(implementation, x, weights, units, mask=mask, project=True)
    ref_out, ref_h, ref_a = numpy_fast_weights(
        x, weights, units, inner_steps=1, decay=0.95, eta=0.5, use_layer_norm=True, mask=mask
    )
    np.testing.assert_allclose(out, ref_out, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(h, ref_h, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(a, ref_a, atol=1e-4, rtol=1e-4)


@requires_tensorflow  # a `tf.function` with an unknown time axis
@pytest.mark.parametrize("implementation", ["matrix", "memory"])
def test_unknown_length_pads_to_whole_chunks(implementation):
    """An unknown `T` runs whole chunks of 8 (padded with masked steps) and drops the
    padding: the outputs of every length match the reference, with and without a mask."""
    import tensorflow as tf

    rng = np.random.default_rng(23)
    units, dim = 4, 3
    weights = [w.astype("float32") for w in random_weights(rng, dim, units)]
    step = paper_step(weights, inner_steps=1, project=True)

    @tf.function(
        input_signature=[tf.TensorSpec((None, None, dim)), tf.TensorSpec((None, None), tf.bool)]
    )
    def run(x, mask):
        h0 = tf.zeros((tf.shape(x)[0], units))
        kwargs = dict(decay=0.9, learning_rate=0.5, implementation=implementation)
        _, masked, _, a = fast_weights_loop(step, x, h0, mask=mask, return_sequences=True, **kwargs)
        last, none, h, _ = fast_weights_loop(step, x, h0, **kwargs)
        assert none is None
        return masked, a, last, h

    for steps in (1, 8, 13):
        x = rng.normal(size=(2, steps, dim)).astype("float32")
        mask = ragged_mask(rng, 2, steps)
        masked, a, last, h = (ops.convert_to_numpy(t) for t in run(x, mask))
        reference = dict(inner_steps=1, decay=0.9, eta=0.5, use_layer_norm=True)
        ref = numpy_fast_weights(x, weights, units, mask=mask, **reference)
        unmasked = numpy_fast_weights(x, weights, units, **reference)
        assert masked.shape == (2, steps, units)
        np.testing.assert_allclose(masked, ref[0], atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(a, ref[2], atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(last, unmasked[0][:, -1], atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(h, unmasked[1], atol=1e-4, rtol=1e-4)


def test_chunk_size_rule():
    for xla in (False, True):
        assert [chunk_size(t, xla) for t in (13, 21, 200)] == [CHUNK] * 3
        # Up to 12 steps: one chunk, or one step per iteration under XLA (compile time).
        assert [chunk_size(t, xla) for t in (1, 5, 12)] == ([1, 1, 1] if xla else [1, 5, 12])


def test_arguments_are_checked():
    x, h0 = ops.zeros((1, 2, 3)), ops.zeros((1, 3))
    kwargs = dict(decay=0.5, learning_rate=0.5)
    with pytest.raises(ValueError, match="`implementation`.*Received: implementation='fast'"):
        fast_weights_loop(lambda x_t, h, f: h, x, h0, implementation="fast", **kwargs)
    with pytest.raises(ValueError, match="`decay`"):
        fast_weights_loop(lambda x_t, h, f: h, x, h0, **{**kwargs, "decay": 1.5})


def test_memory_segments():
    """Consecutive loops covering every chunk: one below 6 chunks, then `n // 3` up to four,
    of nearly equal length; the attention work is `(k + 1) / (2k)` of one full-buffer loop."""
    assert memory_segments(None) == [(0, None)]
    loops = {}
    for n in range(1, 60):
        segments = memory_segments(n)
        assert segments[0][0] == 0 and segments[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(segments[:-1], segments[1:], strict=True))
        lengths = [stop - start for start, stop in segments]
        assert min(lengths) >= (3 if n >= 6 else n) and max(lengths) - min(lengths) <= 1
        loops[n] = len(segments)
    assert [loops[n] for n in (5, 6, 8, 9, 11, 12, 25, 59)] == [1, 2, 2, 3, 3, 4, 4, 4]
    work = sum((stop - start) * stop for start, stop in memory_segments(16))
    assert work / 16**2 == (4 + 1) / (2 * 4)


@requires_tensorflow  # the TensorFlow graph's while loops
def test_memory_form_runs_its_segments_as_separate_loops():
    """T = 50 (6 chunks and a tail): the memory form runs two `while` loops; T = 133 (16
    chunks and a tail): four; the matrix form one."""
    import tensorflow as tf

    from keras_normkit.layers import FastWeightsRNN

    for implementation, steps, loops in (("memory", 50, 2), ("memory", 133, 4), ("matrix", 133, 1)):
        layer = FastWeightsRNN(3, implementation=implementation)
        layer.build((None, steps, 2))
        graph = tf.function(layer).get_concrete_function(tf.zeros((2, steps, 2))).graph
        whiles = [n for n in graph.as_graph_def().node if n.op in ("While", "StatelessWhile")]
        assert len(whiles) == loops, (implementation, steps)


def test_matvec_and_shape_helpers():
    a = np.arange(8, dtype="float32").reshape(2, 2, 2)
    v = np.array([[1.0, 2.0], [3.0, -1.0]], "float32")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(matvec(a, v)), np.einsum("bij,bj->bi", a, v)
    )
    assert static_steps(np.zeros((2, 7, 3))) == 7
    assert static_steps(keras.KerasTensor((2, None, 3))) is None
    assert [padding_to_multiple(n, 8) for n in (0, 1, 7, 8, 9, 16)] == [0, 7, 1, 0, 7, 0]
    for n in (1, 8, 9):  # a tensor length (an unknown T in a graph): the same padding
        padding = padding_to_multiple(keras.ops.convert_to_tensor(n), 8)
        assert int(keras.ops.convert_to_numpy(padding)) == (-n) % 8
