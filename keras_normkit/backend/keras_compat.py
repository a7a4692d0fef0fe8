"""The one place where keras_normkit reads Keras internals.

Each function documents why no public Keras API gives the same information. Keep this module
small: a Keras upgrade that renames an internal should break here, and its tests in
tests/backend/test_keras_compat.py, and nowhere else.
"""

import keras

__all__ = ["producing_layer"]


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
