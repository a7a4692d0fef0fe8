"""Layer-normalized RNN cells and layers: what the three families share.

NumPy references of the three cells (imported by the family test files
`test_layer_norm_simple_rnn.py`, `test_layer_norm_lstm.py`, `test_layer_norm_gru.py`),
tests run over every family (the shared cell and layer bases of
`keras_normkit/layers/_layer_norm_rnn_base.py`: references, masks, dropout, drop-in,
statefulness, XLA, mixed precision, bad input), and the public import paths and saved
files of the `keras_normkit.layers.layer_norm_rnn` module the families were split from.
"""

import importlib
import inspect
import json
import zipfile

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import keras_normkit.layers
from keras_normkit.layers import (
    LayerNormGRU,
    LayerNormGRUCell,
    LayerNormLSTM,
    LayerNormLSTMCell,
    LayerNormSimpleRNN,
    LayerNormSimpleRNNCell,
)
from tests.conftest import requires_tensorflow, requires_xla

EPS = 1e-3

# --------------------------------------------------------------------------------------
# NumPy references, written from the equations (Ba et al. 2016 and the cell docstrings).
# --------------------------------------------------------------------------------------


def np_sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def np_ln(a, norm, eps=EPS):
    """LN over the last axis with the gain/bias of a Keras LayerNormalization `norm`."""
    gamma, beta = (keras.ops.convert_to_numpy(w).astype("float64") for w in norm.weights)
    mean = a.mean(axis=-1, keepdims=True)
    var = a.var(axis=-1, keepdims=True)
    return gamma * (a - mean) / np.sqrt(var + eps) + beta


def _w(variable):
    return keras.ops.convert_to_numpy(variable).astype("float64")


def np_simple_rnn_step(cell, x, states):
    (h,) = states
    z = np_ln(x @ _w(cell.kernel) + h @ _w(cell.recurrent_kernel), cell.norm)
    if cell.use_bias:
        z = z + _w(cell.bias)
    h = np.tanh(z)
    return h, [h]


def np_lstm_step(cell, x, states):
    h, c = states
    n = cell.units
    z = np_ln(x @ _w(cell.kernel), cell.input_norm)
    z = z + np_ln(h @ _w(cell.recurrent_kernel), cell.recurrent_norm) + _w(cell.bias)
    i, f, g, o = (z[:, k * n : (k + 1) * n] for k in range(4))  # Keras gate order
    c = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(g)
    c_hat = np_ln(c, cell.state_norm)
    h = np_sigmoid(o) * np.tanh(c_hat)
    return h, [h, c_hat if cell.carry_normalized_state else c]


def np_gru_step(cell, x, states):
    (h,) = states
    n = cell.units
    w, u = _w(cell.kernel), _w(cell.recurrent_kernel)
    x_proj = np_ln(x @ w, cell.input_norm)
    if cell.reset_after:
        b_x, b_u = _w(cell.bias)
        x_proj = x_proj + b_x
        u_proj = np_ln(h @ u, cell.recurrent_norm) + b_u
        z = np_sigmoid(x_proj[:, :n] + u_proj[:, :n])
        r = np_sigmoid(x_proj[:, n : 2 * n] + u_proj[:, n : 2 * n])
        candidate = np.tanh(x_proj[:, 2 * n :] + r * u_proj[:, 2 * n :])
    else:
        x_proj = x_proj + _w(cell.bias)
        u_zr = np_ln(h @ u[:, : 2 * n], cell.recurrent_norm)
        z = np_sigmoid(x_proj[:, :n] + u_zr[:, :n])
        r = np_sigmoid(x_proj[:, n : 2 * n] + u_zr[:, n:])
        u_h = np_ln((r * h) @ u[:, 2 * n :], cell.candidate_norm)
        candidate = np.tanh(x_proj[:, 2 * n :] + u_h)
    h = z * h + (1 - z) * candidate
    return h, [h]


STEPS = {
    LayerNormSimpleRNNCell: np_simple_rnn_step,
    LayerNormLSTMCell: np_lstm_step,
    LayerNormGRUCell: np_gru_step,
}


def np_rnn(cell, x, mask=None):
    """Unroll `cell`'s NumPy step over `x`; masked steps keep state and previous output."""
    batch, steps, _ = x.shape
    sizes = cell.state_size if isinstance(cell.state_size, list) else [cell.state_size]
    states = [np.zeros((batch, d)) for d in sizes]
    output = np.zeros((batch, cell.units))
    outputs = []
    for t in range(steps):
        new_output, new_states = STEPS[type(cell)](cell, x[:, t].astype("float64"), states)
        keep = np.ones((batch, 1), bool) if mask is None else mask[:, t : t + 1]
        output = np.where(keep, new_output, output)
        states = [np.where(keep, n, s) for n, s in zip(new_states, states, strict=True)]
        outputs.append(output)
    return np.stack(outputs, axis=1), states


def randomize(layer, seed=0):
    """Non-trivial weights everywhere (gains away from 1, biases away from 0)."""
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        if w.path.endswith("gamma"):
            value = rng.uniform(0.5, 1.5, size=w.shape)
        else:
            value = rng.normal(scale=0.5, size=w.shape)
        w.assign(value.astype(w.dtype))


CELL_CASES = [
    (LayerNormSimpleRNNCell, {}),
    (LayerNormSimpleRNNCell, {"use_bias": False}),
    (LayerNormLSTMCell, {}),
    (LayerNormLSTMCell, {"carry_normalized_state": True}),
    (LayerNormGRUCell, {}),
    (LayerNormGRUCell, {"reset_after": False}),
]
CELL_IDS = [f"{c.__name__}-{k}" for c, k in CELL_CASES]


def _inputs(batch=3, steps=6, features=4, seed=1):
    return np.random.default_rng(seed).normal(size=(batch, steps, features)).astype("float32")


@pytest.mark.parametrize("cell_cls,kwargs", CELL_CASES, ids=CELL_IDS)
def test_matches_numpy_reference(cell_cls, kwargs):
    """Whole sequences and final states, without and with a mask (gap and right padding)."""
    x = _inputs()
    mask = np.ones(x.shape[:2], bool)
    mask[1, 2:4] = False  # a gap in the middle
    mask[2, 4:] = False  # right padding
    cell = cell_cls(5, **kwargs)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    rnn.build(x.shape)
    randomize(rnn)
    for m in (None, mask):
        outputs, *states = rnn(x, mask=m)
        expected_outputs, expected_states = np_rnn(cell, x, m)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), expected_outputs, atol=2e-5)
        for s, e in zip(states, expected_states, strict=True):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(s), e, atol=2e-5)


@pytest.mark.parametrize(
    "layer_cls,kwargs",
    [
        (LayerNormSimpleRNN, {}),
        (LayerNormLSTM, {"carry_normalized_state": True}),
        (LayerNormGRU, {}),
        (LayerNormGRU, {"reset_after": False}),
    ],
)
def test_layer_equals_rnn_of_its_cell(layer_cls, kwargs):
    """The convenience layers compute what RNN(cell) computes (masks, go_backwards)."""
    x = _inputs(steps=5)
    mask = np.ones(x.shape[:2], bool)
    mask[0, 3:] = False
    mask[2, 1] = False
    for go_backwards in (False, True):
        layer = layer_cls(4, return_sequences=True, go_backwards=go_backwards, **kwargs)
        layer.build(x.shape)
        randomize(layer)
        ref = keras.layers.RNN(
            layer_cls._cell_class(4, **kwargs), return_sequences=True, go_backwards=go_backwards
        )
        ref.build(x.shape)
        ref.set_weights(layer.get_weights())
        for m in (None, mask):
            np.testing.assert_allclose(
                keras.ops.convert_to_numpy(layer(x, mask=m)),
                keras.ops.convert_to_numpy(ref(x, mask=m)),
                atol=1e-6,
            )
        expected, _ = np_rnn(ref.cell, x[:, ::-1] if go_backwards else x)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), expected, atol=2e-5)


@pytest.mark.parametrize("cell_cls", [LayerNormSimpleRNNCell, LayerNormLSTMCell, LayerNormGRUCell])
def test_dropout_masks_apply_to_inputs_and_state(cell_cls):
    """Training with dropout = the NumPy step on (x * input mask, h * recurrent mask)."""
    rng = np.random.default_rng(0)
    cell = cell_cls(4, dropout=0.5, recurrent_dropout=0.5, seed=3)
    x = rng.normal(size=(3, 5)).astype("float32")
    states = [rng.normal(size=(3, d)).astype("float32") for d in np.atleast_1d(cell.state_size)]
    cell.build(x.shape)
    randomize(cell)
    dp_mask = keras.ops.convert_to_numpy(cell.get_dropout_mask(x))
    rec_mask = keras.ops.convert_to_numpy(cell.get_recurrent_dropout_mask(states[0]))
    assert 0 < (dp_mask == 0).mean() < 1 and 0 < (rec_mask == 0).mean() < 1
    h, _ = cell(x, states, training=True)
    step = STEPS[cell_cls]
    # Only the projections see the dropped h; the GRU's z * h_{t-1} uses the clean one.
    if cell_cls is LayerNormGRUCell:
        n = cell.units
        w, u = _w(cell.kernel), _w(cell.recurrent_kernel)
        b_x, b_u = _w(cell.bias)
        xp = np_ln((x * dp_mask) @ w, cell.input_norm) + b_x
        up = np_ln((states[0] * rec_mask) @ u, cell.recurrent_norm) + b_u
        z = np_sigmoid(xp[:, :n] + up[:, :n])
        r = np_sigmoid(xp[:, n : 2 * n] + up[:, n : 2 * n])
        expected = z * states[0] + (1 - z) * np.tanh(xp[:, 2 * n :] + r * up[:, 2 * n :])
    else:
        dropped_states = [states[0] * rec_mask, *states[1:]]
        expected, _ = step(cell, x * dp_mask, [s.astype("float64") for s in dropped_states])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(h), expected, atol=2e-5)
    # Inference ignores the masks.
    h_inf, _ = cell(x, states, training=False)
    expected_inf, _ = step(cell, x, [s.astype("float64") for s in states])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(h_inf), expected_inf, atol=2e-5)


@pytest.mark.parametrize("cell_cls,kwargs", CELL_CASES, ids=CELL_IDS)
def test_step_from_weights_read_once_equals_call(cell_cls, kwargs):
    """`step(inputs, states, read_weights())`, what the layers' TensorFlow loop runs with
    the weights read before the loop, computes what `call` computes from the variables."""
    x = keras.ops.convert_to_tensor(_inputs()[:, 0])
    cell = cell_cls(5, **kwargs)
    cell.build(x.shape)
    randomize(cell)
    rng = np.random.default_rng(2)
    states = [
        keras.ops.convert_to_tensor(rng.normal(size=(3, d)).astype("float32"))
        for d in np.atleast_1d(cell.state_size)
    ]
    weights = cell.read_weights()
    assert not any(isinstance(w, keras.Variable) for w in keras.tree.flatten(weights))
    expected, expected_states = cell(x, states)
    output, new_states = cell.step(x, states, weights)
    for got, want in zip([output, *new_states], [expected, *expected_states], strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want), atol=1e-6
        )


@settings(max_examples=4)
@given(data=st.data())
def test_examples_are_normalized_independently(data):
    """No statistic crosses the batch: each example's output is the same alone or batched."""
    cls = data.draw(st.sampled_from([LayerNormSimpleRNN, LayerNormLSTM, LayerNormGRU]))
    x = _inputs(batch=4, steps=3, seed=data.draw(st.integers(0, 1000)))
    layer = cls(3)
    layer.build(x.shape)
    randomize(layer)
    batched = keras.ops.convert_to_numpy(layer(x))
    index = data.draw(st.integers(0, 3))
    alone = keras.ops.convert_to_numpy(layer(x[index : index + 1]))
    np.testing.assert_allclose(alone[0], batched[index], atol=1e-5)


# --------------------------------------------------------------------------------------
# Drop-in compatibility with Keras's cells, statefulness, XLA, mixed precision.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "families",
    [
        [
            (LayerNormSimpleRNNCell, keras.layers.SimpleRNNCell),
            (LayerNormSimpleRNN, keras.layers.SimpleRNN),
        ],
        [(LayerNormLSTMCell, keras.layers.LSTMCell), (LayerNormLSTM, keras.layers.LSTM)],
        [(LayerNormGRUCell, keras.layers.GRUCell), (LayerNormGRU, keras.layers.GRU)],
    ],
    ids=["simple_rnn", "lstm", "gru"],
)
def test_drop_in_arguments_and_weights(families):
    for ours, theirs in families:
        _check_drop_in(ours, theirs)


def _documented_arguments(doc, section):
    """The names of the entries of a Google-style section (`Args:`, `Keyword Args:`)."""
    lines = inspect.cleandoc(doc).splitlines()
    names = []
    for line in lines[lines.index(section) + 1 :]:
        if line and not line.startswith(" "):
            break
        if line.startswith("    ") and not line.startswith("     ") and ":" in line:
            names.append(line.split(":")[0].strip())
    return names


def _entry(doc, name):
    """The text of the entry `name:` of a docstring (its first line and continuations)."""
    lines = inspect.cleandoc(doc).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{name}:"))
    entry = [lines[start].strip()]
    for line in lines[start + 1 :]:
        if not line.startswith("        "):
            break
        entry.append(line.strip())
    return " ".join(entry)


def _arguments(cls):
    return [n for n, p in inspect.signature(cls).parameters.items() if p.kind != p.VAR_KEYWORD]


@pytest.mark.parametrize(
    "cell_cls",
    [LayerNormSimpleRNNCell, LayerNormLSTMCell, LayerNormGRUCell],
    ids=["simple_rnn", "lstm", "gru"],
)
def test_cell_docstring_documents_every_argument_once(cell_cls):
    """Each cell writes its docstring out in its own source: every constructor argument
    (its own and its base's) has one entry, and the entries of the arguments every cell
    passes on to the base unchanged (regularizers, constraints, dropout, seed, norms) read
    the same in the three cells."""
    from keras_normkit.layers._layer_norm_rnn_base import _LayerNormCellBase

    own = _documented_arguments(cell_cls.__doc__, "Args:")
    keyword = _documented_arguments(cell_cls.__doc__, "Keyword Args:")
    assert own[-1] == "**kwargs"
    documented = own[:-1] + keyword
    assert len(set(documented)) == len(documented)
    assert set(documented) == set(_arguments(cell_cls)) | set(_arguments(_LayerNormCellBase))
    # Documented per cell (they name the Keras cell, or the cell's formula).
    per_cell = {"units", "activation", "use_bias"} | {
        f"{w}_initializer" for w in ("kernel", "recurrent", "bias")
    }
    for name in set(_arguments(_LayerNormCellBase)) - per_cell:
        assert _entry(cell_cls.__doc__, name) == _entry(LayerNormLSTMCell.__doc__, name), name


@pytest.mark.parametrize("layer_cls", [LayerNormSimpleRNN, LayerNormLSTM, LayerNormGRU])
def test_layer_forwards_the_cell_arguments(layer_cls):
    """The cell's arguments go to the cell and come back in the layer's config; the RNN's
    and the base layer's (`name`, `dtype`) stay the layer's."""
    cell_kwargs = {
        "activation": "relu",
        "use_bias": False,
        "kernel_regularizer": "l2",
        "dropout": 0.25,
        "seed": 3,
        "norm_epsilon": 1e-4,
        **{
            LayerNormLSTM: {"unit_forget_bias": False, "carry_normalized_state": True},
            LayerNormGRU: {"recurrent_activation": "hard_sigmoid", "reset_after": False},
        }.get(layer_cls, {}),
    }
    layer = layer_cls(3, zero_output_for_mask=True, name="rnn", dtype="float64", **cell_kwargs)
    assert layer.name == "rnn" and layer.cell.name == layer_cls._cell_name
    assert layer.zero_output_for_mask and layer.cell.dtype_policy.name == "float64"
    base = ("name", "trainable", "dtype")
    expected = layer_cls._cell_class(3, **cell_kwargs).get_config()
    expected = {key: value for key, value in expected.items() if key not in base}
    config = layer.get_config()
    assert {key: layer.cell.get_config()[key] for key in expected} == expected
    assert {key: config[key] for key in expected} == expected
    assert layer_cls.from_config(config).get_config() == config


def _check_drop_in(ours, theirs):
    """Every Keras constructor argument is accepted; kernel/recurrent/bias shapes match."""
    keras_args = {
        name: p.default
        for name, p in inspect.signature(theirs.__init__).parameters.items()
        if name not in ("self", "kwargs", "units", "use_cudnn")
    }
    ours_layer = ours(4, **keras_args)
    config = ours_layer.get_config()
    for name in keras_args:
        assert name in config, name
    ref = theirs(4)
    x = np.zeros((2, 3, 5), "float32")
    if "Cell" in ours.__name__:
        ours_layer, ref = keras.layers.RNN(ours_layer), keras.layers.RNN(ref)
    ours_layer(x)
    ref(x)
    names = ("kernel", "recurrent_kernel", "bias")
    ours_shapes = {w.name: tuple(w.shape) for w in ours_layer.weights if w.name in names}
    ref_shapes = {w.name: tuple(w.shape) for w in ref.weights}
    assert ours_shapes == ref_shapes


LOOP_CASES = [
    (LayerNormSimpleRNN, {}),
    (LayerNormLSTM, {}),
    (LayerNormGRU, {}),
    (LayerNormGRU, {"reset_after": False}),
]


@requires_tensorflow  # tf.GradientTape; the weights are read before the loop on TensorFlow only
@pytest.mark.parametrize("layer_cls, kwargs", LOOP_CASES)
def test_layer_gradients_equal_rnn_of_its_cell(layer_cls, kwargs):
    """The layer reads its weights once, before the time loop; RNN(cell) at every step.
    Both give the same gradient for every weight (and the input), masked and not."""
    import tensorflow as tf

    x = tf.constant(_inputs(steps=5))
    mask = np.ones(x.shape[:2], bool)
    mask[0, 3:] = False
    layer = layer_cls(4, return_sequences=True, **kwargs)
    layer.build(x.shape)
    randomize(layer)
    ref = keras.layers.RNN(layer_cls._cell_class(4, **kwargs), return_sequences=True)
    ref.build(x.shape)
    ref.set_weights(layer.get_weights())
    upstream = np.random.default_rng(5).normal(size=(*x.shape[:2], 4)).astype("float32")
    for m in (None, mask):
        grads = []
        for rnn in (layer, ref):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(rnn(x, mask=m, training=True) * upstream)
            grads.append(tape.gradient(loss, [x, *rnn.trainable_weights]))
        assert len(grads[0]) == len(grads[1]) == 1 + len(layer.trainable_weights)
        for ours, theirs in zip(*grads, strict=True):
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-5, rtol=1e-5)


@requires_tensorflow  # the TensorFlow graph's while loop
@pytest.mark.parametrize("layer_cls, kwargs", LOOP_CASES)
def test_tensorflow_loop_body_reads_no_weight(layer_cls, kwargs):
    """Inside the time loop of a training step, no weight is read (or sliced) again."""
    import tensorflow as tf

    layer = layer_cls(8, **kwargs)
    layer.build((None, 6, 3))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x, training=True))
        return tape.gradient(loss, layer.trainable_weights)

    graph = step.get_concrete_function(tf.zeros((2, 6, 3))).graph
    bodies = [f for f in graph.as_graph_def().library.function if "while_body" in f.signature.name]
    assert bodies
    for body in bodies:
        ops_in_body = {node.op for node in body.node_def}
        assert not ops_in_body & {"ReadVariableOp", "StridedSlice", "StridedSliceGrad"}, (
            body.signature.name
        )


@pytest.mark.parametrize("cls", [LayerNormLSTM, LayerNormGRU])
def test_stateful_equals_one_long_call(cls):
    x = _inputs(batch=2, steps=6)
    full = cls(4, return_sequences=True)
    full.build(x.shape)
    randomize(full)
    expected = keras.ops.convert_to_numpy(full(x))
    stateful = cls(4, return_sequences=True, stateful=True)
    stateful.build(x.shape)
    stateful.set_weights(full.get_weights())
    first = keras.ops.convert_to_numpy(stateful(x[:, :3]))
    second = keras.ops.convert_to_numpy(stateful(x[:, 3:]))
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=1e-5)
    stateful.reset_state()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(stateful(x[:, :3])), first, atol=1e-6)


@requires_xla
def test_xla_training_with_masking_and_dropout():
    x = _inputs(batch=8, steps=5)
    x[:, 3:] = 0.0
    y = np.random.default_rng(0).integers(0, 3, size=8)
    model = keras.Sequential(
        [
            keras.Input((5, 4)),
            keras.layers.Masking(0.0),
            LayerNormLSTM(4, dropout=0.1, recurrent_dropout=0.1, seed=0),
            keras.layers.Dense(3),
        ]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(True), jit_compile=True)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    changed = [np.abs(a - b).max() > 0 for a, b in zip(before, model.get_weights(), strict=True)]
    assert all(changed)


@pytest.mark.parametrize("cls", [LayerNormSimpleRNN, LayerNormLSTM, LayerNormGRU])
def test_mixed_precision_close_to_float32(cls):
    x = _inputs()
    ref = cls(4, return_sequences=True)
    ref.build(x.shape)
    randomize(ref)
    expected = keras.ops.convert_to_numpy(ref(x))
    for policy, atol in (("mixed_float16", 2e-2), ("mixed_bfloat16", 8e-2)):
        mixed = cls(4, return_sequences=True, dtype=policy)
        mixed.build(x.shape)
        mixed.set_weights(ref.get_weights())
        assert all(w.dtype == "float32" for w in mixed.weights)
        y = mixed(x)
        assert keras.backend.standardize_dtype(y.dtype) == policy.split("_")[1]
        actual = keras.ops.convert_to_numpy(keras.ops.cast(y, "float32"))
        np.testing.assert_allclose(actual, expected, atol=atol, rtol=0)


# --------------------------------------------------------------------------------------
# Bad input.
# --------------------------------------------------------------------------------------


BAD_ARGUMENTS = [  # wrong values: ValueError; wrong types: TypeError
    ({"units": 0}, "units", ValueError),
    ({"units": -3}, "units", ValueError),
    ({"units": 2.5}, "units", TypeError),
    ({"units": True}, "units", TypeError),
    ({"units": 4, "norm_epsilon": 0.0}, "norm_epsilon", ValueError),
    ({"units": 4, "norm_epsilon": -1e-3}, "norm_epsilon", ValueError),
    ({"units": 4, "norm_epsilon": float("nan")}, "norm_epsilon", ValueError),
    ({"units": 4, "norm_epsilon": "small"}, "norm_epsilon", TypeError),
    ({"units": 4, "dropout": 1.0}, "dropout", ValueError),
    ({"units": 4, "recurrent_dropout": -0.1}, "recurrent_dropout", ValueError),
    ({"units": 4, "seed": 1.5}, "seed", TypeError),
]


def test_bad_arguments():
    for cls in (LayerNormSimpleRNNCell, LayerNormLSTMCell, LayerNormGRUCell, LayerNormGRU):
        for kwargs, name, error in BAD_ARGUMENTS:
            with pytest.raises(error, match=rf"`{name}`.*Received: {name}="):
                cls(**kwargs)


# ---------------------------------------------------------------------------------------
# Migrating from TF-Addons 0.23 (it cannot be installed next to Keras 3): its two cells'
# formulas written independently in NumPy, weights created in TF-Addons' layout and ported
# with the recipe of the docstrings and the README.
# ---------------------------------------------------------------------------------------
# The helpers both recipes use; the recipes are in the family test files.


def _tfa_layer_norm(x, gamma, beta, epsilon):
    """tf.keras LayerNormalization over the last axis (population variance)."""
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    out = (x - mean) / np.sqrt(variance + epsilon) * gamma
    return out if beta is None else out + beta


def _tfa_weights(rng, shapes):
    return [rng.normal(scale=0.5, size=shape) for shape in shapes]


# --------------------------------------------------------------------------------------
# Public import paths and saved files: `layer_norm_rnn.py` was split into one module per
# family; every old path still works and `.keras` files written before still load.
# --------------------------------------------------------------------------------------

FAMILY_MODULES = {
    "LayerNormSimpleRNNCell": "keras_normkit.layers.layer_norm_simple_rnn",
    "LayerNormSimpleRNN": "keras_normkit.layers.layer_norm_simple_rnn",
    "LayerNormLSTMCell": "keras_normkit.layers.layer_norm_lstm",
    "LayerNormLSTM": "keras_normkit.layers.layer_norm_lstm",
    "LayerNormGRUCell": "keras_normkit.layers.layer_norm_gru",
    "LayerNormGRU": "keras_normkit.layers.layer_norm_gru",
}


@pytest.mark.parametrize("name,module", FAMILY_MODULES.items(), ids=list(FAMILY_MODULES))
def test_public_import_paths_and_registered_names(name, module):
    """The package, the original module and the family module give the same class, which
    keeps its registered name."""
    cls = getattr(keras_normkit.layers, name)
    assert name in keras_normkit.layers.__all__
    old = importlib.import_module("keras_normkit.layers.layer_norm_rnn")
    assert name in old.__all__
    assert getattr(old, name) is cls
    assert getattr(importlib.import_module(module), name) is cls
    assert cls.__module__ == module
    assert keras.saving.get_registered_name(cls) == f"keras_normkit>{name}"
    assert keras.saving.get_registered_object(f"keras_normkit>{name}") is cls


def _with_module_paths(path, new_path, module):
    """Copy the `.keras` file `path` to `new_path`, every family module replaced by `module`."""
    with zipfile.ZipFile(path) as source:
        entries = {info: source.read(info.filename) for info in source.infolist()}
    replaced = 0
    with zipfile.ZipFile(new_path, "w") as target:
        for info, data in entries.items():
            if info.filename == "config.json":
                text = data.decode("utf-8")
                for family in sorted(set(FAMILY_MODULES.values())):
                    replaced += text.count(json.dumps(family))
                    text = text.replace(json.dumps(family), json.dumps(module))
                data = text.encode("utf-8")
            target.writestr(info, data)
    return replaced


@pytest.mark.parametrize(
    "module",
    ["keras_normkit.layers.layer_norm_rnn", "keras_normkit.layers.no_such_module"],
    ids=["old_module", "missing_module"],
)
def test_saved_with_another_module_path_loads(module, tmp_path):
    """A `.keras` file written before the split names `layer_norm_rnn` as the module of all
    six classes. Keras finds a registered class by its registered name
    (`keras_normkit>LayerNormLSTMCell`, ...), not by its module: such a file loads, and so
    does one naming a module that does not exist."""
    x = _inputs(steps=4)
    model = keras.Sequential(
        [
            keras.Input((4, 4)),
            LayerNormSimpleRNN(3, return_sequences=True),
            LayerNormLSTM(3, return_sequences=True),
            LayerNormGRU(3, return_sequences=True, reset_after=False),
            *(
                keras.layers.RNN(cell, return_sequences=True)
                for cell in (LayerNormSimpleRNNCell(3), LayerNormLSTMCell(3), LayerNormGRUCell(3))
            ),
        ]
    )
    randomize(model)
    expected = keras.ops.convert_to_numpy(model(x))
    model.save(tmp_path / "new.keras")
    # One module entry per layer and per cell: the layers' configs have no nested cell.
    assert _with_module_paths(tmp_path / "new.keras", tmp_path / "old.keras", module) == 6
    loaded = keras.models.load_model(tmp_path / "old.keras")
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    assert [type(layer.cell) for layer in loaded.layers[-3:]] == [
        LayerNormSimpleRNNCell,
        LayerNormLSTMCell,
        LayerNormGRUCell,
    ]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), expected, atol=1e-6)
