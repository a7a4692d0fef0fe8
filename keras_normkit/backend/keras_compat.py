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
    return _backend_rnn_function()(step_function, inputs, initial_states, **kwargs)


def _backend_rnn_function():
    """`keras.src.backend.rnn`, the function, in both of Keras's layouts.

    Up to Keras 3.15 `keras.src.backend.rnn` is the function itself; from the 3.16 nightlies
    it is a module holding a function of the same name. Either way the same callable.
    """
    from keras.src import backend

    found = backend.rnn
    if not callable(found):  # Keras >= 3.16: the module `keras.src.backend.<backend>.rnn`
        found = found.rnn
    return found


__all__ += [
    "export_input_signature",
    "metric_direction",
    "nested_layers",
    "optimizer_iterations_variable",
    "optimizer_learning_rate",
    "track_optimizer_variable",
    "untrack_optimizer_variable",
]


# --------------------------------------------------------------------------- optimizers


def optimizer_learning_rate(optimizer):
    """The object `optimizer` holds as its learning rate, not its value at the current step.

    A `keras.Variable` for a float learning rate, the `LearningRateSchedule` it was given,
    or a callable. (Replacing a schedule by another goes through the public setter,
    `optimizer.learning_rate = schedule`.)
    """
    # No public equivalent: the public `optimizer.learning_rate` evaluates a schedule at the
    # optimizer's step (it returns a tensor), so it cannot tell which schedule object the
    # optimizer holds; that object lives only in the private `_learning_rate`.
    return optimizer._learning_rate


def optimizer_iterations_variable(optimizer):
    """The `keras.Variable` that counts the optimizer's steps (one of `optimizer.variables`)."""
    # No public equivalent for the variable itself: the public `optimizer.iterations` returns
    # it only without gradient accumulation; with `gradient_accumulation_steps` it returns
    # `iterations // steps`, a tensor computed from the private `_iterations` counter, which
    # cannot be recognised among `optimizer.variables`.
    return optimizer._iterations


def _holds_variable(optimizer, variable):
    return any(v is variable for v in optimizer.variables)


def track_optimizer_variable(optimizer, variable):
    """Make an existing `variable` one of `optimizer.variables`; `True` if it was not already.

    A tracked variable is part of the optimizer's state: saved with it (weights checkpoints,
    `.keras` files) and, on JAX, threaded through the functional train step.
    """
    if _holds_variable(optimizer, variable):
        return False
    # No public equivalent: `optimizer.add_variable` only creates new variables. A variable
    # owned elsewhere (the multiplier of a `schedules.Scaled`, which must stay in the
    # schedule's config) is added through the optimizer's private tracker, as Keras does
    # for its own learning-rate variable.
    optimizer._track_variable(variable)
    return True


def untrack_optimizer_variable(optimizer, variable):
    """Remove `variable` from `optimizer.variables`; `True` if it was there."""
    if not _holds_variable(optimizer, variable):
        return False
    # No public equivalent: Keras itself untracks its learning-rate variable through the
    # private tracker when a schedule replaces it; no public method removes a variable.
    optimizer._tracker.untrack(variable)
    return True


# --------------------------------------------------------------------------- metrics


def metric_direction(metric):
    """`"up"` if larger values of `metric` are better, `"down"` if smaller, `None` if unsaid."""
    # No public equivalent: a Keras metric declares its direction only in the private
    # `_direction` attribute (e.g. `"up"` for accuracy, AUC, F1); Keras's own monitoring
    # callbacks read it for `mode="auto"`, and ours follow the same rule.
    direction = getattr(metric, "_direction", None)
    return direction if direction in ("up", "down") else None


# --------------------------------------------------------------------------- models


def export_input_signature(model):
    """The input signature `model.export()` infers for a built `keras.Model`.

    A list of `keras.InputSpec` structures (one per positional argument of the model's
    call): the symbolic inputs' structure for a Functional model, `model.inputs` for a
    `Sequential`, and the shapes the model was built with for a subclassed model.
    """
    # No public equivalent: `model.export()` computes this signature internally (with the
    # subclassed-model case from private build shapes) but does not return it, and
    # `keras.export.ExportArchive.add_endpoint` needs one to add a named endpoint.
    from keras.src.export.export_utils import get_input_signature

    return get_input_signature(model)


def nested_layers(layer):
    """Every layer nested in `layer`, recursively, without `layer` itself."""
    # No public equivalent: `model.layers` lists only a model's direct children, and layers
    # held as attributes of a custom layer appear in no public list; Keras walks them with
    # the private `_flatten_layers`, which this calls.
    return list(layer._flatten_layers(include_self=False))


__all__ += ["call_count", "graph_nodes"]


def call_count(layer):
    """How many times `layer` was called on symbolic inputs (0 for a non-layer).

    No public equivalent: Keras records a layer's calls in a model graph only in the private
    `_inbound_nodes`; a shared layer (called twice) cannot be folded or rescaled on its own,
    and nothing public says whether a layer is shared.
    """
    return len(getattr(layer, "_inbound_nodes", ()))


def graph_nodes(model):
    """Every node (one call of one operation) of a Functional model's graph.

    No public equivalent: a node carries what a graph rewrite needs (its operation, its
    input tensors and the call's keyword arguments, e.g. `training=True`) and Keras exposes
    the nodes only through the private `_nodes_by_depth`.
    """
    return [node for depth in model._nodes_by_depth.values() for node in depth]


__all__ += ["sync_jax_training_state"]


def sync_jax_training_state(model):
    """On JAX, during `fit`: write the state of the running train loop into the model's and
    optimizer's variables, and make the next step read its state back from them.

    Does nothing on other backends (their variables are the state) or outside `fit`.
    """
    # No public equivalent: Keras's JAX trainer keeps the state of a running `fit` outside
    # the variables and syncs it at epoch ends; `jax_state_sync` (a method of the JAX
    # trainer, no Keras API) is what Keras's own callbacks call before reading or writing a
    # variable mid-epoch, and it marks the state as synced so the next step re-reads it.
    sync = getattr(model, "jax_state_sync", None)
    if keras.backend.backend() == "jax" and callable(sync):
        sync()
