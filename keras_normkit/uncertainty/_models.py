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
from keras_normkit.calibration import base
from keras_normkit.calibration.base import detect_model_output

MODEL_OUTPUTS = ("auto", "logits", "probabilities")
TINY = float(np.finfo(np.float32).tiny)


def check_model(model, name="model"):
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`{name}` must be a trained keras.Model. Received: {name}={model!r} of type "
            f"{type(model).__name__}"
        )
    return model


def resolve_model_output(model, model_output):
    """`"logits"` or `"probabilities"`: `model_output`, or detected from the last layer."""
    check_string_choice("model_output", model_output, MODEL_OUTPUTS)
    if model_output != "auto":
        return model_output
    return detect_model_output(model)


def static_num_classes(model):
    """The last dimension of the model's single output `(batch, num_classes)` if known
    statically, else None."""
    return base.static_num_classes(model, exact_rank=True)


def check_output_shape(shape):
    """The number of classes of an output of shape `(batch, num_classes)`."""
    return base.check_output_shape(shape, exact_rank=True)


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
