"""The one place where keras_normkit reads Keras internals.

Each function documents why no public Keras API gives the same information. Keep this module
small: a Keras upgrade that renames an internal should break here, and its tests in
tests/backend/test_keras_compat.py, and nowhere else.
"""

import keras

# No public equivalent: the mixin that gives an RNN cell Keras's per-sequence dropout masks
# (`get_dropout_mask`, `get_recurrent_dropout_mask`, reset by `keras.layers.RNN` at each
# call) is not exported; `keras.layers.SimpleRNNCell` and friends inherit it internally.
# Re-exported so that our cells share exactly Keras's mask semantics.
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

__all__ = ["DropoutRNNCell", "backend_rnn", "producing_layer"]


def producing_layer(tensor):
    """The layer (operation) whose call produced the symbolic `tensor`, else `None`.

    `None` for anything that is not a `keras.KerasTensor` (NumPy arrays, eager tensors) and
    for a symbolic tensor with no recorded history. For `keras.Input(...)` it is the
    `InputLayer`.
    """
    if not isinstance(tensor, keras.KerasTensor):
        return None
    # No public equivalent: Keras records the producing operation of a symbolic tensor only
    # in the private `_keras_history` (operation, node_index, tensor_index). Public APIs walk
    # a graph from a model's inputs to its outputs, but a layer being called on a symbolic
    # tensor has no model yet and needs the one operation just upstream of its input.
    history = getattr(tensor, "_keras_history", None)
    return getattr(history, "operation", None) if history is not None else None


def backend_rnn(step_function, inputs, initial_states, **kwargs):
    """The active backend's RNN time loop, the one `keras.layers.RNN` runs.

    `keras.src.backend.rnn(step_function, inputs, initial_states, go_backwards=False,
    mask=None, constants=None, unroll=False, input_length=None, time_major=False,
    zero_output_for_mask=False, return_all_outputs=True)` returns
    `(last_output, outputs, new_states)`. No public equivalent: `keras.ops.scan` and
    `keras.ops.while_loop` are generic loops, while this is the loop Keras tuned per backend
    for RNNs (`tf.while_loop` over a `TensorArray` with the unknown-length handling of
    TensorFlow, `lax.scan` on JAX), which `FastWeightsRNN` runs its chunks with so that it
    behaves like `keras.layers.RNN` (masks, export, XLA).
    """
    from keras.src import backend

    return backend.rnn(step_function, inputs, initial_states, **kwargs)
