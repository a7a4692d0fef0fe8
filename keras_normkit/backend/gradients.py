"""Gradients of the compiled loss on a batch, per layer: TensorFlow, JAX and PyTorch.

`gradient_function(model, layers)` returns `f(x, y, sample_weight)`, which runs the model in inference mode on
one batch, computes its loss with `model.compute_loss` (the compiled loss, a mean over the
batch, plus the model's regularization losses) and returns, for each layer of `layers`,
its output `a`, the gradient of the loss with respect to `a` and the gradients with respect
to the layer's trainable weights, as NumPy arrays.

- TensorFlow: one `tf.GradientTape` over the layers called one after the other (a
  Sequential model) or over a Functional model that also outputs the watched layers'
  outputs (a Functional model whose layers are each called once).
- JAX and PyTorch: zero perturbations are added to the watched layers' outputs; the
  gradient with respect to a perturbation is the gradient with respect to that output. A
  Sequential model's layers are called one after the other; for a Functional model, a copy
  of its graph sharing its layers is built once with
  `keras.models.clone_model(..., clone_function=lambda layer: layer, call_function=...)`,
  the call function adding the perturbation after each watched layer. A watched layer must
  be called once in the graph (a shared layer's output is ambiguous) and have one output.
  Both backends share this runner (`_runner`); they differ in how they differentiate:
- JAX: `jax.grad` of the loss as a function of the trainable values (through
  `keras.StatelessScope`, so regularization losses see them too) and of the perturbations,
  compiled with `jax.jit` once (per probe shape) and reused at every call.
- PyTorch: `torch.autograd.grad` of the loss with respect to the perturbations (zero
  tensors with `requires_grad=True`, created during the forward pass) and the trainable
  weights' `torch.nn.Parameter`s (`variable.value`); nothing is accumulated into `.grad`.
"""

import keras
import numpy as np


def _to_numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value))


def gradient_function(model, layers):
    """`f(x, y, sample_weight=None) -> {layer.name: {"output", "output_grad", "weight_grads"}}`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _tensorflow(model, layers)
    if backend == "jax":
        return _jax(model, layers, _runner(model, layers))
    if backend == "torch":
        return _torch(model, layers, _runner(model, layers))
    raise NotImplementedError(
        f"Per-layer gradients are implemented for the TensorFlow, JAX and PyTorch backends. "
        f"Received: backend={backend!r}"
    )


def _tensorflow(model, layers):
    import tensorflow as tf

    weights = [layer.trainable_weights for layer in layers]
    flat = [w for group in weights for w in group]
    if isinstance(model, keras.Sequential):
        # A Sequential model's `layer.output` may belong to an older graph (rebuilt by each
        # `add`): call the layers one after the other instead.
        def forward(x):
            h, found = x, {}
            for layer in model.layers:
                h = layer(h, training=False)
                found[layer.name] = h
            return [found[layer.name] for layer in layers], h

    else:
        inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
        outputs = model.outputs[0] if len(model.outputs) == 1 else model.outputs
        probe = keras.Model(inputs, [[layer.output for layer in layers], outputs])

        def forward(x):
            return probe(x, training=False)

    def gradients(x, y, sample_weight=None):
        with tf.GradientTape() as tape:
            outputs, y_pred = forward(tf.convert_to_tensor(x))
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        output_grads, weight_grads = tape.gradient(loss, [list(outputs), flat])
        result, start = {}, 0
        for layer, output, output_grad, group in zip(
            layers, outputs, output_grads, weights, strict=True
        ):
            layer_grads = weight_grads[start : start + len(group)]
            start += len(group)
            result[layer.name] = {
                "output": _to_numpy(output),
                "output_grad": _zeros_if_none(output_grad, output),
                "weight_grads": [
                    _zeros_if_none(g, w) for g, w in zip(layer_grads, group, strict=True)
                ],
            }
        return result

    return gradients


def _zeros_if_none(gradient, like):
    if gradient is None:  # disconnected from the loss
        return np.zeros(tuple(like.shape), dtype="float32")
    return _to_numpy(gradient)


def _runner(model, layers):
    """`run(x, perturb) -> (outputs, y_pred)`, `outputs` the watched layers' outputs by name,
    each replaced by `perturb(layer_name, output)` before the rest of the model sees it."""
    if isinstance(model, keras.Sequential):
        return _sequential_runner(model, layers)
    return _functional_runner(model, layers)


def _collect(layers, outputs, output_grads, weight_grads):
    """The result: `output_grads` by layer name, `weight_grads` by `id` of the variable."""
    return {
        layer.name: {
            "output": _to_numpy(outputs[layer.name]),
            "output_grad": _to_numpy(output_grads[layer.name]),
            "weight_grads": [_to_numpy(weight_grads[id(w)]) for w in layer.trainable_weights],
        }
        for layer in layers
    }


def _jax(model, layers, run):
    import jax

    trainable = list(model.trainable_variables)
    others = [v for v in model.variables if not any(v is t for t in trainable)]
    names = [layer.name for layer in layers]

    def forward(values, other_values, perturbations, x, y, sample_weight):
        mapping = list(zip(trainable, values, strict=True))
        mapping += list(zip(others, other_values, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            outputs, y_pred = run(x, lambda name, h: h + perturbations[name])
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        return loss, outputs

    # Compiled once per probe shape: the epochs after the first reuse it (run eagerly, every
    # call would trace and compile the model's loops again).
    @jax.jit
    def compiled(values, other_values, x, y, sample_weight):
        zero = dict.fromkeys(names, 0.0)
        _, shapes = jax.eval_shape(forward, values, other_values, zero, x, y, sample_weight)
        zeros = {n: jax.numpy.zeros(s.shape, s.dtype) for n, s in shapes.items()}
        (_, outputs), grads = jax.value_and_grad(forward, argnums=(0, 2), has_aux=True)(
            values, other_values, zeros, x, y, sample_weight
        )
        return outputs, grads

    def gradients(x, y, sample_weight=None):
        x, y, sample_weight = keras.tree.map_structure(
            lambda v: None if v is None else keras.ops.convert_to_tensor(v), (x, y, sample_weight)
        )
        outputs, (value_grads, output_grads) = compiled(
            [v.value for v in trainable], [v.value for v in others], x, y, sample_weight
        )
        by_id = {id(v): g for v, g in zip(trainable, value_grads, strict=True)}
        return _collect(layers, outputs, output_grads, by_id)

    return gradients


def _sequential_runner(model, layers):
    """`run(x, perturb) -> (outputs, y_pred)`: the layers called one after the other."""
    watched = {layer.name for layer in layers}
    unknown = [layer.name for layer in layers if not any(layer is x for x in model.layers)]
    if unknown:
        raise ValueError(f"Layers {unknown} are not layers of the model {model.name!r}.")

    def run(x, perturb):
        h, outputs = x, {}
        for layer in model.layers:
            h = layer(h, training=False)
            if layer.name in watched:
                h = perturb(layer.name, h)
                outputs[layer.name] = h
        return outputs, h

    return run


class _Feed:
    """`perturb(name, output)` of the `_Perturb` layers of one probe model, while it runs."""

    perturb = None


class _Perturb(keras.layers.Layer):
    """Returns `feed.perturb(target, inputs)`: its input plus a zero perturbation."""

    def __init__(self, target, feed, **kwargs):
        super().__init__(**kwargs)
        self.target = target
        self._feed = feed
        self.supports_masking = True  # the watched layer's mask reaches the layers after it

    def call(self, inputs):
        perturb = self._feed.perturb
        if perturb is None:  # symbolic build
            return inputs
        return perturb(self.target, inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


def _functional_runner(model, layers):
    """`run(x, perturb) -> (outputs, y_pred)` for a Functional model.

    A copy of the model's graph that shares its layers (`keras.models.clone_model` with
    `clone_function=lambda layer: layer`) is built once, with each watched layer's output
    followed by a `_Perturb` layer (its `call_function`), and outputs the perturbed layer
    outputs besides the model's outputs. The copy is cloned from an uncompiled view of the
    model (`keras.Model(model.input, model.output)`), so nothing is compiled or built twice.
    """
    if not getattr(model, "inputs", None) or not getattr(model, "outputs", None):
        raise NotImplementedError(
            "On the JAX and PyTorch backends, per-layer gradients need a keras.Sequential or Functional "
            f"model (one with `inputs` and `outputs`). Received: {type(model).__name__}"
        )
    feed = _Feed()
    by_id = {id(layer): layer for layer in layers}
    tapped = {}

    def call_function(layer, *args, **kwargs):
        outputs = layer(*args, **kwargs)
        if id(layer) not in by_id:
            return outputs
        if layer.name in tapped:
            raise ValueError(
                f"Layer {layer.name!r} is called more than once in the model, so its output "
                "is ambiguous: watch the layers that are called once."
            )
        if not isinstance(outputs, keras.KerasTensor):
            raise ValueError(
                f"Layer {layer.name!r} has several outputs; watch layers with one output."
            )
        tapped[layer.name] = _Perturb(layer.name, feed, name=f"perturb_{layer.name}")(outputs)
        return tapped[layer.name]

    view = keras.Model(model.input, model.output)
    clone = keras.models.clone_model(
        view, clone_function=lambda layer: layer, call_function=call_function
    )
    missing = [layer.name for layer in layers if layer.name not in tapped]
    if missing:
        raise ValueError(
            f"Layers {missing} are not called in the graph of the model {model.name!r} "
            "(input layers and layers of other models cannot be watched on JAX and PyTorch)."
        )
    probe = keras.Model(clone.input, [[tapped[layer.name] for layer in layers], clone.output])

    def run(x, perturb):
        feed.perturb = perturb
        try:
            outputs, y_pred = probe(x, training=False)
        finally:
            feed.perturb = None
        return dict(zip([layer.name for layer in layers], outputs, strict=True)), y_pred

    return run


def _torch(model, layers, run):
    import torch

    weights = []  # the watched layers' trainable variables, each once
    for layer in layers:
        weights += [w for w in layer.trainable_weights if not any(w is v for v in weights)]

    def gradients(x, y, sample_weight=None):
        x = keras.tree.map_structure(keras.ops.convert_to_tensor, x)
        perturbations = {}

        def perturb(name, h):
            perturbations[name] = torch.zeros_like(h, requires_grad=True)
            return h + perturbations[name]

        with torch.enable_grad():  # also when called under `torch.no_grad()`
            outputs, y_pred = run(x, perturb)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
            sources = [perturbations[layer.name] for layer in layers]
            sources += [w.value for w in weights]
            wanted = [t for t in sources if t.requires_grad]
            found = (
                torch.autograd.grad(loss, wanted, allow_unused=True) if loss.requires_grad else ()
            )
        by_id = {id(t): g for t, g in zip(wanted, found, strict=False)}
        grads = [_zeros_if_none(by_id.get(id(t)), t) for t in sources]
        names = [layer.name for layer in layers]
        output_grads = dict(zip(names, grads[: len(layers)], strict=True))
        weight_grads = {id(w): g for w, g in zip(weights, grads[len(layers) :], strict=True)}
        outputs = {name: h.detach() for name, h in outputs.items()}
        return _collect(layers, outputs, output_grads, weight_grads)

    return gradients
