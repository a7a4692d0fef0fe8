"""`keras_normkit.ops.fast_weights_loop`: the chunked loop on its own, against a NumPy loop."""

import keras
import numpy as np
import pytest

from keras_normkit.layers import FastWeightsRNNCell
from keras_normkit.ops._shapes import padding_to_multiple
from keras_normkit.ops.fast_weights_loop import (
    CHUNK,
    ChunkedLoop,
    matvec,
    memory_segments,
    static_steps,
)
from tests.conftest import requires_tensorflow
from tests.layers.test_fast_weights import ragged_mask, random_weights
from tests.references.fast_weights import numpy_fast_weights


def run_loop(implementation, x, weights, units, mask=None, h0=None, a0=None, **cell_kwargs):
    """`(outputs, h, A)` of `ChunkedLoop` on `x`, with the cell's weights set to `weights`."""
    cell = FastWeightsRNNCell(units, **cell_kwargs)
    cell.build(x.shape[::2])
    cell.set_weights([w.astype("float32") for w in weights[: len(cell.weights)]])
    batch = x.shape[0]
    kernel, recurrent, bias = (keras.ops.convert_to_tensor(w) for w in cell.weights[:3])
    tensors = {
        "projected": keras.ops.matmul(keras.ops.convert_to_tensor(x, "float32"), kernel) + bias,
        "h0": keras.ops.zeros((batch, units)) if h0 is None else keras.ops.convert_to_tensor(h0),
        "a0": keras.ops.zeros((batch, units, units))
        if a0 is None
        else keras.ops.convert_to_tensor(a0),
        "recurrent_kernel": recurrent,
        "gamma": keras.ops.convert_to_tensor(cell.gamma),
        "beta": keras.ops.convert_to_tensor(cell.beta),
    }
    if mask is not None:
        tensors["mask"] = keras.ops.convert_to_tensor(mask)
    loop = ChunkedLoop(
        cell, implementation, zero_output_for_mask=False, zero_initial_fast_weights=a0 is None
    )
    last, outputs, h, a = loop(tensors, return_sequences=True)
    outputs, last, h, a = (keras.ops.convert_to_numpy(t) for t in (outputs, last, h, a))
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
    out, h, a = run_loop(implementation, x, weights, units, decay=0.9, fast_learning_rate=0.5)
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
