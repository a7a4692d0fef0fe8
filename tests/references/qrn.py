"""An independent NumPy reference of the query-reduction network, step by step.

Seo, Min, Farhadi, Hajishirzi, ICLR 2017 (arXiv:1606.04582), Eq. 1-4: update gate
`z_t = s(W_z (x_t * q_t) + b_z)`, reset gate `r_t = s(W_r (x_t * q_t) + b_r)`, candidate
`h~_t = tanh(W_h [x_t; q_t] + b_h)`, state `h_t = z_t r_t h~_t + (1 - z_t) h_{t-1}`, `h_0 = 0`.
Bidirectional: the output is `h_fwd_t + h_bwd_t`, the backward pass running over the reversed
steps with the same `W_z, b_z, W_h, b_h` and, as in the paper's reference code
(seominjoon/qrn `babi/model.py`), a reset gate of its own (columns `[z | r_fwd | r_bwd]`);
with `share_reset_gate=True` (keras_normkit 0.1's form) it uses the forward one. Masked steps
have `z_t = 0`. Float64, one step at a time, no scan, no Keras.
"""

import numpy as np


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def reset_gate_count(use_reset_gate=True, bidirectional=False, share_reset_gate=False):
    """How many reset gates the weights hold: 0, 1, or 2 (one per direction)."""
    if not use_reset_gate:
        return 0
    return 2 if bidirectional and not share_reset_gate else 1


def numpy_gates(x, q, weights, units, use_reset_gate=True, vector_gates=False, reset_gates=1):
    """`(z, r_fwd, r_bwd, h~)` of every step (`r_bwd` is `r_fwd` with one reset gate, both 1
    without reset gate)."""
    gate_kernel, gate_bias, kernel, bias = (np.asarray(w, np.float64) for w in weights)
    x, q = np.asarray(x, np.float64), np.asarray(q, np.float64)
    if q.ndim == 2:
        q = np.repeat(q[:, None], x.shape[1], axis=1)
    size = units if vector_gates else 1
    logits = (x * q) @ gate_kernel + gate_bias
    z = sigmoid(logits[..., :size])
    r_fwd = sigmoid(logits[..., size : 2 * size]) if use_reset_gate else np.ones_like(z)
    r_bwd = sigmoid(logits[..., 2 * size : 3 * size]) if reset_gates == 2 else r_fwd
    candidate = np.tanh(np.concatenate([x, q], axis=-1) @ kernel + bias)
    return z, r_fwd, r_bwd, candidate


def numpy_qrn(
    x,
    q,
    weights,
    units,
    use_reset_gate=True,
    vector_gates=False,
    bidirectional=False,
    share_reset_gate=False,
    return_sequences=True,
    mask=None,
):
    """h_t = z_t r_t h~_t + (1 - z_t) h_{t-1}, h_0 = 0; masked steps have z_t = 0."""
    reset_gates = reset_gate_count(use_reset_gate, bidirectional, share_reset_gate)
    z, r_fwd, r_bwd, candidate = numpy_gates(
        x, q, weights, units, use_reset_gate, vector_gates, reset_gates
    )
    batch, steps = z.shape[:2]
    if mask is not None:
        z = z * np.asarray(mask, np.float64)[..., None]

    def run(order, r):
        h, out = np.zeros((batch, units)), np.zeros((batch, steps, units))
        for t in order:
            h = z[:, t] * r[:, t] * candidate[:, t] + (1 - z[:, t]) * h
            out[:, t] = h
        return out

    out = run(range(steps), r_fwd)
    if bidirectional:
        out = out + run(reversed(range(steps)), r_bwd)
    if return_sequences:
        return out
    if mask is None:
        last = np.full(batch, steps - 1)
    else:
        last = np.array([np.flatnonzero(m).max() if np.any(m) else 0 for m in mask])
    return out[np.arange(batch), last]
