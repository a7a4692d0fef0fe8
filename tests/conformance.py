"""Conformance checks every keras_normkit layer and cell must pass.

`LayerConformanceTestCase.run_conformance_test` runs Keras's own
`keras.src.testing.TestCase.run_layer_test` (config and serialization round trips, eager
and symbolic calls, a training step, mixed precision, masking) and then, on a functional
model wrapping the layer:

* `.keras` save -> `keras.models.load_model` **without `custom_objects`** gives identical
  outputs (so the layer is registered and its config is complete);
* `model.export()` -> `tf.saved_model.load(...).serve(...)` gives identical outputs
  (TensorFlow backend only).

Cells are tested inside `keras.layers.RNN`: pass `layer_cls=keras.layers.RNN` and
`init_kwargs={"cell": MyCell(...)}`, or use `run_cell_conformance_test`.
"""

import os
import tempfile

import keras
import numpy as np
from keras.src import testing

__all__ = ["RNN_SUPPORTS_MASKING", "LayerConformanceTestCase"]

# What `keras.layers.RNN` declares, which the cells tested inside it inherit: `True` up to
# Keras 3.15, `False` in keras-nightly 3.16 (whose `RNN` still applies the mask in `call`;
# the masking tests of each layer check that it does). Our own recurrent layers declare
# `True` on every Keras (tests/layers/test_rnn_mask_propagation.py).
RNN_SUPPORTS_MASKING = keras.layers.RNN(keras.layers.SimpleRNNCell(1)).supports_masking


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) and not _is_shape(x) else [x]


def _is_shape(x):
    return isinstance(x, tuple) and all(d is None or isinstance(d, int) for d in x)


def _random_inputs(input_shape, seed=0):
    rng = np.random.default_rng(seed)
    if _is_shape(input_shape):
        return rng.normal(size=input_shape).astype("float32")
    # A tuple: Keras's generator adapter (used by run_layer_test's training check) rejects lists.
    return tuple(rng.normal(size=s).astype("float32") for s in input_shape)


def _to_numpy(outputs):
    if isinstance(outputs, dict):
        return [keras.ops.convert_to_numpy(outputs[k]) for k in sorted(outputs)]
    if isinstance(outputs, (list, tuple)):
        return [keras.ops.convert_to_numpy(o) for o in outputs]
    return [keras.ops.convert_to_numpy(outputs)]


def build_functional_model(layer, input_data, call_kwargs=None, dynamic_axes=()):
    """A functional model `inputs -> layer(inputs)` for arrays shaped like `input_data`.

    `dynamic_axes` lists the (non-batch) axes to declare as `None` (e.g. time), so the
    saved and exported model are exercised with an unknown length on that axis.
    """
    call_kwargs = call_kwargs or {}
    arrays = input_data if isinstance(input_data, (list, tuple)) else [input_data]
    inputs = []
    for array in arrays:
        shape = list(array.shape[1:])
        for axis in dynamic_axes:
            if axis - 1 < len(shape):
                shape[axis - 1] = None
        inputs.append(keras.Input(shape=tuple(shape), dtype=str(array.dtype)))
    outputs = layer(inputs if isinstance(input_data, (list, tuple)) else inputs[0], **call_kwargs)
    return keras.Model(inputs if isinstance(input_data, (list, tuple)) else inputs[0], outputs)


class LayerConformanceTestCase(testing.TestCase):
    """`keras.src.testing.TestCase` plus the keras_normkit conformance checks."""

    def assert_keras_round_trip(self, model, input_data, atol=1e-6):
        """`.keras` save -> load without custom_objects -> identical predictions."""
        expected = _to_numpy(model(input_data, training=False))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            model.save(path)
            reloaded = keras.models.load_model(path)
        actual = _to_numpy(reloaded(input_data, training=False))
        self.assertEqual(len(expected), len(actual))
        for e, a in zip(expected, actual, strict=True):
            np.testing.assert_allclose(a, e, atol=atol, rtol=0)
        return reloaded

    def assert_saved_model_round_trip(self, model, input_data, atol=1e-6):
        """`model.export()` -> `tf.saved_model.load` -> identical outputs (TF backend only)."""
        if keras.backend.backend() != "tensorflow":
            return None
        import tensorflow as tf

        expected = _to_numpy(model(input_data, training=False))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "exported")
            model.export(path, verbose=False)
            restored = tf.saved_model.load(path)
            args = input_data if isinstance(input_data, (list, tuple)) else [input_data]
            tensors = [tf.constant(a) for a in args]
            outputs = restored.serve(
                tensors if isinstance(input_data, (list, tuple)) else tensors[0]
            )
        actual = _to_numpy(outputs)
        self.assertEqual(len(expected), len(actual))
        for e, a in zip(expected, actual, strict=True):
            np.testing.assert_allclose(a, e, atol=atol, rtol=0)
        return restored

    def run_conformance_test(
        self,
        layer_cls,
        init_kwargs,
        input_shape=None,
        input_data=None,
        call_kwargs=None,
        expected_output_shape=None,
        supports_masking=None,
        run_training_check=True,
        run_mixed_precision_check=True,
        dynamic_axes=(),
        atol=1e-6,
        **run_layer_test_kwargs,
    ):
        """Keras's `run_layer_test`, then `.keras` and SavedModel round trips.

        Args:
            layer_cls: The layer class (or `keras.layers.RNN` for a cell).
            init_kwargs: Constructor arguments.
            input_shape: Shape (or list of shapes) of random float32 inputs.
            input_data: Explicit input array(s) instead of `input_shape`.
            call_kwargs: Extra call arguments for `run_layer_test`.
            expected_output_shape: Passed to `run_layer_test`.
            supports_masking: Passed to `run_layer_test`.
            run_training_check: Passed to `run_layer_test`.
            run_mixed_precision_check: Passed to `run_layer_test`.
            dynamic_axes: Non-batch axes declared `None` in the saved/exported model.
            atol: Tolerance of the round-trip comparisons.
            **run_layer_test_kwargs: Anything else `run_layer_test` accepts.
        """
        if input_data is None:
            input_data = _random_inputs(input_shape)
        self.run_layer_test(
            layer_cls,
            init_kwargs,
            input_data=input_data,
            call_kwargs=call_kwargs,
            expected_output_shape=expected_output_shape,
            supports_masking=supports_masking,
            run_training_check=run_training_check,
            run_mixed_precision_check=run_mixed_precision_check,
            **run_layer_test_kwargs,
        )
        layer = layer_cls(**init_kwargs)
        model = build_functional_model(layer, input_data, dynamic_axes=dynamic_axes)
        self.assert_keras_round_trip(model, input_data, atol=atol)
        self.assert_saved_model_round_trip(model, input_data, atol=atol)
        return model

    def run_cell_conformance_test(self, cell_cls, init_kwargs, input_shape, **kwargs):
        """Conformance of a recurrent cell inside `keras.layers.RNN` (and `Bidirectional`)."""
        rnn_kwargs = kwargs.pop("rnn_kwargs", {})
        self.run_conformance_test(
            keras.layers.RNN,
            {"cell": cell_cls(**init_kwargs), **rnn_kwargs},
            input_shape=input_shape,
            **kwargs,
        )
        data = _random_inputs(input_shape, seed=1)
        bidirectional = keras.layers.Bidirectional(
            keras.layers.RNN(cell_cls(**init_kwargs), **rnn_kwargs)
        )
        model = build_functional_model(bidirectional, data)
        self.assert_keras_round_trip(model, data, atol=kwargs.get("atol", 1e-6))
        return model
