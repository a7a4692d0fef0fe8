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


# --------------------------------------------------------------------------- optimizers


def _built_sgd(learning_rate, **kwargs):
    optimizer = keras.optimizers.SGD(learning_rate, **kwargs)
    optimizer.build([keras.Variable(np.zeros((2,), "float32"))])
    return optimizer


def test_optimizer_learning_rate_is_the_held_object():
    optimizer = _built_sgd(0.25)
    held = keras_compat.optimizer_learning_rate(optimizer)
    assert isinstance(held, keras.Variable)
    assert any(v is held for v in optimizer.variables)
    optimizer.learning_rate = 0.5  # the public setter assigns that same variable
    assert keras_compat.optimizer_learning_rate(optimizer) is held
    assert float(keras.ops.convert_to_numpy(held)) == 0.5
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    optimizer = _built_sgd(schedule)
    assert keras_compat.optimizer_learning_rate(optimizer) is schedule
    assert not isinstance(optimizer.learning_rate, keras.optimizers.schedules.LearningRateSchedule)
    other = keras.optimizers.schedules.ExponentialDecay(0.2, 10, 0.5)
    optimizer.learning_rate = other
    assert keras_compat.optimizer_learning_rate(optimizer) is other


def test_optimizer_iterations_variable_counts_steps_even_with_gradient_accumulation():
    weight = keras.Variable(np.zeros((2,), "float32"))
    for steps in (None, 2):
        optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=steps)
        optimizer.build([weight])
        counter = keras_compat.optimizer_iterations_variable(optimizer)
        assert isinstance(counter, keras.Variable)
        assert any(v is counter for v in optimizer.variables)
        for _ in range(3):
            optimizer.apply([keras.ops.ones((2,))], [weight])
        assert int(keras.ops.convert_to_numpy(counter)) == 3
        public = int(keras.ops.convert_to_numpy(optimizer.iterations))
        assert public == (3 if steps is None else 3 // steps)  # why the public one will not do


def test_track_and_untrack_an_existing_variable():
    optimizer = _built_sgd(0.1)
    before = len(optimizer.variables)
    extra = keras.Variable(2.0, name="multiplier")
    assert keras_compat.track_optimizer_variable(optimizer, extra) is True
    assert keras_compat.track_optimizer_variable(optimizer, extra) is False  # once only
    assert len(optimizer.variables) == before + 1 and optimizer.variables[-1] is extra
    assert keras_compat.untrack_optimizer_variable(optimizer, extra) is True
    assert keras_compat.untrack_optimizer_variable(optimizer, extra) is False
    assert len(optimizer.variables) == before
    assert not any(v is extra for v in optimizer.variables)


# --------------------------------------------------------------------------- metrics


def test_metric_direction():
    assert keras_compat.metric_direction(keras.metrics.BinaryAccuracy()) == "up"
    assert keras_compat.metric_direction(keras.metrics.AUC()) == "up"
    assert keras_compat.metric_direction(keras.metrics.MeanSquaredError()) == "down"

    class Plain(keras.metrics.Metric):
        def update_state(self, *args, **kwargs):
            pass

        def result(self):
            return 0.0

    assert keras_compat.metric_direction(Plain()) is None
    assert keras_compat.metric_direction(object()) is None


# --------------------------------------------------------------------------- models


def _specs(signature):
    return [(tuple(s.shape), s.name) for s in keras.tree.flatten(signature)]


def test_export_input_signature_of_functional_sequential_and_subclassed_models():
    a, b = keras.Input((None, 3), name="a"), keras.Input((2,), name="b")
    pooled = keras.layers.GlobalAveragePooling1D()(a)
    functional = keras.Model({"a": a, "b": b}, keras.layers.Concatenate()([pooled, b]))
    signature = keras_compat.export_input_signature(functional)
    assert len(signature) == 1 and set(signature[0]) == {"a", "b"}  # one positional argument
    assert dict((name, shape) for shape, name in _specs(signature)) == {
        "a": (None, None, 3),
        "b": (None, 2),
    }
    assert all(isinstance(s, keras.InputSpec) for s in keras.tree.flatten(signature))

    sequential = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    assert [shape for shape, _ in _specs(keras_compat.export_input_signature(sequential))] == [
        (None, 4)
    ]

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    subclassed = Subclassed()
    subclassed(np.zeros((2, 5), "float32"))
    shapes = [shape for shape, _ in _specs(keras_compat.export_input_signature(subclassed))]
    assert shapes == [(None, 5)]  # the batch dimension stays dynamic


def test_nested_layers_walks_attributes_recursively():
    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.inner = keras.layers.Dense(2, name="inner_dense")

        def call(self, x):
            return self.inner(x)

    block = Block(name="block")
    inner = keras.Sequential([keras.layers.Dense(2, name="deep")], name="inner_model")
    model = keras.Sequential([keras.Input((3,)), block, inner], name="outer")
    names = {layer.name for layer in keras_compat.nested_layers(model)}
    assert {"block", "inner_dense", "inner_model", "deep"} <= names
    assert "outer" not in names
    assert {layer.name for layer in model.layers} == {"block", "inner_model"}  # not recursive


def test_call_count_and_graph_nodes():
    from keras_normkit.backend.keras_compat import call_count, graph_nodes

    shared = keras.layers.Dense(3, name="shared")
    once = keras.layers.Dense(3, name="once")
    inputs = keras.Input((3,))
    outputs = keras.layers.Add()([shared(inputs), shared(once(inputs))])
    model = keras.Model(inputs, outputs)
    assert call_count(shared) == 2 and call_count(once) == 1
    assert call_count(keras.layers.Dense(2)) == 0 and call_count("not a layer") == 0
    calls = sorted(node.operation.name for node in graph_nodes(model))
    assert calls.count("shared") == 2 and calls.count("once") == 1
    assert {"add", "once", "shared"} <= set(calls)


def test_backend_rnn_finds_the_function_in_both_keras_layouts(monkeypatch):
    """Keras <= 3.15: `keras.src.backend.rnn` is the function; 3.16 nightlies: a module."""
    import types

    from keras.src import backend

    function = keras_compat._backend_rnn_function()
    assert callable(function) and function.__name__ == "rnn"
    module = types.ModuleType("rnn")
    module.rnn = function
    monkeypatch.setattr(backend, "rnn", module)  # the other layout, whichever this Keras has
    assert keras_compat._backend_rnn_function() is function
    monkeypatch.setattr(backend, "rnn", function)
    assert keras_compat._backend_rnn_function() is function


def test_sync_jax_training_state_outside_fit_does_nothing():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    before = [np.array(w) for w in model.get_weights()]
    keras_compat.sync_jax_training_state(model)  # no running fit: nothing to sync
    for a, b in zip(model.get_weights(), before, strict=True):
        np.testing.assert_array_equal(a, b)
    if keras.backend.backend() == "jax":
        assert callable(model.jax_state_sync)  # the JAX trainer's method it relies on
