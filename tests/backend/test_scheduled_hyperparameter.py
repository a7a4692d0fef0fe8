"""`ScheduledValue` and `ScheduledHyperparameter`: a float hyperparameter of an optimizer
that can be written between compiled steps."""

import json

import keras
import numpy as np
import pytest

from keras_normkit.backend.scheduled_hyperparameter import (
    ScheduledHyperparameter,
    ScheduledValue,
)


def test_scheduled_value_compares_and_serializes_as_its_initial_float():
    value = ScheduledValue(0.9, name="momentum")
    value.assign(0.25)
    assert isinstance(value, float) and isinstance(value, keras.Variable)
    assert value != 0 and value > 0 and value == 0.9 and not value < 0.5  # the static value
    assert json.dumps({"momentum": value}) == '{"momentum": 0.9}'
    # Arithmetic and conversion: the current value.
    assert float(keras.ops.convert_to_numpy(keras.ops.cast(value, "float32"))) == 0.25
    assert float(keras.ops.convert_to_numpy(1 - value)) == pytest.approx(0.75)
    assert float(value) == 0.25


def test_install_write_remove():
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    optimizer.build([keras.Variable(np.zeros(2, "float32"))])
    count = len(optimizer.variables)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    hyperparameter = ScheduledHyperparameter(optimizer, "momentum")
    hyperparameter.write(model, 0.5)
    current = optimizer.momentum
    assert float(keras.ops.convert_to_numpy(keras.ops.cast(current, "float32"))) == 0.5
    if keras.backend.backend() == "torch":  # eager steps: the float itself
        assert type(current) is float and len(optimizer.variables) == count
    else:  # a tracked variable
        assert isinstance(current, ScheduledValue) and len(optimizer.variables) == count + 1
    hyperparameter.remove()
    assert type(optimizer.momentum) is float and optimizer.momentum == 0.5
    assert len(optimizer.variables) == count
