"""keras_normkit.backend.keras_compat: the shim over Keras internals still reads them right."""

import keras
import numpy as np

from keras_normkit.backend import keras_compat


def test_producing_layer_of_symbolic_tensors():
    inputs = keras.Input((4,), name="features")
    dense = keras.layers.Dense(3, name="dense")
    hidden = dense(inputs)
    activation = keras.layers.Activation("selu", name="act")
    outputs = activation(hidden)
    assert keras_compat.producing_layer(hidden) is dense
    assert keras_compat.producing_layer(outputs) is activation
    input_layer = keras_compat.producing_layer(inputs)
    assert isinstance(input_layer, keras.layers.InputLayer)
    assert input_layer.name == "features"


def test_producing_layer_in_a_sequential_model():
    first, second = keras.layers.Dense(3), keras.layers.Dense(2)
    model = keras.Sequential([keras.Input((4,)), first, second])
    assert keras_compat.producing_layer(model.outputs[0]) is second


def test_producing_layer_of_concrete_values_is_none():
    assert keras_compat.producing_layer(np.zeros((2, 3), "float32")) is None
    assert keras_compat.producing_layer(keras.ops.zeros((2, 3))) is None
    assert keras_compat.producing_layer(keras.KerasTensor((None, 3))) is None


def test_dropout_rnn_cell_gives_one_mask_per_sequence():
    """The re-exported mixin still caches one dropout mask until `reset_dropout_mask`."""

    class Cell(keras.layers.Layer, keras_compat.DropoutRNNCell):
        def __init__(self):
            super().__init__()
            self.dropout, self.recurrent_dropout = 0.5, 0.25
            self.seed_generator = keras.random.SeedGenerator(1)

    cell = Cell()
    x = keras.ops.ones((4, 16))
    mask = keras.ops.convert_to_numpy(cell.get_dropout_mask(x))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cell.get_dropout_mask(x)), mask)
    assert set(np.unique(mask)) <= {0.0, 2.0}  # inverted dropout: kept units scaled by 1/0.5
    recurrent = keras.ops.convert_to_numpy(cell.get_recurrent_dropout_mask(x))
    assert set(np.unique(recurrent)) <= {0.0, np.float32(1 / 0.75)}
    cell.reset_dropout_mask()  # a new sequence: a new mask (the seed generator moved on)
    cell.reset_recurrent_dropout_mask()
    assert tuple(cell.get_dropout_mask(x).shape) == (4, 16)


def test_backend_rnn_runs_a_step_function_over_time():
    """`backend_rnn` keeps Keras's `(last_output, outputs, new_states)` contract."""
    x = np.arange(12, dtype="float32").reshape(2, 3, 2)  # (batch, time, features)

    def step(inputs, states):
        total = states[0] + inputs
        return total, [total]

    inputs = keras.ops.convert_to_tensor(x)  # tensors: PyTorch's loop takes no NumPy
    last, outputs, states = keras_compat.backend_rnn(step, inputs, [keras.ops.zeros((2, 2))])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), np.cumsum(x, axis=1))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(last), x.sum(axis=1))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(states[0]), x.sum(axis=1))
    mask = np.array([[True, False, True], [True, True, False]])
    _, outputs, states = keras_compat.backend_rnn(
        step,
        inputs,
        [keras.ops.zeros((2, 2))],
        mask=keras.ops.convert_to_tensor(mask),
        return_all_outputs=True,
    )
    expected = np.stack([x[0, 0] + x[0, 2], x[1, 0] + x[1, 1]])  # masked steps carry the state
    np.testing.assert_allclose(keras.ops.convert_to_numpy(states[0]), expected)
