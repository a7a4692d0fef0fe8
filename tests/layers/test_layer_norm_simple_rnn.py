"""`LayerNormSimpleRNNCell` and `LayerNormSimpleRNN`: conformance, the TF-Addons recipe.

The NumPy reference and the tests shared by the three families are in
`test_layer_norm_rnn.py`.
"""

import keras
import numpy as np

from keras_normkit.layers import LayerNormSimpleRNN, LayerNormSimpleRNNCell
from tests.conformance import RNN_SUPPORTS_MASKING, LayerConformanceTestCase
from tests.layers.test_layer_norm_rnn import _tfa_layer_norm, _tfa_weights

# --------------------------------------------------------------------------------------
# Conformance (RNN + Bidirectional for cells; the convenience layers on their own).
# --------------------------------------------------------------------------------------


class SimpleRNNConformanceTest(LayerConformanceTestCase):
    def test_simple_rnn_cell(self):
        self.run_cell_conformance_test(
            LayerNormSimpleRNNCell,
            {"units": 3, "dropout": 0.1, "recurrent_dropout": 0.1, "seed": 1},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=RNN_SUPPORTS_MASKING,
            expected_num_trainable_weights=5,
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


# ---------------------------------------------------------------------------------------
# Migrating from TF-Addons 0.23 (it cannot be installed next to Keras 3): its two cells'
# formulas written independently in NumPy, weights created in TF-Addons' layout and ported
# with the recipe of the docstrings and the README.
# ---------------------------------------------------------------------------------------


def _tfa_simple_rnn(x, kernel, recurrent_kernel, bias, gamma):
    """tfa.rnn.LayerNormSimpleRNNCell: y = tanh(ln(x W + y U) + b), ln without a shift."""
    h = np.zeros((x.shape[0], kernel.shape[1]))
    outputs = []
    for t in range(x.shape[1]):
        net = x[:, t] @ kernel + h @ recurrent_kernel
        h = np.tanh(_tfa_layer_norm(net, gamma, None, 1e-5) + bias)
        outputs.append(h)
    return np.stack(outputs, 1), h


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
