"""`PeepholeLSTMCell`: NumPy reference, masking, conformance, TF-Addons' weights, bad input."""

import pathlib

import keras
import numpy as np
import pytest

from keras_normkit.layers import PeepholeLSTMCell
from tests.conformance import RNN_SUPPORTS_MASKING, LayerConformanceTestCase
from tests.migration import references

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "migration" / "fixtures"


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def np_peephole_lstm(x, kernel, recurrent, bias, p_i, p_f, p_o, go_backwards=False):
    """Gers & Schmidhuber's peephole LSTM in float64, Keras's gate order (i, f, g, o); the
    input and forget gates see c_{t-1}, the output gate c_t. Every output, in the order
    computed."""
    units = recurrent.shape[0]
    h = np.zeros((x.shape[0], units))
    c = np.zeros_like(h)
    outputs = []
    steps = range(x.shape[1] - 1, -1, -1) if go_backwards else range(x.shape[1])
    for t in steps:
        z = x[:, t] @ kernel + h @ recurrent + bias
        z_i, z_f, z_g, z_o = np.split(z, 4, axis=-1)
        i = sigmoid(z_i + p_i * c)
        f = sigmoid(z_f + p_f * c)
        c = f * c + i * np.tanh(z_g)
        h = sigmoid(z_o + p_o * c) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, axis=1)


class PeepholeLSTMConformanceTest(LayerConformanceTestCase):
    def test_cell(self):
        self.run_cell_conformance_test(
            PeepholeLSTMCell,
            {"units": 3, "dropout": 0.1, "recurrent_dropout": 0.1, "seed": 1},
            input_shape=(2, 4, 3),
            rnn_kwargs={"return_sequences": True},
            expected_output_shape=(2, 4, 3),
            supports_masking=RNN_SUPPORTS_MASKING,
            expected_num_trainable_weights=6,
            atol=1e-5,
        )


def test_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 4)).astype("float32")
    layer = keras.layers.RNN(PeepholeLSTMCell(6), return_sequences=True)
    layer.build(x.shape)
    weights = [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.weights]
    layer.set_weights(weights)
    expected = np_peephole_lstm(x.astype("float64"), *[w.astype("float64") for w in weights])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), expected, atol=1e-5)
    # Zero peepholes: Keras's LSTMCell with the same kernels.
    lstm = keras.layers.RNN(keras.layers.LSTMCell(6), return_sequences=True)
    lstm.build(x.shape)
    lstm.set_weights(weights[:3])
    layer.set_weights(weights[:3] + [np.zeros(6, "float32")] * 3)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(x)), keras.ops.convert_to_numpy(lstm(x)), atol=1e-6
    )


def test_masked_steps_keep_the_state():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    layer = keras.layers.RNN(PeepholeLSTMCell(4, seed=0))
    y = keras.ops.convert_to_numpy(layer(x, mask=mask))
    short = keras.ops.convert_to_numpy(layer(x[:1, :4]))
    np.testing.assert_allclose(y[:1], short, atol=1e-6)


def test_tf_addons_weights_give_tf_addons_outputs():
    """The first RNN of the `peephole_lstm` fixture (written by TF-Addons 0.23): TF-Addons'
    weights in TF-Addons' order give the float64 reference of the same formula."""
    path = FIXTURES / "peephole_lstm.h5"
    w = references.h5_weights(path, "rnn", "rnn/peephole_lstm_cell/")
    data = np.load(FIXTURES / "peephole_lstm.npz")
    x = data["x"]
    layer = keras.layers.RNN(PeepholeLSTMCell(4), return_sequences=True)
    layer.build(x.shape)
    names = [
        "kernel",
        "recurrent_kernel",
        "bias",
        "input_gate_peephole_weights",
        "forget_gate_peephole_weights",
        "output_gate_peephole_weights",
    ]
    layer.set_weights([w[n].astype("float32") for n in names])
    expected = np_peephole_lstm(x.astype("float64"), *[w[n] for n in names])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), expected, atol=1e-5)


def test_bad_arguments():
    with pytest.raises(TypeError, match="no `implementation`.*Received: implementation=1"):
        PeepholeLSTMCell(3, implementation=1)
    with pytest.raises(ValueError, match="units"):
        PeepholeLSTMCell(0)
