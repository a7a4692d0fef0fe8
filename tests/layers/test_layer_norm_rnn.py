"""Layer-normalized RNN cells and layers: NumPy references, conformance, drop-in, bad input."""

import inspect

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.layers import (
    LayerNormGRU,
    LayerNormGRUCell,
    LayerNormLSTM,
    LayerNormLSTMCell,
    LayerNormSimpleRNN,
    LayerNormSimpleRNNCell,
)
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_xla

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


def test_lstm_carry_differs_between_modes():
    """Same weights: the two LSTM variants agree at t=1 and diverge after (state differs)."""
    x = _inputs(steps=4)
    results = []
    for carry in (False, True):
        rnn = keras.layers.RNN(
            LayerNormLSTMCell(5, carry_normalized_state=carry), return_sequences=True
        )
        rnn.build(x.shape)
        randomize(rnn)
        results.append(keras.ops.convert_to_numpy(rnn(x)))
    np.testing.assert_allclose(results[0][:, 0], results[1][:, 0], atol=1e-6)
    assert np.abs(results[0][:, 1:] - results[1][:, 1:]).max() > 1e-3


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


@settings(max_examples=6)
@given(scale=st.floats(0.05, 50.0), seed=st.integers(0, 2**16))
def test_lstm_invariant_to_input_rescaling(scale, seed):
    """LN_x makes the cell blind to the scale of W x: outputs(a * x) == outputs(x), a > 0."""
    x = _inputs(steps=3, seed=seed)
    rnn = LayerNormLSTM(4, norm_epsilon=1e-9, return_sequences=True)
    rnn.build(x.shape)
    randomize(rnn, seed)
    y1 = keras.ops.convert_to_numpy(rnn(x))
    y2 = keras.ops.convert_to_numpy(rnn(x * np.float32(scale)))
    np.testing.assert_allclose(y2, y1, atol=2e-4)


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
# Conformance (RNN + Bidirectional for cells; the convenience layers on their own).
# --------------------------------------------------------------------------------------


class CellConformanceTest(LayerConformanceTestCase):
    def test_simple_rnn_cell(self):
        self.run_cell_conformance_test(
            LayerNormSimpleRNNCell,
            {"units": 3, "dropout": 0.1, "recurrent_dropout": 0.1, "seed": 1},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            expected_num_trainable_weights=5,
            atol=1e-5,
        )

    def test_lstm_cell(self):
        self.run_cell_conformance_test(
            LayerNormLSTMCell,
            {"units": 3, "dropout": 0.1, "recurrent_dropout": 0.1, "seed": 1},
            input_shape=(2, 4, 3),
            rnn_kwargs={"return_sequences": True},
            expected_output_shape=(2, 4, 3),
            supports_masking=True,
            expected_num_trainable_weights=9,
            atol=1e-5,
        )

    def test_gru_cell(self):
        self.run_cell_conformance_test(
            LayerNormGRUCell,
            {"units": 3, "reset_after": False},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            expected_num_trainable_weights=9,
            atol=1e-5,
        )


class LayerConformanceTest(LayerConformanceTestCase):
    def test_lstm_layer(self):
        self.run_conformance_test(
            LayerNormLSTM,
            {"units": 3, "return_sequences": True, "carry_normalized_state": True},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 4, 3),
            supports_masking=True,
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_gru_layer(self):
        self.run_conformance_test(
            LayerNormGRU,
            {"units": 3, "dropout": 0.2, "seed": 2},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_simple_rnn_layer(self):
        self.run_conformance_test(
            LayerNormSimpleRNN,
            {"units": 3, "go_backwards": True},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            atol=1e-5,
        )


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


def test_lstm_forget_bias_initialized_like_keras():
    cell = LayerNormLSTMCell(3)
    cell.build((None, 2))
    ref = keras.layers.LSTMCell(3)
    ref.build((None, 2))
    np.testing.assert_array_equal(_w(cell.bias), _w(ref.bias))
    assert _w(cell.bias)[3:6].tolist() == [1.0, 1.0, 1.0]


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


def _tfa_layer_norm(x, gamma, beta, epsilon):
    """tf.keras LayerNormalization over the last axis (population variance)."""
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    out = (x - mean) / np.sqrt(variance + epsilon) * gamma
    return out if beta is None else out + beta


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _tfa_simple_rnn(x, kernel, recurrent_kernel, bias, gamma):
    """tfa.rnn.LayerNormSimpleRNNCell: y = tanh(ln(x W + y U) + b), ln without a shift."""
    h = np.zeros((x.shape[0], kernel.shape[1]))
    outputs = []
    for t in range(x.shape[1]):
        net = x[:, t] @ kernel + h @ recurrent_kernel
        h = np.tanh(_tfa_layer_norm(net, gamma, None, 1e-5) + bias)
        outputs.append(h)
    return np.stack(outputs, 1), h


def _tfa_lstm(x, weights):
    """tfa.rnn.LayerNormLSTMCell: normalized gates, bias after the norms, LN(c) carried."""
    kernel, recurrent_kernel, bias, gk, bk, gr, br, gs, bs = weights
    units = recurrent_kernel.shape[0]
    h = np.zeros((x.shape[0], units))
    c = np.zeros((x.shape[0], units))
    outputs = []
    for t in range(x.shape[1]):
        z = _tfa_layer_norm(x[:, t] @ kernel, gk, bk, 1e-3)
        z = z + _tfa_layer_norm(h @ recurrent_kernel, gr, br, 1e-3) + bias
        z_i, z_f, z_c, z_o = np.split(z, 4, axis=1)
        c = _sigmoid(z_f) * c + _sigmoid(z_i) * np.tanh(z_c)
        c = _tfa_layer_norm(c, gs, bs, 1e-3)
        h = _sigmoid(z_o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, 1), h, c


def _tfa_weights(rng, shapes):
    return [rng.normal(scale=0.5, size=shape) for shape in shapes]


def test_tf_addons_simple_rnn_cell_recipe():
    rng = np.random.default_rng(0)
    units, features, steps = 5, 3, 7
    x = rng.normal(size=(4, steps, features))
    # TF-Addons' layout: [kernel, recurrent_kernel, bias, gamma] (its LN has no beta).
    tfa = _tfa_weights(rng, [(features, units), (units, units), (units,), (units,)])
    tfa[3] = 1.0 + tfa[3]  # a gain away from 1
    expected, expected_h = _tfa_simple_rnn(x, *tfa)

    cell = LayerNormSimpleRNNCell(units, norm_epsilon=1e-5)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    rnn.build((None, steps, features))
    cell.set_weights([w.astype("float32") for w in tfa] + [np.zeros(units, "float32")])
    outputs, h = (keras.ops.convert_to_numpy(t) for t in rnn(x.astype("float32")))
    np.testing.assert_allclose(outputs, expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(h, expected_h, atol=1e-6, rtol=0)
    # With Keras's default epsilon (1e-3) the outputs differ: the epsilon matters.
    default = LayerNormSimpleRNNCell(units)
    other = keras.layers.RNN(default, return_sequences=True)
    other.build((None, steps, features))
    default.set_weights(cell.get_weights())
    assert np.abs(keras.ops.convert_to_numpy(other(x.astype("float32"))) - expected).max() > 1e-5


def test_tf_addons_lstm_cell_recipe():
    rng = np.random.default_rng(1)
    units, features, steps = 4, 3, 6
    x = rng.normal(size=(5, steps, features))
    # TF-Addons' layout: kernel, recurrent_kernel, bias, then (gamma, beta) of kernel_norm,
    # recurrent_norm and state_norm.
    shapes = [(features, 4 * units), (units, 4 * units), (4 * units,)]
    shapes += [(4 * units,)] * 4 + [(units,)] * 2
    tfa = _tfa_weights(rng, shapes)
    for i in (3, 5, 7):
        tfa[i] = 1.0 + tfa[i]  # gains around 1
    expected, expected_h, expected_c = _tfa_lstm(x, tfa)

    cell = LayerNormLSTMCell(units, carry_normalized_state=True)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    rnn.build((None, steps, features))
    cell.set_weights([w.astype("float32") for w in tfa])
    outputs, h, c = (keras.ops.convert_to_numpy(t) for t in rnn(x.astype("float32")))
    np.testing.assert_allclose(outputs, expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(h, expected_h, atol=1e-6, rtol=0)
    np.testing.assert_allclose(c, expected_c, atol=1e-6, rtol=0)
    # Without carry_normalized_state (the paper's form) the outputs differ from TF-Addons'.
    paper = LayerNormLSTMCell(units)
    other = keras.layers.RNN(paper, return_sequences=True)
    other.build((None, steps, features))
    paper.set_weights(cell.get_weights())
    assert np.abs(keras.ops.convert_to_numpy(other(x.astype("float32"))) - expected).max() > 1e-4
