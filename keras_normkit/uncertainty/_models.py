"""What the Keras wrappers of the package share: reading a wrapped classifier's outputs.

A wrapped model outputs logits, or probabilities when its last layer applies softmax or
sigmoid (`model_output="auto"` detects it from that layer, as the calibration wrappers
do). Probabilities are turned into logits as log-probabilities (floored at the smallest
normal float32), which softmax maps back to the same probabilities; a single sigmoid unit
or logit z is a binary classifier, read as the two logits (0, z).
"""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_string_choice
from keras_normkit.backend import keras_compat

MODEL_OUTPUTS = ("auto", "logits", "probabilities")
TINY = float(np.finfo(np.float32).tiny)


def check_model(model, name="model"):
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`{name}` must be a trained keras.Model. Received: {name}={model!r} of type "
            f"{type(model).__name__}"
        )
    return model


def _output_layer(model):
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        outputs = None
    if outputs and len(outputs) == 1:
        layer = keras_compat.producing_layer(outputs[0])
        if layer is not None:
            return layer
    layers = getattr(model, "layers", None)
    return layers[-1] if layers else None


def resolve_model_output(model, model_output):
    """`"logits"` or `"probabilities"`: `model_output`, or detected from the last layer."""
    check_string_choice("model_output", model_output, MODEL_OUTPUTS)
    if model_output != "auto":
        return model_output
    layer = _output_layer(model)
    if isinstance(layer, keras.layers.Softmax):
        return "probabilities"
    activation = getattr(getattr(layer, "activation", None), "__name__", None)
    return "probabilities" if activation in ("softmax", "sigmoid") else "logits"


def static_num_classes(model):
    """The last dimension of the model's single output if known statically, else None."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        return None
    if not outputs:
        return None
    if len(outputs) != 1:
        raise ValueError(
            "The wrapped model must have a single output of shape (batch, num_classes). "
            f"Received a model with {len(outputs)} outputs."
        )
    return check_output_shape(outputs[0].shape)


def check_output_shape(shape):
    if len(shape) != 2 or shape[-1] == 0:
        raise ValueError(
            "The wrapped model must output logits or probabilities of shape (batch, "
            f"num_classes) (num_classes = 1 for a binary classifier). Received an output of "
            f"shape {tuple(shape)}."
        )
    return shape[-1]


def logits_from_outputs(outputs, model_output):
    """Float32 logits `(batch, k)`, k >= 2, from a classifier's outputs (`keras.ops`)."""
    if isinstance(outputs, (list, tuple, dict)):
        raise ValueError(
            "The wrapped model must have a single output of shape (batch, num_classes). "
            f"Received a {type(outputs).__name__} of outputs."
        )
    z = ops.cast(outputs, "float32")
    if model_output == "probabilities":
        if z.shape[-1] == 1:
            z = ops.log(ops.maximum(z, TINY)) - ops.log(ops.maximum(1.0 - z, TINY))
        else:
            return ops.log(ops.maximum(z, TINY))
    if z.shape[-1] == 1:
        z = ops.concatenate([ops.zeros_like(z), z], axis=-1)
    return z


def numpy_logits(outputs, model_output):
    """NumPy twin of `logits_from_outputs` (float32 arithmetic), k >= 2 columns."""
    z = np.asarray(outputs, dtype=np.float32)
    if z.ndim == 1:
        z = z.reshape(-1, 1)
    tiny = np.float32(TINY)
    if model_output == "probabilities":
        if z.shape[-1] == 1:
            z = np.log(np.maximum(z, tiny)) - np.log(np.maximum(np.float32(1) - z, tiny))
        else:
            return np.log(np.maximum(z, tiny))
    if z.shape[-1] == 1:
        z = np.concatenate([np.zeros_like(z), z], axis=-1)
    return z


def build_on_symbolic_inputs(wrapper, model):
    """Call `wrapper` once on symbolic inputs shaped as `model`'s, when it has static ones, so
    that it is built (and can `export`) before any real call; else leave it to the first
    call."""
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        return
    if not inputs:
        return
    symbolic = [keras.KerasTensor(t.shape, dtype=t.dtype) for t in inputs]
    try:
        wrapper(symbolic[0] if len(symbolic) == 1 else symbolic)
    except Exception:  # noqa: BLE001 - best effort: a first real call builds it anyway
        pass
