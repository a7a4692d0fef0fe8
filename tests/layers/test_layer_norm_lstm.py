"""`LayerNormLSTMCell` and `LayerNormLSTM`: carried state, rescaling invariance,
conformance, forget-gate bias, the TF-Addons recipe.

The NumPy reference and the tests shared by the three families are in
`test_layer_norm_rnn.py`.
"""

import keras
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.layers import LayerNormLSTM, LayerNormLSTMCell
from tests.conformance import RNN_SUPPORTS_MASKING, LayerConformanceTestCase
from tests.layers.test_layer_norm_rnn import _inputs, _tfa_layer_norm, _tfa_weights, _w, randomize


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


# --------------------------------------------------------------------------------------
# Conformance (RNN + Bidirectional for cells; the convenience layers on their own).
# --------------------------------------------------------------------------------------


class LSTMConformanceTest(LayerConformanceTestCase):
    def test_lstm_cell(self):
        self.run_cell_conformance_test(
            LayerNormLSTMCell,
            {"units": 3, "dropout": 0.1, "recurrent_dropout": 0.1, "seed": 1},
            input_shape=(2, 4, 3),
            rnn_kwargs={"return_sequences": True},
            expected_output_shape=(2, 4, 3),
            supports_masking=RNN_SUPPORTS_MASKING,
            expected_num_trainable_weights=9,
            atol=1e-5,
        )

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


def test_lstm_forget_bias_initialized_like_keras():
    cell = LayerNormLSTMCell(3)
    cell.build((None, 2))
    ref = keras.layers.LSTMCell(3)
    ref.build((None, 2))
    np.testing.assert_array_equal(_w(cell.bias), _w(ref.bias))
    assert _w(cell.bias)[3:6].tolist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------------------------------
# Migrating from TF-Addons 0.23 (it cannot be installed next to Keras 3): its two cells'
# formulas written independently in NumPy, weights created in TF-Addons' layout and ported
# with the recipe of the docstrings and the README.
# ---------------------------------------------------------------------------------------


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


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
