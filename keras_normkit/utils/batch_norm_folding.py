"""Fold inference-time batch normalization into the preceding Dense/Conv layer.

At inference `BatchNormalization` is one affine map per channel,
`y = gamma * (z - mean) / sqrt(var + epsilon) + beta = s * z + (beta - s * mean)` with
`s = gamma / sqrt(var + epsilon)`. When `z = x K + b` comes from a linear layer (no
activation) whose output feeds only that BN, the pair is one linear layer with
`K' = K * s` (scaled along the output-channel axis) and `b' = s * (b - mean) + beta`.

Reference: Ioffe & Szegedy, "Batch Normalization", ICML 2015, arXiv:1502.03167.
"""

import keras
import numpy as np

from keras_normkit.backend.keras_compat import call_count, graph_nodes, producing_layer

__all__ = ["fold_batch_normalization"]

_CONV = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_CONV_TRANSPOSE = (
    keras.layers.Conv1DTranspose,
    keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose,
)
_DEPTHWISE = (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)
_SEPARABLE = (keras.layers.SeparableConv1D, keras.layers.SeparableConv2D)
_FOLDABLE = (keras.layers.Dense, *_CONV, *_CONV_TRANSPOSE, *_DEPTHWISE, *_SEPARABLE)


def _is_graph_model(model):
    """Whether `model` is a Sequential or Functional model (a graph of layers to rewrite).

    A Functional model (and any subclass built with `super().__init__(inputs, outputs)`) has
    symbolic `inputs` and `outputs`; a subclassed model has neither attribute.
    """
    if isinstance(model, keras.Sequential):
        return True
    if not isinstance(model, keras.Model):
        return False
    inputs, outputs = getattr(model, "inputs", None), getattr(model, "outputs", None)
    tensors = keras.tree.flatten([inputs, outputs]) if inputs and outputs else []
    return bool(tensors) and all(isinstance(t, keras.KerasTensor) for t in tensors)


def _channel_axis(layer, rank):
    """The output-channel axis of `layer`'s output (as a non-negative index)."""
    if isinstance(layer, keras.layers.Dense):
        return rank - 1
    return 1 if layer.data_format == "channels_first" else rank - 1


def _why_not_foldable(layer, bn, output_rank):
    """None if `bn` (called on `layer`'s only output) can be folded into `layer`, else why."""
    if type(layer) not in _FOLDABLE:
        return f"follows a {type(layer).__name__}, not a Dense/Conv layer"
    if layer.activation is not keras.activations.linear:
        return f"`{layer.name}` has a non-linear activation"
    if getattr(layer, "quantization_mode", None) or getattr(layer, "lora_enabled", False):
        return f"`{layer.name}` is quantized or LoRA-enabled"
    if not (bn.built and layer.built):
        return "the layers are not built"
    if bn.axis % output_rank != _channel_axis(layer, output_rank):
        return f"its axis {bn.axis} is not the channel axis of `{layer.name}`"
    return None


def _scale_and_shift(bn):
    """Per-channel (s, t) of the inference-time BN, y = s * z + t, in float64."""
    var = keras.ops.convert_to_numpy(bn.moving_variance).astype("float64")
    mean = keras.ops.convert_to_numpy(bn.moving_mean).astype("float64")
    gamma = keras.ops.convert_to_numpy(bn.gamma).astype("float64") if bn.scale else 1.0
    beta = keras.ops.convert_to_numpy(bn.beta).astype("float64") if bn.center else 0.0
    s = gamma / np.sqrt(var + bn.epsilon)
    return s, beta - s * mean


def _folded_clone(layer):
    config = layer.get_config()
    config["use_bias"] = True
    return layer.__class__.from_config(config)


def _assign_folded_weights(old, new, bn):
    s, t = _scale_and_shift(bn)
    as_np = keras.ops.convert_to_numpy
    if isinstance(old, _SEPARABLE):
        new.depthwise_kernel.assign(as_np(old.depthwise_kernel))
        kernel_name = "pointwise_kernel"
    else:
        kernel_name = "kernel"
    kernel = as_np(getattr(old, kernel_name)).astype("float64")
    if isinstance(old, _CONV_TRANSPOSE):  # (..., out, in)
        kernel = kernel * s[:, None]
    elif isinstance(old, _DEPTHWISE):  # (..., in, multiplier): output channel c*m + k
        kernel = kernel * s.reshape(kernel.shape[-2], kernel.shape[-1])
    else:  # (..., out)
        kernel = kernel * s
    bias = as_np(old.bias).astype("float64") if old.use_bias else 0.0
    getattr(new, kernel_name).assign(kernel.astype(getattr(new, kernel_name).dtype))
    new.bias.assign((s * bias + t).astype(new.bias.dtype))


def _copy_weights(old, new):
    new.set_weights(old.get_weights())


def _find_pairs_functional(model):
    """{id(bn): (producer, bn)} for every foldable pair, and {bn name: reason} for the rest."""
    nodes = graph_nodes(model)
    consumers = {}
    for node in nodes:
        for tensor in node.input_tensors:
            consumers[id(tensor)] = consumers.get(id(tensor), 0) + 1
    outputs = {id(t) for t in model.outputs}
    pairs, skipped = {}, {}
    for node in nodes:
        bn = node.operation
        if not isinstance(bn, keras.layers.BatchNormalization):
            continue
        if node.arguments.kwargs.get("training") is True:
            skipped[bn.name] = "it is called with training=True (batch statistics)"
            continue
        tensors = node.input_tensors
        if call_count(bn) != 1 or len(tensors) != 1:
            skipped[bn.name] = "it is shared (called more than once)"
            continue
        (tensor,) = tensors
        producer = producing_layer(tensor)
        if consumers.get(id(tensor), 0) != 1 or id(tensor) in outputs:
            skipped[bn.name] = f"the output of `{producer.name}` is also used elsewhere"
            continue
        if call_count(producer) != 1:
            skipped[bn.name] = f"`{producer.name}` is shared or not a layer"
            continue
        reason = _why_not_foldable(producer, bn, len(tensor.shape))
        if reason:
            skipped[bn.name] = reason
        else:
            pairs[id(bn)] = (producer, bn)
    return pairs, skipped


def _fold_functional(model, report):
    pairs, skipped = _find_pairs_functional(model)
    folded_producers = {id(p): bn for p, bn in pairs.values()}
    clones = []  # (old, new, bn or None)

    def clone_function(layer):
        if id(layer) in pairs:
            return layer  # never called: `call_function` skips it
        if _is_graph_model(layer):
            return _fold(layer, report)
        if id(layer) in folded_producers:
            new = _folded_clone(layer)
            clones.append((layer, new, folded_producers[id(layer)]))
            return new
        new = layer.__class__.from_config(layer.get_config())
        clones.append((layer, new, None))
        return new

    def call_function(layer, *args, **kwargs):
        if id(layer) in pairs:
            return args[0]
        return layer(*args, **kwargs)

    # Clone the graph as a plain Functional model sharing the layers. For a subclass built
    # with the Functional API this is what Keras 3.15 returns anyway, while Keras 3.10 would
    # call the subclass's own constructor with (inputs, outputs, name=...), which it rarely takes.
    plain = keras.Model(model.inputs, model.outputs, name=model.name)
    new_model = keras.models.clone_model(
        plain, clone_function=clone_function, call_function=call_function
    )
    if model.compiled:  # as clone_model does for the model it is given
        new_model.compile_from_config(model.get_compile_config())
    _finish(clones, report, skipped)
    return new_model


def _fold_sequential(model, report):
    if not model.built or not model.inputs:
        raise ValueError(
            "`model` must be built (give it an `Input` or call it once) before folding. "
            f"Received: unbuilt Sequential model {model.name!r}"
        )
    layers = model.layers
    clones, new_layers, skipped = [], [], {}
    i = 0
    while i < len(layers):
        layer = layers[i]
        following = layers[i + 1] if i + 1 < len(layers) else None
        if _is_graph_model(layer):
            new_layers.append(_fold(layer, report))
            i += 1
            continue
        if isinstance(following, keras.layers.BatchNormalization):
            reason = _why_not_foldable(layer, following, len(layer.output.shape))
            if reason is None:
                new = _folded_clone(layer)
                clones.append((layer, new, following))
                new_layers.append(new)
                i += 2
                continue
            skipped[following.name] = reason
        if isinstance(layer, keras.layers.BatchNormalization) and i == 0:
            skipped[layer.name] = "it is the first layer"
        new = layer.__class__.from_config(layer.get_config())
        clones.append((layer, new, None))
        new_layers.append(new)
        i += 1
    source = model.inputs[0]
    new_model = keras.Sequential(
        [keras.Input(batch_shape=source.shape, dtype=source.dtype), *new_layers],
        name=model.name,
    )
    _finish(clones, report, skipped)
    return new_model


def _finish(clones, report, skipped):
    for old, new, bn in clones:
        if bn is None:
            _copy_weights(old, new)
        else:
            _assign_folded_weights(old, new, bn)
            report["folded"].append(
                {
                    "batch_normalization": bn.name,
                    "folded_into": old.name,
                    "layer_class": type(old).__name__,
                }
            )
    report["skipped"].update(skipped)


def _fold(model, report):
    if isinstance(model, keras.Sequential):
        return _fold_sequential(model, report)
    return _fold_functional(model, report)


def fold_batch_normalization(model, verbose=True, return_report=False):
    """A copy of `model` with each foldable `BatchNormalization` merged into its producer.

    Every `BatchNormalization` applied (at inference, with its moving statistics) directly
    to the output of a `Dense`, `Conv1D/2D/3D`, `Conv1D/2D/3DTranspose`,
    `DepthwiseConv1D/2D` or `SeparableConv1D/2D` layer is folded into it:
    `s = gamma / sqrt(moving_variance + epsilon)`, `kernel' = kernel * s` along the
    output channels (the pointwise kernel of a separable conv), and
    `bias' = s * (bias - moving_mean) + beta` (a bias is added if the layer had none).
    A pair is folded only when the math allows: the layer has no activation, its output
    feeds only the BN, neither is shared, the BN normalizes the layer's channel axis and
    is not called with `training=True`. Other BNs are left in place (and reported).
    Nested Sequential/Functional models are folded recursively. The original model is
    untouched (every layer is cloned, weights copied). The result computes the same
    function in inference mode (within float32 rounding), saves to `.keras` and exports;
    it should not be trained further as if it still had BN.

    Args:
        model: A built `keras.Sequential` or Functional `keras.Model`. Subclassed models
            have no layer graph to rewrite and raise a `TypeError`.
        verbose: Whether to print one line per folded BN. Default: `True`.
        return_report: If `True`, return `(new_model, report)`, where `report` is a dict
            with `"folded"` (a list of `{"batch_normalization", "folded_into",
            "layer_class"}`) and `"skipped"` (`{bn name: reason}`).

    Returns:
        The new model (and the report if `return_report=True`).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.utils import fold_batch_normalization
    >>> model = keras.Sequential([
    ...     keras.Input((8, 8, 3)),
    ...     keras.layers.Conv2D(4, 3, use_bias=False),
    ...     keras.layers.BatchNormalization(),
    ...     keras.layers.ReLU(),
    ... ])
    >>> folded, report = fold_batch_normalization(model, verbose=False, return_report=True)
    >>> [type(layer).__name__ for layer in folded.layers]
    ['Conv2D', 'ReLU']
    >>> x = np.random.rand(2, 8, 8, 3).astype("float32")
    >>> bool(np.allclose(model.predict(x, verbose=0), folded.predict(x, verbose=0), atol=1e-5))
    True

    Reference: Ioffe & Szegedy, "Batch Normalization", ICML 2015, arXiv:1502.03167.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "`model` must be a keras.Sequential or Functional keras.Model. "
            f"Received: model of type {type(model).__name__}"
        )
    if not _is_graph_model(model):
        raise TypeError(
            "fold_batch_normalization supports Sequential and Functional models only (it "
            "rewrites their layer graph); a subclassed model has no graph to rewrite. "
            f"Received: model of class {type(model).__name__}. Rebuild it with the "
            "Functional API, or fold its inner Sequential/Functional submodels."
        )
    report = {"folded": [], "skipped": {}}
    new_model = _fold(model, report)
    if model.compiled:
        try:
            new_model.compile_from_config(model.get_compile_config())
        except Exception:  # noqa: BLE001 - compiling the copy is a convenience
            pass
    if verbose:
        for entry in report["folded"]:
            print(
                f"Folded {entry['batch_normalization']} into {entry['folded_into']} "
                f"({entry['layer_class']})"
            )
        for name, reason in report["skipped"].items():
            print(f"Kept {name}: {reason}")
    return (new_model, report) if return_report else new_model
