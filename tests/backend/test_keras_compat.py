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
