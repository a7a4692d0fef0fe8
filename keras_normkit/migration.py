"""Loading tf.keras 2 models that use TensorFlow Addons (TF-Addons) objects into Keras 3.

TF-Addons reached end of life, and Keras 3 cannot read its objects: `keras.models.load_model`
on a `.h5` file written by tf.keras 2 with `Addons>WeightNormalization`,
`Addons>LayerNormLSTMCell` or `Addons>LayerNormSimpleRNNCell` fails ("Unknown layer",
"Could not locate class"), and the training config of a tf.keras 2 file (its metrics, an
`Addons>CyclicalLearningRate`) stops the load of even a plain model. `load_tfa_model` reads
the file with h5py (its `model_config` and `training_config` JSON attributes and its weight
groups, the public parts of the HDF5 format), translates every TF-Addons object into the
keras_normkit or Keras 3 object that computes the same function (argument by argument,
weights mapped), writes the translated model to a temporary `.h5` and loads that with the
public `keras.models.load_model`; it then compiles the model from the translated training
config and restores the optimizer's step count and moments. Nothing here needs TensorFlow:
it runs on every backend. `docs/migration.md` lists each translation and every behaviour that
differs, measured against TF-Addons 0.23.

A TF-Addons object with no equivalent raises a `ValueError` naming it (or pass your own Keras 3
object for it in `custom_objects`). A SavedModel written by tf.keras 2 is not read here: it
loads for inference as `keras.layers.TFSMLayer(path, call_endpoint="serving_default")`
(TensorFlow backend).
"""

import base64
import copy
import dis
import inspect
import json
import marshal
import math
import numbers
import os
import tempfile
import types
import warnings

import keras
import numpy as np

from keras_normkit._validation import check_bool

__all__ = ["load_tfa_model", "tfa_gelu", "tfa_sparsemax"]

_ADDONS = "Addons>"

# TF-Addons activations (as layer activations: their default arguments) -> Keras 3's, which
# compute the same function (docs/migration.md has the measured differences).
_ACTIVATIONS = {
    "Addons>mish": "mish",
    "Addons>hardshrink": "hard_shrink",  # lower=-0.5, upper=0.5 == threshold=0.5
    "Addons>softshrink": "soft_shrink",
    "Addons>tanhshrink": "tanh_shrink",
    "Addons>sparsemax": "keras_normkit>tfa_sparsemax",  # Keras 3's differs (see below)
    "Addons>gelu": "keras_normkit>tfa_gelu",  # approximate=True, TF-Addons' default
}

_SCHEDULES = (
    "Addons>CyclicalLearningRate",
    "Addons>TriangularCyclicalLearningRate",
    "Addons>Triangular2CyclicalLearningRate",
    "Addons>ExponentialCyclicalLearningRate",
)

_WRAPPABLE = {"Dense", "Conv1D", "Conv2D", "Conv3D"}

# The slot variables of tf.keras 2's optimizers, named `{optimizer}/{slot}/{variable}:0`
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


@keras.saving.register_keras_serializable(package="keras_normkit")
def tfa_gelu(x):
    """GELU with the tanh approximation, TF-Addons' `tfa.activations.gelu` default.

    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`, i.e.
    `keras.activations.gelu(x, approximate=True)` (Keras's own default is the exact erf form,
    `approximate=False`). `load_tfa_model` puts it where a file has `Addons>gelu`.

    Args:
        x: Input tensor.

    Returns:
        A tensor of the same shape and dtype as `x`.

    Example:

    >>> import numpy as np, keras
    >>> from keras_normkit.migration import tfa_gelu
    >>> y = tfa_gelu(np.array([-1.0, 0.0, 1.0], "float32"))
    >>> print(np.round(keras.ops.convert_to_numpy(y), 6))
    [-0.158808  0.        0.841192]
    """
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="keras_normkit")
def tfa_sparsemax(x):
    """Sparsemax over the last axis (Martins & Astudillo, 2016), as `tfa.activations.sparsemax`.

    `sparsemax(z) = max(z - tau(z), 0)`, where, with `z` sorted in decreasing order
    (`z_(1) >= z_(2) >= ...`), `k(z)` is the largest `k` with `1 + k z_(k) > sum_{j<=k} z_(j)`
    and `tau(z) = (sum_{j<=k(z)} z_(j) - 1) / k(z)`: the Euclidean projection of `z` onto
    the probability simplex (the outputs sum to 1). A row with an infinite or NaN entry
    gives NaN, as in TF-Addons. `load_tfa_model` puts it where a file has
    `Addons>sparsemax`. Keras's `keras.activations.sparsemax` (Keras 3.15) is not used: its
    threshold sums the cumulative sums over the support instead of taking the last one, so
    its outputs need not sum to 1 (docs/migration.md has the measured difference).

    Args:
        x: Input tensor; sparsemax is taken over its last axis.

    Returns:
        A tensor of the same shape and dtype as `x`, each row on the simplex.

    Example:

    >>> import numpy as np, keras
    >>> from keras_normkit.migration import tfa_sparsemax
    >>> y = tfa_sparsemax(np.array([[1.0, 0.5, -1.0], [0.0, 0.0, 0.0]], "float32"))
    >>> print(np.round(keras.ops.convert_to_numpy(y), 4))
    [[0.75   0.25   0.    ]
     [0.3333 0.3333 0.3333]]

    Reference: Martins & Astudillo, "From Softmax to Sparsemax: A Sparse Model of Attention
    and Multi-Label Classification", ICML 2016, arXiv:1602.02068.
    """
    x = keras.ops.convert_to_tensor(x)
    n = x.shape[-1]
    z_sorted = keras.ops.flip(keras.ops.sort(x, axis=-1), axis=-1)
    cumulative = keras.ops.cumsum(z_sorted, axis=-1)
    k = keras.ops.arange(1, n + 1, dtype=x.dtype)
    support = keras.ops.cast(1.0 + k * z_sorted > cumulative, x.dtype)
    k_z = keras.ops.sum(support, axis=-1, keepdims=True)
    last = keras.ops.cast(keras.ops.maximum(k_z, 1.0) - 1.0, "int32")
    tau = (keras.ops.take_along_axis(cumulative, last, axis=-1) - 1.0) / k_z
    out = keras.ops.maximum(x - tau, 0.0)
    # No support (an infinite entry) or a NaN: NaN, as TF-Addons returns.
    invalid = keras.ops.logical_or(k_z == 0, keras.ops.isnan(cumulative[..., -1:]))
    return keras.ops.where(invalid, keras.ops.full_like(out, float("nan")), out)


class _Translation:
    """What the translation of one file found and needs later.

    `unsupported`: `(Addons name, where)` of every object with no equivalent; `notes`: what
    the user is told in one warning; `weight_names`: the translated weight names of each
    top-level layer group, in the order the layer's `trainable_weights +
    non_trainable_weights` list them (what Keras's `.h5` loader assigns); `frozen`: the
    names of the shifts added to TF-Addons' shift-free norms (kept at zero, not trained);
    `pending_init`: per WeightNormalization saved before its data-dependent initialization
    ran, the weights of TF-Addons' clone that the initialization reads.
    """

    def __init__(self, custom_objects):
        self.custom_objects = dict(custom_objects or {})
        self.unsupported = []
        self.notes = []
        self.weight_names = {}
        self.frozen = []
        self.pending_init = {}

    def unsupported_error(self, path):
        names = ", ".join(f"'{name}' ({where})" for name, where in self.unsupported)
        return ValueError(
            f"{path} uses TensorFlow Addons objects that keras_normkit cannot translate: "
            f"{names}. keras_normkit translates Addons>WeightNormalization (around Dense and "
            "Conv1D/2D/3D), Addons>LayerNormLSTMCell, Addons>LayerNormSimpleRNNCell, the "
            "Addons>*CyclicalLearningRate schedules and the activations "
            f"{', '.join(sorted(_ACTIVATIONS))}. Pass a Keras 3 replacement as "
            "`custom_objects={'Addons>Name': object}` to load the file anyway."
        )


# --------------------------------------------------------------------------- configs


def _addons_name(obj):
    """The `Addons>...` registered name of a serialized object (a dict), else `None`."""
    if obj.get("class_name") == "function":
        config = obj.get("config")
        return config if isinstance(config, str) and config.startswith(_ADDONS) else None
    for key in ("registered_name", "class_name"):
        value = obj.get(key)
        if isinstance(value, str) and value.startswith(_ADDONS):
            return value
    module = obj.get("module")
    if isinstance(module, str) and module.startswith("tensorflow_addons"):
        return _ADDONS + str(obj.get("class_name"))
    return None


def _serialized(class_name, config):
    return {"class_name": class_name, "config": config, "registered_name": class_name}


def _where(config):
    return f"in layer '{config.get('name')}'" if isinstance(config, dict) else "in the model"


def _translate(obj, state, where="in the model"):
    """A copy of the config tree `obj` with every TF-Addons object translated."""
    if isinstance(obj, list):
        return [_translate(item, state, where) for item in obj]
    if isinstance(obj, str):
        if obj.startswith(_ADDONS):  # an activation serialized as its bare name
            if obj in state.custom_objects:
                return obj
            return _translate_function(obj, state, where)
        return obj
    if not isinstance(obj, dict):
        return obj
    name = _addons_name(obj)
    if name is None:
        inner = obj.get("config")
        if isinstance(inner, dict) and obj.get("class_name") in ("Functional", "Model"):
            # tf.keras 2 lists a single input (output) in a list; Keras 3 would then expect
            # a list where tf.keras 2 took the tensor itself.
            inner = dict(inner)
            for key in ("input_layers", "output_layers"):
                value = inner.get(key)
                if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
                    inner[key] = value[0]
            obj = {**obj, "config": inner}
        if isinstance(inner, dict) and "name" in inner:
            where = _where(inner)
            # tf.keras 2's RNN layers have `time_major` (Keras 3's do not).
            if "time_major" in inner:
                if inner["time_major"]:
                    state.unsupported.append(("time_major=True", where))
                inner = {k: v for k, v in inner.items() if k != "time_major"}
                obj = {**obj, "config": inner}
        return {key: _translate(value, state, where) for key, value in obj.items()}
    if obj.get("class_name") == "function":
        if name in state.custom_objects:
            return obj  # resolved by keras.models.load_model's custom_objects
        return _translate_function(name, state, where)
    if name in state.custom_objects:
        translated = _serialized(name, copy.deepcopy(obj.get("config")))
    else:
        translator = _LAYER_TRANSLATORS.get(name)
        if translator is None:
            inner = obj.get("config")
            state.unsupported.append((name, _where(inner) if isinstance(inner, dict) else where))
            return obj
        translated = translator(copy.deepcopy(obj["config"]), state)
    # A functional model's layer entry also has its `name` and `inbound_nodes`.
    serialization = ("class_name", "config", "registered_name", "module")
    extra = {key: copy.deepcopy(value) for key, value in obj.items() if key not in serialization}
    return {**translated, **extra}


def _translate_function(name, state, where):
    target = _ACTIVATIONS.get(name)
    if target is None:
        state.unsupported.append((name, where))
        return name
    if target.startswith("keras_normkit>"):
        return {"module": "builtins", "class_name": "function", "config": target}
    return target


def _weight_normalization(config, state):
    layer = _translate(config["layer"], state, _where(config))
    kind = layer.get("class_name") if isinstance(layer, dict) else None
    if kind not in _WRAPPABLE:
        state.unsupported.append(
            (
                f"Addons>WeightNormalization around {kind}",
                f"in layer '{config.get('name')}': keras_normkit's WeightNormalization "
                "computes TF-Addons' function around Dense and Conv1D/2D/3D only (TF-Addons "
                "normalizes a transposed convolution per input channel and an RNN's "
                "recurrent kernel)",
            )
        )
    out = {key: config[key] for key in ("name", "trainable", "dtype") if key in config}
    out.update(layer=layer, data_init=bool(config.get("data_init", True)))
    return _serialized("keras_normkit>WeightNormalization", out)


def _cell_common(config, state):
    for key in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
        if key in config:
            config[key] = _translate(config[key], state)
    for key in ("activation", "recurrent_activation"):
        if key in config:
            config[key] = _translate(config[key], state, _where(config))
    return config


def _layer_norm_lstm_cell(config, state):
    config = _cell_common(config, state)
    config.pop("implementation", None)  # Keras's LSTMCell kernel choice, same function
    # TF-Addons carries the normalized cell state LN_c(c_t) to the next step.
    config["carry_normalized_state"] = True
    return _serialized("keras_normkit>LayerNormLSTMCell", config)


def _layer_norm_simple_rnn_cell(config, state):
    config = _cell_common(config, state)
    config["norm_epsilon"] = config.pop("layernorm_epsilon", 1e-5)
    config["norm_gamma_initializer"] = config.pop("gamma_initializer", "ones")
    config["norm_beta_initializer"] = "zeros"  # TF-Addons' LN has no shift (beta = 0)
    for key in ("gamma_regularizer", "gamma_constraint"):
        value = config.pop(key, None)
        if value is not None:
            state.notes.append(
                f"Addons>LayerNormSimpleRNNCell '{config.get('name')}': `{key}` is not "
                f"translated (keras_normkit's cell has no such argument; it only matters "
                f"for training): {value}"
            )
    return _serialized("keras_normkit>LayerNormSimpleRNNCell", config)


_LAYER_TRANSLATORS = {
    "Addons>WeightNormalization": _weight_normalization,
    "Addons>LayerNormLSTMCell": _layer_norm_lstm_cell,
    "Addons>LayerNormSimpleRNNCell": _layer_norm_simple_rnn_cell,
}


# --------------------------------------------------------------------------- weights


def _add_missing_shifts(names, values, state):
    """TF-Addons' LayerNormSimpleRNNCell normalizes without a shift: it stores `gamma`
    beside the cell's `kernel` and `recurrent_kernel` (a LayerNormLSTMCell's norms are in
    sub-scopes, with their `beta`). keras_normkit's cell has a `beta` after `gamma`: zeros."""
    present = set(names)
    out_names, out_values = [], []
    for name, value in zip(names, values, strict=True):
        out_names.append(name)
        out_values.append(value)
        if name.endswith("/gamma:0"):
            scope = name[: -len("gamma:0")]
            if scope + "recurrent_kernel:0" in present and scope + "beta:0" not in present:
                out_names.append(scope + "beta:0")
                out_values.append(np.zeros_like(value))
                state.frozen.append(scope + "beta:0")
    return out_names, out_values


def _translate_layer_weights(names, values, state, layer_name):
    """The (names, values) of one top-level layer group, in keras_normkit's weight order.

    tf.keras 2 stores a layer's weights as its trainable then its non-trainable variables,
    each named by its scope. TF-Addons' WeightNormalization stores `g`, the wrapped layer's
    `kernel` (v) and `bias`, its boolean `initialized`, and with `data_init=True` the
    `data_dep_init/kernel` and `data_dep_init/bias` of its non-trainable clone (which its
    data-dependent initialization runs, and nothing else).
    """
    names, values = _add_missing_shifts(list(names), list(values), state)
    done = set()
    while True:
        flags = [
            i
            for i, n in enumerate(names)
            if n.endswith("/initialized:0") and n[: -len("initialized:0")] not in done
        ]
        if not flags:
            break
        flag = flags[0]
        prefix = names[flag][: -len("initialized:0")]
        done.add(prefix)
        block = {n[len(prefix) :]: i for i, n in enumerate(names) if n.startswith(prefix)}
        if "g:0" not in block or "kernel:0" not in block:
            continue  # not a WeightNormalization
        data_init = "data_dep_init/kernel:0" in block
        g = values[block["g:0"]]
        kernel = values[block["kernel:0"]]
        bias = values[block["bias:0"]] if "bias:0" in block else None
        initialized = bool(np.asarray(values[flag]))
        if not initialized and not data_init:
            # TF-Addons' first call sets g = ||v|| (per output unit): done here.
            g = np.sqrt(np.sum(np.square(kernel.reshape(-1, kernel.shape[-1])), axis=0))
            g = g.astype(kernel.dtype)
        if not initialized and data_init:
            clone_bias = values[block["data_dep_init/bias:0"]] if bias is not None else None
            wrapper = prefix.rstrip("/").split("/")[-1]
            state.pending_init[wrapper] = {
                "kernel": values[block["data_dep_init/kernel:0"]],
                "bias": clone_bias,
                "top_level": prefix == layer_name + "/",
            }
        new = [(prefix + "g:0", g), (prefix + "kernel:0", kernel)]
        if bias is not None:
            new.append((prefix + "bias:0", bias))
        if data_init:
            zeros = np.zeros_like(g)
            new.append((prefix + "initialized:0", np.float32(initialized)))
            new.append((prefix + "g_offset:0", zeros))
            if bias is not None:
                new.append((prefix + "bias_offset:0", zeros))
        first = min(block.values())
        keep = [i for i in range(len(names)) if i not in block.values()]
        before = [i for i in keep if i < first]
        after = [i for i in keep if i > first]
        names = [names[i] for i in before] + [n for n, _ in new] + [names[i] for i in after]
        values = [values[i] for i in before] + [v for _, v in new] + [values[i] for i in after]
    return names, values


def _write_translated(source, target, model_config, state):
    import h5py

    group = source["model_weights"]
    with h5py.File(target, "w") as out:
        for key, value in source.attrs.items():
            if key not in ("model_config", "training_config"):
                out.attrs[key] = value
        out.attrs["model_config"] = json.dumps(model_config)
        weights = out.create_group("model_weights")
        for key, value in group.attrs.items():
            weights.attrs[key] = value
        for layer_name in _strings(group.attrs["layer_names"]):
            layer_group = group[layer_name]
            names = _strings(layer_group.attrs.get("weight_names", []))
            values = [np.asarray(layer_group[name]) for name in names]
            names, values = _translate_layer_weights(names, values, state, layer_name)
            state.weight_names[layer_name] = names
            new_group = weights.create_group(layer_name)
            # Dataset paths must be unique: stored under an index, named in the list.
            keys = [f"{i}:{n.replace('/', '_')}" for i, n in enumerate(names)]
            for key, value in zip(keys, values, strict=True):
                new_group.create_dataset(key, data=value)
            new_group.attrs["weight_names"] = [key.encode() for key in keys]


def _strings(values):
    return [v.decode("utf8") if isinstance(v, bytes) else str(v) for v in values]


def _variables_by_name(model, state):
    """`{tf.keras 2 weight name: Keras 3 variable}` over every top-level layer."""
    variables = {}
    for layer_name, names in state.weight_names.items():
        if not names:
            continue
        layer = model.get_layer(layer_name)
        weights = layer.trainable_weights + layer.non_trainable_weights
        if len(weights) == len(names):
            variables.update(zip(names, weights, strict=True))
    return variables


# --------------------------------------------------------------------------- data init


def _tfa_data_init(model, state, batch):
    """Runs TF-Addons' data-dependent initialization of the WeightNormalization layers
    saved before it ran, on `batch`, in the order of the forward pass (as TF-Addons' first
    call does): with `x_init` the output of its clone (the wrapped layer, no activation,
    the clone's kernel and bias), per output unit `m, s2` = mean and variance of `x_init`
    over all other axes, `scale = 1 / sqrt(s2 + 1e-10)`, `g <- g * scale` and
    `bias <- -m * scale`."""
    from keras_normkit.layers import WeightNormalization

    for layer in model.layers:
        pending = state.pending_init.get(layer.name)
        if not isinstance(layer, WeightNormalization) or not pending or not pending["top_level"]:
            continue
        del state.pending_init[layer.name]
        wrapped = layer.layer
        if getattr(wrapped, "data_format", "channels_last") == "channels_first":
            raise ValueError(
                f"`data_init_batch`: WeightNormalization '{layer.name}' wraps a "
                "channels_first convolution, whose TF-Addons initialization takes the "
                "moments over the wrong axes (it fails in TF-Addons): not reproduced."
            )
        source = model.inputs[0] if len(model.inputs) == 1 else model.inputs
        inputs = keras.Model(source, layer.input)(batch, training=False)
        inputs = keras.ops.convert_to_numpy(inputs)
        config = wrapped.get_config()
        config["activation"] = None
        clone = type(wrapped).from_config(config)
        clone.build(inputs.shape)
        clone_weights = [pending["kernel"]]
        if pending["bias"] is not None:
            clone_weights.append(pending["bias"])
        clone.set_weights(clone_weights)
        x_init = keras.ops.convert_to_numpy(clone(inputs)).astype("float32")
        axes = tuple(range(x_init.ndim - 1))
        mean = x_init.mean(axis=axes)
        variance = np.square(x_init - mean).mean(axis=axes)
        scale = (1.0 / np.sqrt(variance + np.float32(1e-10))).astype("float32")
        g = keras.ops.convert_to_numpy(keras.ops.copy(layer.g))
        layer.g.assign(g * scale)
        if pending["bias"] is not None:
            wrapped.bias.assign(-mean * scale)
        layer.initialized.assign(1.0)
    if state.pending_init:
        names = ", ".join(sorted(state.pending_init))
        raise ValueError(
            "`data_init_batch`: TF-Addons' data-dependent initialization is reproduced for "
            "WeightNormalization layers of the model itself (not nested in another layer "
            f"or model); not for {names}."
        )


# --------------------------------------------------------------------------- compile


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
    if name is not None:
        if name in state.custom_objects:
            return state.custom_objects[name]
        state.notes.append(f"the {kind} {name} has no equivalent")
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
        slot = None
        if found is not None:
            variable, slot_name = found
            slot = by_name.get(f"{variable.path.replace('/', '_')}_{slot_name}")
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


# --------------------------------------------------------------------------- the loader


def _check_path(path):
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "`path` must be the path (a str or os.PathLike) of a `.h5` file written by "
            f"tf.keras 2. Received: path={path!r} of type {type(path).__name__}"
        )
    return os.fspath(path)


def _check_custom_objects(custom_objects):
    if custom_objects is None:
        return {}
    if not isinstance(custom_objects, dict) or not all(
        isinstance(key, str) for key in custom_objects
    ):
        raise TypeError(
            "`custom_objects` must be None or a dict mapping names (str) to objects. "
            f"Received: custom_objects={custom_objects!r} of type "
            f"{type(custom_objects).__name__}"
        )
    return custom_objects


def _read_source(path):
    """The `model_config` and `training_config` (dicts or `None`) and the optimizer's
    weights `{name: array}` of a tf.keras 2 `.h5` model file; a clear error otherwise."""
    import h5py

    if os.path.isdir(path):
        raise ValueError(
            f"{path} is a directory (a SavedModel?): load_tfa_model reads tf.keras 2 `.h5` "
            "files. Load a tf.keras 2 SavedModel for inference with "
            "`keras.layers.TFSMLayer(path, call_endpoint='serving_default')` (TensorFlow "
            "backend)."
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file: {path}")
    if not h5py.is_hdf5(path):
        raise ValueError(
            f"{path} is not an HDF5 file: load_tfa_model reads `.h5` models written by "
            "tf.keras 2 (`model.save('model.h5')`). A Keras 3 `.keras` file loads with "
            "`keras.models.load_model`."
        )
    with h5py.File(path, "r") as source:
        raw = source.attrs.get("model_config")
        if raw is None or "model_weights" not in source:
            raise ValueError(
                f"{path} holds no model (no `model_config` attribute and `model_weights` "
                "group): load_tfa_model reads files written by tf.keras 2's "
                "`model.save('model.h5')`, not weights-only files (`save_weights`) or other "
                "HDF5 files."
            )
        version = source.attrs.get("keras_version", b"")
        version = version.decode("utf8") if isinstance(version, bytes) else str(version)
        if not version.startswith("2."):
            raise ValueError(
                f"{path} was not written by tf.keras 2 (its keras_version is "
                f"{version or 'missing'!r}): load_tfa_model translates the TensorFlow "
                "Addons objects of tf.keras 2 files. A file written by Keras 3 loads with "
                "`keras.models.load_model`."
            )

        def parse(value):
            if value is None:
                return None
            return json.loads(value.decode("utf8") if isinstance(value, bytes) else value)

        optimizer_weights = {}
        if "optimizer_weights" in source:
            group = source["optimizer_weights"]
            for name in _strings(group.attrs.get("weight_names", [])):
                optimizer_weights[name] = np.asarray(group[name])
        return parse(raw), parse(source.attrs.get("training_config")), optimizer_weights


def load_tfa_model(path, compile=True, custom_objects=None, data_init_batch=None):
    """Loads a tf.keras 2 `.h5` model that uses TensorFlow Addons objects into Keras 3.

    Every TF-Addons object is replaced by the keras_normkit or Keras 3 object that computes
    the same function, with its arguments translated one by one and its weights mapped
    (docs/migration.md lists each translation, and what differs, measured against
    TF-Addons 0.23):

    - `Addons>WeightNormalization` around `Dense`/`Conv1D`/`Conv2D`/`Conv3D` ->
      `keras_normkit.layers.WeightNormalization` (same `data_init`; `g`, `v` and the bias
      mapped, TF-Addons' `initialized` flag kept);
    - `Addons>LayerNormLSTMCell` -> `keras_normkit.layers.LayerNormLSTMCell(...,
      carry_normalized_state=True)`;
    - `Addons>LayerNormSimpleRNNCell` -> `keras_normkit.layers.LayerNormSimpleRNNCell`
      (`layernorm_epsilon` -> `norm_epsilon`, `gamma_initializer` ->
      `norm_gamma_initializer`; the norm's shift `beta`, which TF-Addons' cell lacks, is
      zero and not trainable);
    - the activations `Addons>mish`, `hardshrink`, `softshrink`, `tanhshrink` ->
      Keras's `mish`, `hard_shrink`, `soft_shrink`, `tanh_shrink`; `Addons>sparsemax` ->
      `tfa_sparsemax`; `Addons>gelu` -> `tfa_gelu` (the tanh approximation);
    - in the training config, `Addons>TriangularCyclicalLearningRate`,
      `Triangular2CyclicalLearningRate` and `ExponentialCyclicalLearningRate`, and
      `CyclicalLearningRate` with `scale_fn=lambda x: c` ->
      `keras_normkit.schedules.CyclicalLearningRate` (`mode="triangular"`,
      `"triangular2"`, `"exp_range"`).

    Any other `Addons>` object in the model raises a `ValueError` naming it, unless
    `custom_objects` maps its name to a Keras 3 replacement. With `compile=True` the model
    is compiled from the file's training config with what can be translated (the optimizer
    and its settings, its learning-rate schedule, Keras's losses and metrics) and the
    optimizer's step count and moments are restored, so training continues as in
    tf.keras 2; whatever cannot be translated (a TF-Addons loss, metric or optimizer, a
    `scale_fn` that is not a constant) is named in one `UserWarning` and never stops the
    load. With `compile=False` the training config is not read.

    A `WeightNormalization` with `data_init=True` saved before its first call is not
    initialized yet: TF-Addons initializes it on the first batch it is called on (in
    `predict` too); keras_normkit's initializes on its first training batch, with the
    paper's formula. Pass that first batch as `data_init_batch` to run TF-Addons'
    initialization (its formula) at load time instead.

    A SavedModel directory is not read here: load it for inference with
    `keras.layers.TFSMLayer(path, call_endpoint="serving_default")` (TensorFlow backend).

    Args:
        path: Path of a `.h5` file written by tf.keras 2 (`model.save("model.h5")`).
        compile: Boolean, whether to compile the model from the file's training config.
            Default: `True`.
        custom_objects: Optional dict mapping names to objects: `Addons>` names to a Keras 3
            replacement (a layer class, a function, a `LearningRateSchedule` instance, a
            loss or metric), other names as in `keras.models.load_model`.
        data_init_batch: Optional input batch (what `model.predict` takes) on which to run
            TF-Addons' data-dependent initialization of the `WeightNormalization` layers
            saved before it ran, as TF-Addons' first call would have. Default: `None`
            (they initialize on their first training batch, keras_normkit's way).

    Returns:
        A Keras 3 model.

    Raises:
        TypeError: if an argument has the wrong type.
        FileNotFoundError: if `path` does not exist.
        ValueError: if `path` is not a tf.keras 2 `.h5` model file, or if it uses a
            TF-Addons object with no equivalent (all of them are named).

    Example:

    >>> import pathlib, keras_normkit
    >>> from keras_normkit.migration import load_tfa_model
    >>> root = pathlib.Path(keras_normkit.__file__).parents[1]
    >>> path = root / "tests" / "migration" / "fixtures" / "layer_norm_lstm.h5"
    >>> model = load_tfa_model(path, compile=False)
    >>> cell = model.layers[0].cell
    >>> type(cell).__name__, cell.carry_normalized_state, cell.norm_epsilon
    ('LayerNormLSTMCell', True, 0.001)
    """
    path = _check_path(path)
    compile = check_bool("compile", compile)
    custom_objects = _check_custom_objects(custom_objects)
    model_config, training_config, optimizer_weights = _read_source(path)
    state = _Translation(custom_objects)
    model_config = _translate(model_config, state)
    if state.unsupported:
        raise state.unsupported_error(path)

    import h5py

    handle, temporary = tempfile.mkstemp(suffix=".h5")
    os.close(handle)
    try:
        with h5py.File(path, "r") as source:
            _write_translated(source, temporary, model_config, state)
        model = keras.models.load_model(
            temporary, custom_objects=state.custom_objects, compile=False
        )
    finally:
        os.remove(temporary)
    variables = _variables_by_name(model, state)
    for name in state.frozen:  # TF-Addons' norm has no shift: it stays zero
        if name in variables:
            variables[name].trainable = False
    if state.pending_init:
        if data_init_batch is None:
            names = ", ".join(f"'{name}'" for name in sorted(state.pending_init))
            state.notes.append(
                f"the Addons>WeightNormalization {names} were saved before their "
                "data-dependent initialization ran: TF-Addons would initialize them on the "
                "first batch they see, even in predict(); keras_normkit's "
                "WeightNormalization initializes on its first training batch, with the "
                "paper's formula. Pass that batch as `data_init_batch` to run TF-Addons' "
                "initialization instead"
            )
        else:
            _tfa_data_init(model, state, data_init_batch)
    elif data_init_batch is not None:
        state.notes.append(
            "`data_init_batch` is not used: no Addons>WeightNormalization of the file awaits "
            "its data-dependent initialization"
        )
    if compile and training_config:
        _compile(model, training_config, optimizer_weights, variables, state)
    if state.notes:
        warnings.warn(
            f"load_tfa_model({os.path.basename(path)!r}): " + "; ".join(state.notes) + ".",
            UserWarning,
            stacklevel=2,
        )
    return model
