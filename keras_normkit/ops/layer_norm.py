"""Layer normalization over the last axis with a hand-derived gradient (Ba et al., 2016).

    y = gamma * x_hat + beta,  x_hat = (x - mean(x)) / sqrt(var(x) + epsilon),

mean and (biased) variance over the last axis of each example; the backward pass is

    d_beta = sum(dy),  d_gamma = sum(dy * x_hat),
    dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sqrt(var(x) + epsilon),  g = dy * gamma,

(sums over every leading axis, means over the last one), a few element-wise passes where
automatic differentiation of the forward pass builds about twenty operations. This is what
the layer-normalized RNN cells run at every time step: in a TensorFlow graph without XLA
every operation of a step is dispatched on its own, so the number of operations is the
cost. The formula is `keras.layers.LayerNormalization`'s (same epsilon; tested to 1e-6 on
outputs and 1e-5 on gradients in float32); like it, half-precision inputs are normalized in
float32 and cast back. `FastWeightsRNN` runs the same forward formula with automatic
differentiation (`derived_gradient=False`) in its XLA-compiled loop (why:
`benchmarks/DECISIONS.md#layer-norm-gradient`).

On PyTorch, Keras's `LayerNormalization` already calls PyTorch's fused `layer_norm`
kernel, and `keras.ops.custom_gradient` would wrap it in an `autograd.Function`:
`normalize(norm, x)` there calls the Keras layer itself.
"""

import keras
from keras import ops

from keras_normkit._validation import check_bool, check_number

__all__ = ["layer_norm", "normalize"]


def _sum_over_examples(value):
    """Sum `value` over every axis but the last (down to gamma's shape)."""
    axes = tuple(range(len(value.shape) - 1))
    return ops.sum(value, axis=axes) if axes else value


def _forward(x, gamma, beta, epsilon):
    """The formula: `(y, x_hat, 1 / sqrt(var + epsilon))`."""
    mean = ops.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    inv = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
    x_hat = centered * inv
    return x_hat * gamma + beta, x_hat, inv


@ops.custom_gradient
def _fused(x, gamma, beta, epsilon):
    y, x_hat, inv = _forward(x, gamma, beta, epsilon)

    def grad(*args, upstream=None):
        dy = args[0] if upstream is None else upstream
        g = dy * gamma
        dx = inv * (
            g
            - ops.mean(g, axis=-1, keepdims=True)
            - x_hat * ops.mean(g * x_hat, axis=-1, keepdims=True)
        )
        d_gamma = _sum_over_examples(dy * x_hat)
        d_beta = _sum_over_examples(dy)
        return dx, d_gamma, d_beta, ops.zeros_like(epsilon)

    return y, grad


def layer_norm(x, gamma, beta, epsilon, derived_gradient=True):
    """`gamma * (x - mean) / sqrt(var + epsilon) + beta` over the last axis of `x`.

    Args:
        x: Tensor `(..., features)`.
        gamma: Gain `(features,)`.
        beta: Shift `(features,)`.
        epsilon: Python float > 0 added to the variance.
        derived_gradient: Boolean. `True` (default): back-propagate with the hand-derived
            formula above (`keras.ops.custom_gradient`), fewest operations, for a
            TensorFlow graph without XLA. `False`: automatic differentiation of the same
            forward formula, for XLA-compiled loops such as `FastWeightsRNN`'s (the
            measurements behind both choices: `benchmarks/DECISIONS.md#layer-norm-gradient`).

    Returns:
        A tensor of the shape and dtype of `x` (computed in at least float32).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.ops import layer_norm
    >>> y = layer_norm(np.array([[1.0, 2.0, 3.0]], "float32"), np.ones(3), np.zeros(3), 1e-3)
    >>> print(keras.ops.convert_to_numpy(y).astype("float64").round(3))
    [[-1.224  0.     1.224]]

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
    """
    epsilon = check_number("epsilon", epsilon, 0.0, strict_minimum=True)
    derived_gradient = check_bool("derived_gradient", derived_gradient)
    dtype = keras.backend.standardize_dtype(x.dtype)
    compute = "float32" if dtype in ("float16", "bfloat16") else dtype
    args = (ops.cast(x, compute), ops.cast(gamma, compute), ops.cast(beta, compute))
    if derived_gradient:
        y = _fused(*args, ops.convert_to_tensor(epsilon, compute))
    else:
        y = _forward(*args, epsilon)[0]
    return ops.cast(y, dtype)


def normalize(norm, x):
    """`norm(x)` for a `keras.layers.LayerNormalization` over the last axis, via `layer_norm`.

    Uses the layer's own `gamma`, `beta` and `epsilon` (its weights stay where `.keras`
    files and ported weights expect them). On PyTorch it calls the layer (see the module
    docstring).
    """
    if keras.backend.backend() == "torch":
        return norm(x)
    return layer_norm(x, norm.gamma, norm.beta, norm.epsilon)
