"""The training config of a tf.keras 2 file: optimizer, learning-rate schedule, losses and
metrics translated, the optimizer's step count and moments restored."""

import base64
import copy
import dis
import inspect
import marshal
import math
import numbers
import types

import keras
import numpy as np

from keras_normkit.migration import _coverage
from keras_normkit.migration._config import _ADDONS, _addons_name

_SCHEDULES = (
    "Addons>CyclicalLearningRate",
    "Addons>TriangularCyclicalLearningRate",
    "Addons>Triangular2CyclicalLearningRate",
    "Addons>ExponentialCyclicalLearningRate",
)

# (tf.keras >= 2.11) or `{optimizer}/{variable}/{slot}:0` (`tf.keras.optimizers.legacy`),
# and the Keras 3 slot holding the same quantity (same update formula): Keras 3 names it
# `{variable path with "_"}_{slot}`.
_SLOTS = {
    "Adam": {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"},
    "AdamW": {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"},
    "Adamax": {"m": "momentum", "u": "norm"},
    "SGD": {"m": "momentum"},
    "Lion": {"m": "momentum"},
    "RMSprop": {n: n for n in ("velocity", "momentum", "average_gradient")},
    "Adagrad": {"accumulator": "accumulator"},
    "Adadelta": {n: n for n in ("accumulated_grad", "accumulated_delta_var")},
    "Ftrl": {"accumulator": "accumulator", "linear": "linear"},
}
_LEGACY_SLOTS = {
    "Adam": {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"},
    "SGD": {"momentum": "momentum"},
}


def _constant_scale_fn(value):
    """The constant `c` of a `scale_fn=lambda x: c` stored by tf.keras 2, else `None`.

    tf.keras 2 stores a lambda as its marshalled bytecode. It is never run here: the code
    object is only inspected, and recognised when it takes one argument and returns one
    numeric constant (TF-Addons' documented `scale_fn=lambda x: 1.`).
    """
    if not isinstance(value, dict) or value.get("class_name") != "__lambda__":
        return None
    stored = (value.get("config") or {}).get("value")
    if not isinstance(stored, list) or not stored or any(v is not None for v in stored[1:]):
        return None  # defaults or a closure: not a constant
    try:
        code = marshal.loads(base64.b64decode(stored[0].encode("ascii")))
    except (ValueError, TypeError, EOFError, AttributeError):
        return None  # another Python version's bytecode
    if not isinstance(code, types.CodeType) or code.co_argcount != 1 or code.co_freevars:
        return None
    ignored = ("RESUME", "NOP", "CACHE", "EXTENDED_ARG")
    try:
        ops = [op for op in dis.get_instructions(code) if op.opname not in ignored]
    except Exception:  # noqa: BLE001 - unreadable bytecode is not a constant
        return None
    if [op.opname for op in ops] == ["LOAD_CONST", "RETURN_VALUE"]:
        constant = ops[0].argval
    elif [op.opname for op in ops] == ["RETURN_CONST"]:
        constant = ops[0].argval
    else:
        return None
    if isinstance(constant, bool) or not isinstance(constant, numbers.Real):
        return None
    return float(constant) if math.isfinite(constant) and constant >= 0 else None


def _cyclical_learning_rate(name, config, state):
    """keras_normkit's CyclicalLearningRate for a TF-Addons one, or `None` (with a note)."""
    from keras_normkit.schedules import CyclicalLearningRate

    initial = config.get("initial_learning_rate")
    maximal = config.get("maximal_learning_rate")
    scale_mode = config.get("scale_mode", "cycle")
    gamma = 1.0
    if name == "Addons>CyclicalLearningRate":
        constant = _constant_scale_fn(config.get("scale_fn"))
        if constant is None:
            state.notes.append(
                "the optimizer's learning rate Addons>CyclicalLearningRate has a `scale_fn` "
                "that is not a constant `lambda x: c` (it is stored as Python bytecode, "
                "never run here): not translated. Pass the schedule as custom_objects="
                "{'Addons>CyclicalLearningRate': keras_normkit.schedules."
                "CyclicalLearningRate(...)}"
            )
            return None
        mode = "triangular"
        if constant != 1.0 and isinstance(initial, numbers.Real):
            maximal = initial + constant * (maximal - initial)  # same wave, amplitude * c
    elif name == "Addons>TriangularCyclicalLearningRate":
        mode = "triangular"  # scale 1 in both scale modes
    elif name == "Addons>Triangular2CyclicalLearningRate" and scale_mode == "cycle":
        mode = "triangular2"
    elif name == "Addons>ExponentialCyclicalLearningRate" and scale_mode == "iterations":
        mode, gamma = "exp_range", config.get("gamma", 1.0)
    else:
        state.notes.append(
            f"the optimizer's learning rate {name} with scale_mode={scale_mode!r} has no "
            "keras_normkit equivalent: not translated"
        )
        return None
    try:
        return CyclicalLearningRate(initial, maximal, config.get("step_size"), mode, gamma)
    except (TypeError, ValueError) as error:
        state.notes.append(f"the optimizer's learning rate {name} is not translated: {error}")
        return None


def _learning_rate(value, state):
    """A Keras 3 learning rate (float or schedule) for a tf.keras 2 one, or `None`."""
    if not isinstance(value, dict):
        return value
    name = _addons_name(value)
    config = value.get("config") or {}
    if name is not None and name in state.custom_objects:
        replacement = state.custom_objects[name]
        if isinstance(replacement, keras.optimizers.schedules.LearningRateSchedule):
            return replacement
        return replacement.from_config(config)
    if name is None:
        try:
            return keras.optimizers.schedules.deserialize(value)
        except Exception as error:  # noqa: BLE001 - reported, the load goes on
            state.notes.append(f"learning-rate schedule {value.get('class_name')}: {error}")
            return None
    if name in _SCHEDULES:
        return _cyclical_learning_rate(name, config, state)
    state.notes.append(f"the optimizer's learning rate {name} has no equivalent")
    return None


def _optimizer(config, state):
    if config is None:
        return None
    class_name = str(config.get("class_name", ""))
    if class_name.startswith("Custom>"):  # tf.keras 2.11+ registers its optimizers so
        class_name = class_name[len("Custom>") :]
    name = _addons_name(config)
    if name in _WRAPPERS and name not in state.custom_objects:
        inner = (config.get("config") or {}).get("optimizer")
        state.notes.append(
            f"the optimizer wrapper {name} is dropped ({_WRAPPERS[name]}, for training only): "
            "the model is compiled with the optimizer it wraps"
        )
        if isinstance(inner, str):  # e.g. "adam"
            inner = {"class_name": type(keras.optimizers.get(inner)).__name__, "config": {}}
        return _optimizer(inner, state)
    if name is not None and name not in state.custom_objects:
        state.notes.append(f"the optimizer {name} has no equivalent")
        return None
    cls = state.custom_objects.get(name) if name else getattr(keras.optimizers, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)):
        state.notes.append(f"the optimizer {class_name} is not a Keras 3 optimizer")
        return None
    settings = dict(config.get("config", {}))
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
    dropped = {k: v for k, v in settings.items() if k not in accepted}
    settings = {k: v for k, v in settings.items() if k in accepted}
    for key, value in dropped.items():
        if key in ("jit_compile", "is_legacy_optimizer") or value in (None, 0, 0.0, False):
            continue
        state.notes.append(f"the optimizer's `{key}={value}` is not translated")
    if "learning_rate" in settings:
        learning_rate = _learning_rate(settings["learning_rate"], state)
        if learning_rate is None:
            fallback = (settings["learning_rate"].get("config") or {}).get("initial_learning_rate")
            if isinstance(fallback, numbers.Real):
                state.notes.append(f"the optimizer's learning rate is the constant {fallback}")
                settings["learning_rate"] = float(fallback)
            else:
                settings.pop("learning_rate")
        else:
            settings["learning_rate"] = learning_rate
    return cls(**settings)


# TF-Addons' optimizer wrappers: what each adds to the optimizer it wraps.
_WRAPPERS = {
    "Addons>Lookahead": "slow weights synchronized every `sync_period` steps",
    "Addons>MovingAverage": "a moving average of the weights, swapped in on request",
    "Addons>SWA": "a stochastic weight average, swapped in on request",
}
_FOCAL = ("Addons>SigmoidFocalCrossEntropy", "Addons>sigmoid_focal_crossentropy")


def _focal_loss(name, value, state):
    """Keras's BinaryFocalCrossentropy for TF-Addons' sigmoid focal cross-entropy, or `None`.

    TF-Addons computes, per element, `alpha_t (1 - p_t)^gamma CE(y, p)` with `alpha_t =
    y alpha + (1 - y)(1 - alpha)` (no weighting for `alpha=None` or 0) and sums over the
    last axis; Keras's `BinaryFocalCrossentropy(apply_class_balancing=True)` computes the
    same elements and averages over the last axis: the two agree for outputs of one unit.
    TF-Addons' class defaults to `reduction="none"`, which tf.keras 2's `compile` sums over
    the batch for the gradient (`reduction="sum"` here); the function, saved by its name,
    is averaged over the batch.
    """
    config = (value.get("config") or {}) if isinstance(value, dict) else {}
    widths = state.output_widths
    if any(width != 1 for width in widths):
        state.notes.append(
            f"the loss {name} is dropped: for outputs wider than one unit ({widths}) TF-Addons "
            "sums the focal cross-entropy over the last axis and Keras's "
            "BinaryFocalCrossentropy averages it"
        )
        return None
    alpha = config.get("alpha", 0.25)
    gamma = config.get("gamma", 2.0)
    reduction = config.get("reduction", "none" if config else "sum_over_batch_size")
    reduction = {"none": "sum", "auto": "sum_over_batch_size"}.get(reduction, reduction)
    return keras.losses.BinaryFocalCrossentropy(
        apply_class_balancing=bool(alpha),
        alpha=float(alpha or 0.25),
        gamma=float(gamma or 0.0),
        from_logits=bool(config.get("from_logits", False)),
        reduction=reduction,
        name=config.get("name", "sigmoid_focal_crossentropy"),
    )


def _loss_or_metric(value, state, kind):
    """A Keras 3 loss or metric for a tf.keras 2 one, or `None` (with a note)."""
    if value is None:
        return None
    if isinstance(value, list):
        items = [_loss_or_metric(item, state, kind) for item in value]
        return [item for item in items if item is not None]
    if isinstance(value, dict) and "class_name" not in value:  # per-output dict
        return {key: _loss_or_metric(item, state, kind) for key, item in value.items()}
    name = _addons_name(value) if isinstance(value, dict) else None
    if name is None and isinstance(value, str) and value.startswith(_ADDONS):
        name = value
    if name is None and isinstance(value, str):  # tf.keras 2 saves a function by its name
        entry = _coverage.COVERAGE.get(_ADDONS + value)
        if entry is not None and entry["kind"] == "loss function":
            name = _ADDONS + value
    if name is not None:
        if name in state.custom_objects:
            return state.custom_objects[name]
        if name in _FOCAL and kind == "loss":
            return _focal_loss(name, value, state)
        state.notes.append(f"the {kind} {name} (TF-Addons') is dropped")
        return None
    getter = keras.losses.get if kind == "loss" else keras.metrics.get
    try:
        if isinstance(value, dict):
            value = copy.deepcopy(value)
            config = value.get("config", {})
            if value.get("class_name") == "MeanMetricWrapper" and kind != "loss":
                # tf.keras 2 wraps a metric function, e.g. "accuracy" = categorical_accuracy:
                # the same function under the same name.
                fn = config.get("fn")
                function = getattr(keras.metrics, str(fn), None)
                if not inspect.isfunction(function):
                    function = getattr(keras.losses, str(fn), None)
                if not inspect.isfunction(function):
                    return keras.metrics.get(fn)
                return keras.metrics.MeanMetricWrapper(fn=function, name=config.get("name"))
            if config.get("reduction") == "auto":
                config["reduction"] = "sum_over_batch_size"
            config.pop("fn", None)
        return getter(value)
    except Exception as error:  # noqa: BLE001 - reported, the load goes on
        state.notes.append(f"the {kind} {value!r} is not translated ({error})")
        return None


def _compile(model, training_config, optimizer_weights, variables, state):
    state.output_widths = [output.shape[-1] for output in model.outputs]
    optimizer = _optimizer(training_config.get("optimizer_config"), state)
    loss = _loss_or_metric(training_config.get("loss"), state, "loss")
    if optimizer is None:
        state.notes.append("the model is compiled with Keras's default optimizer, rmsprop")
    if loss is None or loss == [] or (isinstance(loss, dict) and None in loss.values()):
        state.notes.append("compile the model again with a loss before training it")
        if isinstance(loss, dict):
            loss = {key: item for key, item in loss.items() if item is not None} or None
    arguments = {"optimizer": optimizer or "rmsprop", "loss": loss or None}
    for key in ("metrics", "weighted_metrics"):
        value = training_config.get(key)
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
            value = value[0]  # tf.keras 2 stores one list per output
        value = _loss_or_metric(value, state, "metric")
        if value:
            arguments[key] = value
    if training_config.get("loss_weights") is not None:
        arguments["loss_weights"] = training_config["loss_weights"]
    model.compile(**arguments)
    if optimizer is not None and optimizer_weights:
        _restore_optimizer(model, optimizer_weights, variables, state)


def _slot(parts, kind, variables):
    """`(model variable, Keras 3 slot name)` of a tf.keras 2 optimizer weight, or `None`."""
    slots, legacy = _SLOTS.get(kind, {}), _LEGACY_SLOTS.get(kind, {})
    if len(parts) >= 3 and parts[1] in slots:  # {optimizer}/{slot}/{variable}
        variable = variables.get("/".join(parts[2:]) + ":0")
        if variable is not None:
            return variable, slots[parts[1]]
    if len(parts) >= 3 and parts[-1] in legacy:  # {optimizer}/{variable}/{slot} (legacy)
        variable = variables.get("/".join(parts[1:-1]) + ":0")
        if variable is not None:
            return variable, legacy[parts[-1]]
    return None


def _restore_optimizer(model, weights, variables, state):
    """Restores the step count and the slot variables (moments) tf.keras 2 saved."""
    optimizer = model.optimizer
    kind = type(optimizer).__name__
    optimizer.build(model.trainable_variables)
    by_name = {variable.name: variable for variable in optimizer.variables}
    missing = []
    for name, value in weights.items():
        parts = (name[:-2] if name.endswith(":0") else name).split("/")
        if parts[-1] in ("iteration", "iter") and np.ndim(value) == 0:
            optimizer.iterations.assign(int(np.asarray(value)))
            continue
        found = _slot(parts, kind, variables)
        if found is not None and kind == "SGD" and not optimizer.momentum:
            continue  # tf.keras 2 keeps a momentum slot that momentum=0 never reads
        slot = None
        if found is not None:
            variable, slot_name = found
            slot = by_name.get(f"{variable.path.replace('/', '_')}_{slot_name}")
        if slot is not None and tuple(slot.shape) != np.shape(value):
            if np.size(value) == math.prod(slot.shape):  # a weight the loader reshaped
                value = np.reshape(value, slot.shape)
        if slot is None or tuple(slot.shape) != np.shape(value):
            missing.append(name)
            continue
        slot.assign(value)
    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        state.notes.append(
            f"{len(missing)} of the {len(weights)} saved variables of the optimizer "
            f"({kind}) have no Keras 3 counterpart and are not restored ({shown}): they "
            "restart from their initial values"
        )
