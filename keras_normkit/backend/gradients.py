"""Gradients of the compiled loss on a batch, per layer: TensorFlow and JAX implementations.

`gradient_function(model, layers)` returns `f(x, y, sample_weight)`, which runs the model in inference mode on
one batch, computes its loss with `model.compute_loss` (the compiled loss, a mean over the
batch, plus the model's regularization losses) and returns, for each layer of `layers`,
its output `a`, the gradient of the loss with respect to `a` and the gradients with respect
to the layer's trainable weights, as NumPy arrays.

- TensorFlow: one `tf.GradientTape` over the layers called one after the other (a
  Sequential model) or over a Functional model that also outputs the watched layers'
  outputs (a Functional model whose layers are each called once).
- JAX: `jax.grad` of the loss as a function of the trainable values (through
  `keras.StatelessScope`) and of zero perturbations added to the watched layers' outputs,
  whose gradients are the gradients with respect to those outputs. The layers are called
  one after the other, so this needs a `keras.Sequential` model.
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
        return _jax(model, layers)
    raise NotImplementedError(
        f"Per-layer gradients are implemented for the TensorFlow and JAX backends. "
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


def _jax(model, layers):

    if not isinstance(model, keras.Sequential):
        raise NotImplementedError(
            "On the JAX backend, per-layer gradients need a keras.Sequential model. "
            f"Received: {type(model).__name__}"
        )
    watched = {layer.name for layer in layers}
    trainable = list(model.trainable_variables)
    others = [v for v in model.variables if not any(v is t for t in trainable)]

    def gradients(x, y, sample_weight=None):
        return _jax_gradients(model, layers, watched, trainable, others, x, y, sample_weight)

    return gradients


def _jax_gradients(model, layers, watched, trainable, others, x, y, sample_weight):
    import jax

    x = keras.ops.convert_to_tensor(x)

    def forward(values, perturbations):
        mapping = list(zip(trainable, values, strict=True)) + [(v, v.value) for v in others]
        outputs = {}
        with keras.StatelessScope(state_mapping=mapping):
            h = x
            for layer in model.layers:
                h = layer(h, training=False)
                if layer.name in watched:
                    h = h + perturbations[layer.name]
                    outputs[layer.name] = h
            loss = model.compute_loss(x=x, y=y, y_pred=h, sample_weight=sample_weight)
        return loss, outputs

    values = [v.value for v in trainable]
    _, shapes = jax.eval_shape(forward, values, {n: 0.0 for n in watched})
    zeros = {n: jax.numpy.zeros(s.shape, s.dtype) for n, s in shapes.items()}
    (_, outputs), (value_grads, output_grads) = jax.value_and_grad(
        forward, argnums=(0, 1), has_aux=True
    )(values, zeros)
    by_id = {id(v): g for v, g in zip(trainable, value_grads, strict=True)}
    return {
        layer.name: {
            "output": _to_numpy(outputs[layer.name]),
            "output_grad": _to_numpy(output_grads[layer.name]),
            "weight_grads": [_to_numpy(by_id[id(w)]) for w in layer.trainable_weights],
        }
        for layer in layers
    }
