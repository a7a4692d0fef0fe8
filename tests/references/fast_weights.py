"""An independent NumPy reference of the fast-weights RNN, step by step from the equations.

Ba, Hinton, Mnih, Leibo, Ionescu 2016 (arXiv:1610.06258), §2: the boundary
`b = W h(t) + C x(t) + bias` once per step, the preliminary vector `h_0 = f(b)` (or
`f(LN(b))` with `preliminary_layer_norm=True`, keras_normkit 0.1's form), then
`h_{s+1} = f(LN(b + A(t) h_s))` for `s < S`, `h(t+1) = h_S`, and
`A(t+1) = lambda A(t) + eta h(t+1) h(t+1)^T` with the *new* state. One example and one step at
a time, in float64, with no chunking, no memory form and no Keras.
"""

import numpy as np


def numpy_layer_norm(z, gamma, beta, eps):
    mean = z.mean()
    var = ((z - mean) ** 2).mean()
    return gamma * (z - mean) / np.sqrt(var + eps) + beta


def numpy_fast_weights(
    x,
    weights,
    units,
    *,
    inner_steps,
    decay,
    eta,
    use_layer_norm,
    preliminary_layer_norm=False,
    eps=1e-5,
    mask=None,
    h0=None,
    a0=None,
    go_backwards=False,
):
    """Return (outputs [B, T, H], h [B, H], A [B, H, H]) in float64.

    `weights`: `[kernel, recurrent_kernel, bias, gamma, beta]` (the last two with layer
    norm). Masked steps leave `h` and `A` unchanged and output the previous state.
    """
    kernel, recurrent, bias = (np.asarray(w, "float64") for w in weights[:3])
    gamma, beta = (np.asarray(w, "float64") for w in weights[3:5]) if use_layer_norm else (1, 0)
    batch, steps, _ = x.shape
    x = np.asarray(x, "float64")
    mask = np.ones((batch, steps), bool) if mask is None else mask
    h = np.zeros((batch, units)) if h0 is None else np.array(h0, "float64")
    a = np.zeros((batch, units, units)) if a0 is None else np.array(a0, "float64")

    def norm(z):
        return numpy_layer_norm(z, gamma, beta, eps) if use_layer_norm else z

    def relu(z):
        return np.maximum(z, 0.0)

    outputs = np.zeros((batch, steps, units))
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    for k, t in enumerate(order):
        for i in range(batch):
            if mask[i, t]:
                boundary = x[i, t] @ kernel + h[i] @ recurrent + bias  # once per step
                hs = relu(norm(boundary) if preliminary_layer_norm else boundary)
                for _ in range(inner_steps):
                    hs = relu(norm(boundary + a[i] @ hs))
                h[i] = hs
                a[i] = decay * a[i] + eta * np.outer(hs, hs)  # with the *new* state
            outputs[i, k] = h[i]
    return outputs, h, a
