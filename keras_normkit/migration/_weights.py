"""The weights of a translated model: TF-Addons' variables renamed, reordered and reshaped
into what the Keras 3 objects hold, written to the `.h5` that Keras then loads; TF-Addons'
data-dependent initialization of WeightNormalization."""

import json

import keras
import numpy as np


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


def _hook_block(names, layer, top_level):
    """The indices of the weights of TF-Addons layer `layer` among `names`: those in its
    scope, and an unscoped weight just before them (FilterResponseNormalization creates its
    `learned_epsilon` in `__init__`, outside its scope); all of them when the group is the
    layer's own."""
    if top_level:
        return list(range(len(names)))
    block = [i for i, n in enumerate(names) if n.startswith(f"{layer}/") or f"/{layer}/" in n]
    if block and block[0] > 0 and "/" not in names[block[0] - 1]:
        block.insert(0, block[0] - 1)
    return block


def _apply_weight_hooks(names, values, state, layer_name):
    """TF-Addons' weights of the layers with a weight hook, as the Keras 3 layer holds them
    (in its order, reshaped), under the same scope."""
    for layer, hook in state.weight_hooks.items():
        block = _hook_block(names, layer, layer == layer_name)
        if not block:
            continue
        full = {names[i].split("/")[-1].split(":")[0]: names[i] for i in block}
        short = {name: values[names.index(full_name)] for name, full_name in full.items()}
        scope = names[block[-1]][: names[block[-1]].rfind("/") + 1]
        new = [(full.get(name, f"{scope}{name}:0"), value) for name, value in hook(short)]
        first = block[0]
        keep = [i for i in range(len(names)) if i not in block]
        order = [(names[i], values[i]) for i in keep if i < first]
        order += new + [(names[i], values[i]) for i in keep if i > first]
        names, values = [n for n, _ in order], [v for _, v in order]
    return names, values


def _translate_layer_weights(names, values, state, layer_name):
    """The (names, values) of one top-level layer group, in keras_normkit's weight order.

    tf.keras 2 stores a layer's weights as its trainable then its non-trainable variables,
    each named by its scope. TF-Addons' WeightNormalization stores `g`, the wrapped layer's
    `kernel` (v) and `bias`, its boolean `initialized`, and with `data_init=True` the
    `data_dep_init/kernel` and `data_dep_init/bias` of its non-trainable clone (which its
    data-dependent initialization runs, and nothing else).
    """
    names, values = _add_missing_shifts(list(names), list(values), state)
    names, values = _apply_weight_hooks(names, values, state, layer_name)
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
