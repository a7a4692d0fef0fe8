"""Loading tf.keras 2 models that use TensorFlow Addons (TF-Addons) objects into Keras 3.

TF-Addons reached end of life, and Keras 3 cannot read its objects: `keras.models.load_model`
on a `.h5` file written by tf.keras 2 with `Addons>WeightNormalization`,
`Addons>LayerNormLSTMCell` or `Addons>LayerNormSimpleRNNCell` fails ("Unknown layer",
"Could not locate class"), and the training config of a tf.keras 2 file (its metrics, an
`Addons>CyclicalLearningRate`) stops the load of even a plain model. `load_tfa_model` reads
the file with h5py (its `model_config` JSON attribute and its weight groups, both public
parts of the HDF5 format), translates every TF-Addons object into the keras_normkit or Keras 3
object that computes the same function (argument by argument, weights mapped), writes the
translated model to a temporary `.h5` and loads that with the public `keras.models.load_model`.
`docs/migration.md` lists each translation and every behaviour that differs, measured against
TF-Addons 0.23.

A TF-Addons object with no equivalent raises a `ValueError` naming it (or pass your own Keras 3
object for it in `custom_objects`). A SavedModel written by tf.keras 2 is not read here: it
loads for inference as `keras.layers.TFSMLayer(path, call_endpoint="serving_default")`
(TensorFlow backend).
"""

import copy
import inspect
import json
import os
import tempfile
import warnings

import keras
import numpy as np

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

_WRAPPABLE = {"Dense", "Conv1D", "Conv2D", "Conv3D"}


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
    """
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="keras_normkit")
def tfa_sparsemax(x):
    """Sparsemax over the last axis (Martins & Astudillo, 2016), as `tfa.activations.sparsemax`.

    `sparsemax(z) = max(z - tau(z), 0)`, where, with `z` sorted in decreasing order
    (`z_(1) >= z_(2) >= ...`), `k(z)` is the largest `k` with `1 + k z_(k) > sum_{j<=k} z_(j)`
    and `tau(z) = (sum_{j<=k(z)} z_(j) - 1) / k(z)`: the Euclidean projection of `z` onto
    the probability simplex (the outputs sum to 1). `load_tfa_model` puts it where a file has
    `Addons>sparsemax`. Keras's `keras.activations.sparsemax` (Keras 3.15) is not used: its
    threshold sums the cumulative sums over the support instead of taking the last one, so
    its outputs need not sum to 1 (measured 0.20 away from TF-Addons' on the fixture).

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
    """
    x = keras.ops.convert_to_tensor(x)
    n = x.shape[-1]
    z_sorted = keras.ops.flip(keras.ops.sort(x, axis=-1), axis=-1)
    cumulative = keras.ops.cumsum(z_sorted, axis=-1)
    k = keras.ops.arange(1, n + 1, dtype=x.dtype)
    support = keras.ops.cast(1.0 + k * z_sorted > cumulative, x.dtype)
    k_z = keras.ops.sum(support, axis=-1, keepdims=True)
    last = keras.ops.cast(k_z - 1.0, "int32")
    tau = (keras.ops.take_along_axis(cumulative, last, axis=-1) - 1.0) / k_z
    return keras.ops.maximum(x - tau, 0.0)


class _Translation:
    """What one file's translation found: unsupported objects, notes for the user, and the
    WeightNormalization wrappers saved before their first call."""

    def __init__(self, custom_objects):
        self.custom_objects = dict(custom_objects or {})
        self.unsupported = []  # (Addons name, where)
        self.notes = []

    def unsupported_error(self, path):
        names = ", ".join(f"'{name}' ({where})" for name, where in self.unsupported)
        return ValueError(
            f"{path} uses TensorFlow Addons objects that keras_normkit cannot translate: "
            f"{names}. keras_normkit translates Addons>WeightNormalization (around Dense and "
            "ConvND), Addons>LayerNormLSTMCell, Addons>LayerNormSimpleRNNCell, the "
            "Addons>*CyclicalLearningRate schedules and the activations "
            f"{', '.join(sorted(_ACTIVATIONS))}. Pass a Keras 3 replacement as "
            "`custom_objects={'Addons>Name': object}` to load the file anyway."
        )


# --------------------------------------------------------------------------- configs


def _addons_name(obj):
    """The `Addons>...` registered name of a serialized object (a dict), else `None`."""
    for key in ("registered_name", "class_name"):
        value = obj.get(key)
        if isinstance(value, str) and value.startswith(_ADDONS):
            return value
    module = obj.get("module")
    if isinstance(module, str) and module.startswith("tensorflow_addons"):
        return _ADDONS + str(obj.get("class_name"))
    if obj.get("class_name") == "function" and isinstance(obj.get("config"), str):
        if obj["config"].startswith(_ADDONS):
            return obj["config"]
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
            return _translate_function({"config": obj}, obj, state, where)["config"]
        return obj
    if not isinstance(obj, dict):
        return obj
    name = _addons_name(obj)
    if name is None:
        inner = obj.get("config")
        if isinstance(inner, dict) and "name" in inner:
            where = _where(inner)
            # tf.keras 2's RNN layers have `time_major` (Keras 3's do not).
            if "time_major" in inner:
                if inner["time_major"]:
                    state.unsupported.append(("time_major=True", where))
                inner = {k: v for k, v in inner.items() if k != "time_major"}
                obj = {**obj, "config": inner}
        return {key: _translate(value, state, where) for key, value in obj.items()}
    if name in state.custom_objects:
        return _serialized(name, copy.deepcopy(obj.get("config")))
    if obj.get("class_name") == "function":
        return _translate_function(obj, name, state, where)
    translator = _LAYER_TRANSLATORS.get(name)
    if translator is None:
        inner = obj.get("config")
        state.unsupported.append((name, _where(inner) if isinstance(inner, dict) else where))
        return obj
    return translator(copy.deepcopy(obj["config"]), state)


def _translate_function(obj, name, state, where):
    target = _ACTIVATIONS.get(name)
    if target is None:
        state.unsupported.append((name, where))
        return obj
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
                "wraps Dense and Conv1D/2D/3D (TF-Addons normalizes a transposed "
                "convolution per input channel and an RNN's recurrent kernel)",
            )
        )
    out = {key: config[key] for key in ("name", "trainable", "dtype") if key in config}
    out.update(layer=layer, data_init=bool(config.get("data_init", True)))
    return _serialized("keras_normkit>WeightNormalization", out)


def _cell_common(config, state):
    for key in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
        if key in config:
            config[key] = _translate(config[key], state)
    if "activation" in config:
        config["activation"] = _translate(config["activation"], state)
    return config


def _layer_norm_lstm_cell(config, state):
    config = _cell_common(config, state)
    config.pop("implementation", None)  # Keras's LSTMCell kernel choice, same function
    if "recurrent_activation" in config:
        config["recurrent_activation"] = _translate(config["recurrent_activation"], state)
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
                f"Addons>LayerNormSimpleRNNCell: `{key}` is not translated (keras_normkit's "
                f"cell has no such argument; it only matters for training): {value}"
            )
    return _serialized("keras_normkit>LayerNormSimpleRNNCell", config)


_LAYER_TRANSLATORS = {
    "Addons>WeightNormalization": _weight_normalization,
    "Addons>LayerNormLSTMCell": _layer_norm_lstm_cell,
    "Addons>LayerNormSimpleRNNCell": _layer_norm_simple_rnn_cell,
}


# --------------------------------------------------------------------------- weights


def _translate_layer_weights(names, values, state, layer_name):
    """The (names, values) of one top-level layer group, in keras_normkit's weight order.

    tf.keras 2 stores a layer's weights as its trainable then its non-trainable variables,
    each named by its scope. TF-Addons' WeightNormalization stores `g`, the wrapped layer's
    `kernel` (v) and `bias`, its boolean `initialized`, and with `data_init=True` the
    `data_dep_init/kernel` and `data_dep_init/bias` of its non-trainable clone (unused
    once initialized); TF-Addons' LayerNormSimpleRNNCell stores `gamma` but no `beta`.
    """
    names, values = list(names), list(values)
    # LayerNormSimpleRNNCell: TF-Addons drops the cell's name, so its scope is always
    # "layer_norm_simple_rnn_cell[_N]"; our cell has a `beta` after `gamma` (zeros).
    out_names, out_values = [], []
    for name, value in zip(names, values, strict=True):
        out_names.append(name)
        out_values.append(value)
        scope = name.rsplit("/", 2)
        if len(scope) == 3 and scope[1].startswith("layer_norm_simple_rnn_cell"):
            if scope[2] == "gamma:0":
                out_names.append(name[: -len("gamma:0")] + "beta:0")
                out_values.append(np.zeros_like(value))
    names, values = out_names, out_values

    # WeightNormalization blocks, one per `initialized` flag.
    while True:
        flags = [i for i, n in enumerate(names) if n.endswith("initialized:0")]
        flags = [i for i in flags if not names[i].endswith("/_migrated_initialized:0")]
        if not flags:
            break
        flag = flags[0]
        prefix = names[flag][: -len("initialized:0")]
        block = {n[len(prefix) :]: i for i, n in enumerate(names) if n.startswith(prefix)}
        data_init = "data_dep_init/kernel:0" in block
        g = values[block["g:0"]]
        kernel_key = next(k for k in block if k not in ("g:0", "initialized:0", "bias:0"))
        kernel = values[block[kernel_key]]
        bias = values[block["bias:0"]] if "bias:0" in block else None
        initialized = bool(np.asarray(values[flag]))
        if not initialized and not data_init:
            # TF-Addons' first call sets g = ||v|| (per output unit): done here.
            g = np.sqrt(np.sum(np.square(kernel.reshape(-1, kernel.shape[-1])), axis=0))
        if not initialized and data_init:
            state.notes.append(
                f"Addons>WeightNormalization '{layer_name}' was saved before its data-dependent "
                "initialization ran: TF-Addons would initialize it on the first batch it sees, "
                "even in predict(); keras_normkit's WeightNormalization initializes on its "
                "first training batch, with the paper's formula (docs/migration.md)"
            )
        new = [(prefix + "g:0", g), (prefix + "kernel:0", kernel)]
        if bias is not None:
            new.append((prefix + "bias:0", bias))
        if data_init:
            zeros = np.zeros_like(g)
            new.append((prefix + "_migrated_initialized:0", np.float32(initialized)))
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
            new_group = weights.create_group(layer_name)
            for index, (name, value) in enumerate(zip(names, values, strict=True)):
                new_group.create_dataset(f"{index}:{name.replace('/', '_')}", data=value)
            # Dataset paths must be unique: store under an index, name them in the list.
            new_group.attrs["weight_names"] = [
                f"{i}:{n.replace('/', '_')}".encode() for i, n in enumerate(names)
            ]


def _strings(values):
    return [v.decode("utf8") if isinstance(v, bytes) else str(v) for v in values]


# --------------------------------------------------------------------------- compile


def _learning_rate(value, state):
    """A Keras 3 learning rate (float or schedule) for a tf.keras 2 one, or `None`."""
    if not isinstance(value, dict):
        return value
    name = _addons_name(value)
    if name in state.custom_objects:
        replacement = state.custom_objects[name]
        if isinstance(replacement, keras.optimizers.schedules.LearningRateSchedule):
            return replacement
        return replacement.from_config(value["config"])
    config = value.get("config", {})
    if name is None:
        try:
            return keras.optimizers.schedules.deserialize(value)
        except Exception as error:  # noqa: BLE001 - reported, the load goes on
            state.notes.append(f"learning-rate schedule {value.get('class_name')}: {error}")
            return None
    from keras_normkit.schedules import CyclicalLearningRate

    modes = {
        ("Addons>TriangularCyclicalLearningRate", "cycle"): "triangular",
        ("Addons>TriangularCyclicalLearningRate", "iterations"): "triangular",
        ("Addons>Triangular2CyclicalLearningRate", "cycle"): "triangular2",
        ("Addons>ExponentialCyclicalLearningRate", "iterations"): "exp_range",
    }
    mode = modes.get((name, config.get("scale_mode")))
    if name == "Addons>CyclicalLearningRate":
        state.notes.append(
            "the optimizer's learning rate Addons>CyclicalLearningRate has a `scale_fn` "
            "stored as Python bytecode, which is never run: it is not translated, the "
            f"optimizer starts at initial_learning_rate={config.get('initial_learning_rate')}. "
            "Pass the schedule, e.g. custom_objects={'Addons>CyclicalLearningRate': "
            "keras_normkit.schedules.CyclicalLearningRate(initial, maximal, step_size, "
            "mode='triangular')} for scale_fn=lambda x: 1.0"
        )
        return config.get("initial_learning_rate")
    if mode is None:
        state.notes.append(
            f"the optimizer's learning rate {name} (scale_mode={config.get('scale_mode')!r}) "
            "has no keras_normkit equivalent: not translated, the optimizer starts at "
            f"initial_learning_rate={config.get('initial_learning_rate')}"
        )
        return config.get("initial_learning_rate")
    step_size = config["step_size"]
    if float(step_size) != int(step_size):
        state.notes.append(f"{name}: step_size={step_size} rounded to an integer")
    return CyclicalLearningRate(
        config["initial_learning_rate"],
        config["maximal_learning_rate"],
        step_size=int(round(float(step_size))),
        mode=mode,
        gamma=float(config.get("gamma", 1.0)),
    )


def _optimizer(config, state):
    if config is None:
        return None
    class_name = str(config.get("class_name", ""))
    if class_name.startswith("Custom>"):  # tf.keras 2.11+ registers its optimizers so
        class_name = class_name[len("Custom>") :]
    name = _addons_name(config)
    if name is not None and name not in state.custom_objects:
        state.notes.append(f"optimizer {name} is not translated: compiled without optimizer")
        return None
    cls = state.custom_objects.get(name) if name else getattr(keras.optimizers, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)):
        state.notes.append(f"optimizer {class_name} is not a Keras 3 optimizer: not compiled")
        return None
    settings = dict(config.get("config", {}))
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
    dropped = {k: v for k, v in settings.items() if k not in accepted}
    settings = {k: v for k, v in settings.items() if k in accepted}
    for key, value in dropped.items():
        if key in ("jit_compile", "is_legacy_optimizer") or value in (None, 0, 0.0, False):
            continue
        state.notes.append(f"optimizer {class_name}: `{key}={value}` is not translated")
    if "learning_rate" in settings:
        learning_rate = _learning_rate(settings["learning_rate"], state)
        if learning_rate is None:
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
        state.notes.append(f"{kind} {name} has no Keras 3 equivalent: not compiled")
        return None
    getter = keras.losses.get if kind == "loss" else keras.metrics.get
    try:
        if isinstance(value, dict):
            value = copy.deepcopy(value)
            config = value.get("config", {})
            if value.get("class_name") == "MeanMetricWrapper" and kind != "loss":
                fn = config.get("fn")
                try:
                    metric = keras.metrics.get(fn)
                except ValueError:
                    metric = keras.losses.get(fn)
                if isinstance(metric, keras.metrics.Metric):
                    return metric
                return keras.metrics.MeanMetricWrapper(fn=metric, name=config.get("name"))
            if config.get("reduction") == "auto":
                config["reduction"] = "sum_over_batch_size"
            config.pop("fn", None)
        return getter(value)
    except Exception as error:  # noqa: BLE001 - reported, the load goes on
        state.notes.append(f"{kind} {value!r} is not translated: {error}")
        return None


def _compile(model, training_config, iterations, state):
    optimizer = _optimizer(training_config.get("optimizer_config"), state)
    loss = _loss_or_metric(training_config.get("loss"), state, "loss")
    arguments = {"optimizer": optimizer or "rmsprop", "loss": loss}
    if optimizer is None:
        state.notes.append("compiled with Keras's default optimizer, rmsprop")
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
    if iterations and optimizer is not None:
        model.optimizer.iterations.assign(int(iterations))
        state.notes.append(
            f"the optimizer's step count ({int(iterations)}) is restored, not its slot "
            "variables (moments): they restart from zero"
        )


# --------------------------------------------------------------------------- the loader


def load_tfa_model(path, compile=True, custom_objects=None):
    """Loads a tf.keras 2 `.h5` model that uses TensorFlow Addons objects into Keras 3.

    Every TF-Addons object is replaced by the keras_normkit or Keras 3 object that computes
    the same function, with its arguments translated one by one and its weights mapped
    (docs/migration.md lists each translation, and what differs, measured against
    TF-Addons 0.23):

    - `Addons>WeightNormalization` around `Dense`/`Conv1D`/`Conv2D`/`Conv3D` ->
      `keras_normkit.layers.WeightNormalization` (same `data_init`);
    - `Addons>LayerNormLSTMCell` -> `keras_normkit.layers.LayerNormLSTMCell(...,
      carry_normalized_state=True)`;
    - `Addons>LayerNormSimpleRNNCell` -> `keras_normkit.layers.LayerNormSimpleRNNCell`
      (`layernorm_epsilon` -> `norm_epsilon`, `gamma_initializer` ->
      `norm_gamma_initializer`, `beta` = 0);
    - the activations `Addons>mish`, `hardshrink`, `softshrink`, `tanhshrink`,
      `sparsemax` -> Keras's `mish`, `hard_shrink`, `soft_shrink`, `tanh_shrink` and
      our `tfa_sparsemax`; `Addons>gelu` -> `tfa_gelu` (the tanh approximation,
      TF-Addons' default);
    - in the training config, `Addons>TriangularCyclicalLearningRate`,
      `Triangular2CyclicalLearningRate` and `ExponentialCyclicalLearningRate` ->
      `keras_normkit.schedules.CyclicalLearningRate` (`mode="triangular"`,
      `"triangular2"`, `"exp_range"`).

    Any other `Addons>` object raises a `ValueError` naming it, unless `custom_objects`
    maps its name to a Keras 3 replacement. With `compile=True` the model is compiled with
    what can be translated (optimizer and its settings, learning-rate schedule, the step
    count, built-in losses and metrics); whatever cannot (an `Addons>` loss or optimizer,
    a generic `Addons>CyclicalLearningRate` whose `scale_fn` is stored as Python bytecode,
    the optimizer's moments) is named in one `UserWarning`, and never stops the load.

    A SavedModel directory is not read here: load it for inference with
    `keras.layers.TFSMLayer(path, call_endpoint="serving_default")` (TensorFlow backend).

    Args:
        path: Path of a `.h5` file written by tf.keras 2 (`model.save("model.h5")`).
        compile: Boolean, whether to compile the model from the file's training config.
            Default: `True`.
        custom_objects: Optional dict mapping names to objects: `Addons>` names to a Keras 3
            replacement (a layer class, a function, a `LearningRateSchedule` instance, a
            loss or metric), other names as in `keras.models.load_model`.

    Returns:
        A Keras 3 model.

    Raises:
        ValueError: if `path` is not a tf.keras 2 `.h5` model file, or if it uses a
            TF-Addons object with no equivalent (all of them are named).

    Example:

    >>> import pathlib
    >>> from keras_normkit.migration import load_tfa_model
    >>> fixtures = pathlib.Path("tests/migration/fixtures")
    >>> model = load_tfa_model(fixtures / "layer_norm_lstm.h5", compile=False)
    >>> type(model.layers[0].cell).__name__, model.layers[0].cell.carry_normalized_state
    ('LayerNormLSTMCell', True)
    """
    import h5py

    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(
            f"{path} is a directory (a SavedModel?): load_tfa_model reads tf.keras 2 `.h5` "
            "files. Load a tf.keras 2 SavedModel for inference with "
            "`keras.layers.TFSMLayer(path, call_endpoint='serving_default')`."
        )
    if not h5py.is_hdf5(path):
        raise ValueError(
            f"{path} is not an HDF5 file: load_tfa_model reads `.h5` models written by "
            "tf.keras 2. A Keras 3 `.keras` file loads with `keras.models.load_model`."
        )
    state = _Translation(custom_objects)
    with h5py.File(path, "r") as source:
        raw = source.attrs.get("model_config")
        if raw is None or "model_weights" not in source:
            raise ValueError(
                f"{path} holds no model (no `model_config` attribute and `model_weights` "
                "group): load_tfa_model reads files written by tf.keras 2's "
                "`model.save('model.h5')`, not weights-only files (`save_weights`)."
            )
        raw = raw.decode("utf8") if isinstance(raw, bytes) else raw
        model_config = _translate(json.loads(raw), state)
        if state.unsupported:
            raise state.unsupported_error(path)
        training = source.attrs.get("training_config")
        training = training.decode("utf8") if isinstance(training, bytes) else training
        iterations = None
        if "optimizer_weights" in source:
            group = source["optimizer_weights"]
            for name in _strings(group.attrs.get("weight_names", [])):
                if name.split("/")[-1] in ("iteration:0", "iter:0"):
                    iterations = np.asarray(group[name]).item()
        handle, temporary = tempfile.mkstemp(suffix=".h5")
        os.close(handle)
        try:
            _write_translated(source, temporary, model_config, state)
            model = keras.models.load_model(
                temporary, custom_objects=state.custom_objects, compile=False
            )
        finally:
            os.remove(temporary)
    if compile and training:
        _compile(model, json.loads(training), iterations, state)
    if state.notes:
        warnings.warn(
            f"load_tfa_model({os.path.basename(path)!r}): " + "; ".join(state.notes),
            UserWarning,
            stacklevel=2,
        )
    return model
