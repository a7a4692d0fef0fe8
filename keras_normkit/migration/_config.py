"""The translation of a tf.keras 2 model config: every `Addons>` object replaced by its
keras_normkit or Keras 3 equivalent (argument by argument), or recorded as unsupported."""

import copy

import keras

from keras_normkit.migration import _coverage

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


class _Translation:
    """What the translation of one file found and needs later.

    `unsupported`: `(Addons name, where)` of every object with no equivalent; `notes`: what
    the user is told in one warning; `weight_names`: the translated weight names of each
    top-level layer group, in the order the layer's `trainable_weights +
    non_trainable_weights` list them (what Keras's `.h5` loader assigns); `frozen`: the
    names of the shifts added to TF-Addons' shift-free norms (kept at zero, not trained);
    `pending_init`: per WeightNormalization saved before its data-dependent initialization
    ran, the weights of TF-Addons' clone that the initialization reads; `weight_hooks`: per translated layer name, the function that turns TF-Addons' weights of
    that layer (`{short name: value}`) into the Keras 3 layer's (a list of `(short name,
    value)` in its order).
    """

    def __init__(self, custom_objects):
        self.custom_objects = dict(custom_objects or {})
        self.unsupported = []
        self.notes = []
        self.weight_names = {}
        self.frozen = []
        self.pending_init = {}
        self.weight_hooks = {}
        self.output_widths = []

    def unsupported_error(self, path):
        lines = []
        for name, where in self.unsupported:
            advice = _coverage.COVERAGE.get(name)
            advice = f": instead, {advice['replacement']}" if advice else ""
            lines.append(f"\n- '{name}' ({where}){advice}")
        return ValueError(
            f"{path} uses TensorFlow Addons objects that keras_normkit cannot translate:"
            f"{''.join(lines)}\nPass a Keras 3 replacement as "
            "`custom_objects={'Addons>Name': object}` to load the file anyway "
            "(`keras_normkit.migration.tfa_coverage()` and docs/migration.md say what each "
            "TF-Addons object becomes)."
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
        if isinstance(inner, dict) and obj.get("class_name") == "BatchNormalization":
            translated, inner = _keras2_batch_normalization(inner, state)
            if translated is not None:
                serialization = ("class_name", "config", "registered_name", "module")
                extra = {k: copy.deepcopy(v) for k, v in obj.items() if k not in serialization}
                return {**translated, **extra}
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


# tf.keras 2's BatchNormalization arguments that Keras 3's does not take: `fused` (a
# kernel choice) and `virtual_batch_size` (ghost batches, keras_normkit's
# GhostBatchNormalization); `adjustment` (a callable) was never serialized.
_KERAS2_BN_ONLY = ("fused", "virtual_batch_size", "adjustment")


def _keras2_batch_normalization(config, state):
    """`(translated, config)` for a tf.keras 2 `BatchNormalization` config.

    tf.keras 2 saves `axis` as a list (`[3]`, set by `build`), which Keras 3's
    `BatchNormalization` cannot take: a single axis becomes an int (several axes have no
    Keras 3 equivalent). With `virtual_batch_size`, the layer becomes keras_normkit's
    `GhostBatchNormalization` (same arguments, same weights) and `translated` is its
    serialization; otherwise `translated` is `None` and `config` is the Keras 3 layer's.
    """
    virtual_batch_size = config.get("virtual_batch_size")
    where = _where(config)
    out = {k: v for k, v in config.items() if k not in _KERAS2_BN_ONLY}
    axis = out.get("axis", -1)
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            state.unsupported.append(
                (
                    f"BatchNormalization(axis={list(axis)})",
                    f"{where}: Keras 3's BatchNormalization normalizes over one axis",
                )
            )
            return None, config
        out["axis"] = int(axis[0])
    if virtual_batch_size is None:
        return None, out
    if out.get("renorm"):
        state.unsupported.append(
            (
                f"BatchNormalization(virtual_batch_size={virtual_batch_size}, renorm=True)",
                f"{where}: keras_normkit's GhostBatchNormalization has no batch "
                "renormalization; pass your own layer in `custom_objects`, or drop the "
                "virtual batches (keras.layers.BatchNormalization(renorm=True))",
            )
        )
        return None, config
    for key in ("renorm", "renorm_clipping", "renorm_momentum"):
        out.pop(key, None)
    out["virtual_batch_size"] = int(virtual_batch_size)
    state.notes.append(
        f"BatchNormalization '{config.get('name')}' with virtual_batch_size="
        f"{virtual_batch_size} is keras_normkit's GhostBatchNormalization (the same function "
        "at inference; in training it normalizes runs of consecutive examples, tf.keras 2 "
        "strided ones)"
    )
    return _serialized("keras_normkit>GhostBatchNormalization", out), out


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


def _peephole_lstm_cell(config, state):
    config = _cell_common(config, state)
    config.pop("implementation", None)  # Keras's LSTMCell kernel choice, same function
    return _serialized("keras_normkit>PeepholeLSTMCell", config)


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


def _base(config):
    """The base-layer arguments of a tf.keras 2 layer config that Keras 3 layers take."""
    keys = ("name", "trainable", "dtype", "batch_input_shape")
    return {key: config[key] for key in keys if key in config}


def _group_normalization(config, state):
    return _serialized("GroupNormalization", config)


def _instance_normalization(config, state):
    return _serialized("GroupNormalization", {**config, "groups": -1})


def _spectral_normalization(config, state):
    out = _base(config)
    layer = _translate(config["layer"], state, _where(config))
    out.update(layer=layer, power_iterations=config.get("power_iterations", 1))
    return _serialized("SpectralNormalization", out)


def _adaptive_pooling(kind):
    def translate(config, state):
        out = _base(config)
        out.update(output_size=config["output_size"], data_format=config.get("data_format"))
        if not hasattr(keras.layers, kind):
            state.unsupported.append(
                (f"Addons>{kind}", f"{_where(config)}: Keras {keras.__version__} has no {kind}")
            )
        return _serialized(kind, out)

    return translate


def _activation(config, state, function):
    out = _base(config)
    out["activation"] = function
    return _serialized("Activation", out)


def _gelu_layer(config, state):
    if config.get("approximate", True):
        return _activation(config, state, _translate_function("Addons>gelu", state, ""))
    return _activation(config, state, "gelu")


def _sparsemax_layer(config, state):
    if config.get("axis", -1) != -1:
        state.unsupported.append(
            (
                f"Addons>Sparsemax(axis={config['axis']})",
                f"{_where(config)}: keras_normkit's tfa_sparsemax takes the last axis; "
                "a `keras.layers.Lambda` transposing around it, in `custom_objects`",
            )
        )
    return _activation(config, state, _translate_function("Addons>sparsemax", state, ""))


_REGULARIZED = ("initializer", "regularizer", "constraint")


def _filter_response_normalization(config, state):
    if list(config.get("axis", [1, 2])) != [1, 2]:  # TF-Addons accepts nothing else
        state.unsupported.append(
            (f"Addons>FilterResponseNormalization(axis={config['axis']})", _where(config))
        )
    out = _base(config)
    out.update(
        axis=-1,
        epsilon=abs(float(config.get("epsilon", 1e-6))),  # TF-Addons uses |epsilon|
        learned_epsilon=bool(config.get("learned_epsilon", False)),
    )
    for weight in ("beta", "gamma"):
        for what in _REGULARIZED:
            key = f"{weight}_{what}"
            if config.get(key) is not None:
                out[key] = config[key]
    if config.get("learned_epsilon_constraint") is not None:
        out["learned_epsilon_constraint"] = config["learned_epsilon_constraint"]
    state.weight_hooks[config["name"]] = _frn_weights
    return _serialized("keras_normkit>FilterResponseNormalization", out)


def _frn_weights(block):
    """TF-Addons' `learned_epsilon` (1,), `gamma`, `beta` (1, 1, 1, C) -> ours: `gamma`,
    `beta` (C,), then `learned_epsilon` ()."""
    out = [(name, block[name].reshape(-1)) for name in ("gamma", "beta") if name in block]
    if "learned_epsilon" in block:
        out.append(("learned_epsilon", block["learned_epsilon"].reshape(())))
    return out


def _tlu(config, state):
    out = _base(config)
    out.update(axis=None, affine=bool(config.get("affine", False)))
    for weight in ("tau", "alpha"):
        for what in _REGULARIZED:
            key = f"{weight}_{what}"
            if config.get(key) is not None:
                out[key] = config[key]
    return _serialized("keras_normkit>TLU", out)


_LAYER_TRANSLATORS = {
    "Addons>WeightNormalization": _weight_normalization,
    "Addons>LayerNormLSTMCell": _layer_norm_lstm_cell,
    "Addons>LayerNormSimpleRNNCell": _layer_norm_simple_rnn_cell,
    "Addons>PeepholeLSTMCell": _peephole_lstm_cell,
    "Addons>GroupNormalization": _group_normalization,
    "Addons>InstanceNormalization": _instance_normalization,
    "Addons>SpectralNormalization": _spectral_normalization,
    "Addons>FilterResponseNormalization": _filter_response_normalization,
    "Addons>TLU": _tlu,
    "Addons>GELU": _gelu_layer,
    "Addons>Sparsemax": _sparsemax_layer,
    **{
        f"Addons>Adaptive{op}Pooling{d}D": _adaptive_pooling(f"Adaptive{op}Pooling{d}D")
        for op in ("Average", "Max")
        for d in (1, 2, 3)
    },
}
