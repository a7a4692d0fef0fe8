"""NumPy float64 forward passes of TF-Addons' recurrent cells, read from a tf.keras 2 `.h5`.

An independent reference for the migration tests: TF-Addons 0.23's formulas written out
from its source (`tfa.rnn.LayerNormLSTMCell.call`, `tfa.rnn.LayerNormSimpleRNNCell.call`),
on the weights as tf.keras 2 stored them, in float64. It shows how far TF-Addons' own float32
outputs (the fixtures) are from the exact values, i.e. which differences are rounding.
"""

import h5py
import numpy as np


def h5_weights(path, layer, scope=""):
    """`{name without scope and ":0": float64 array}` of one layer group of a `.h5` model."""
    with h5py.File(path, "r") as f:
        group = f["model_weights"][layer]
        names = [n.decode() if isinstance(n, bytes) else n for n in group.attrs["weight_names"]]
        return {
            name[len(scope) : -len(":0")]: np.asarray(group[name], "float64")
            for name in names
            if name.startswith(scope)
        }


def layer_norm(a, gamma, beta, epsilon):
    mean = a.mean(axis=-1, keepdims=True)
    variance = np.square(a - mean).mean(axis=-1, keepdims=True)
    return (a - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _steps(x, go_backwards):
    return range(x.shape[1] - 1, -1, -1) if go_backwards else range(x.shape[1])


def layer_norm_lstm(x, w, epsilon=1e-3, go_backwards=False):
    """TF-Addons' LayerNormLSTMCell over `x` (batch, time, features): every output, in the
    order computed. The carried cell state is the normalized one."""
    units = w["recurrent_kernel"].shape[0]
    h = np.zeros((x.shape[0], units))
    c = np.zeros_like(h)
    outputs = []
    for t in _steps(x, go_backwards):
        z = layer_norm(
            x[:, t] @ w["kernel"], w["kernel_norm/gamma"], w["kernel_norm/beta"], epsilon
        )
        z = z + layer_norm(
            h @ w["recurrent_kernel"], w["recurrent_norm/gamma"], w["recurrent_norm/beta"], epsilon
        )
        i, f, g, o = np.split(z + w["bias"], 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        c = layer_norm(c, w["state_norm/gamma"], w["state_norm/beta"], epsilon)
        h = _sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, axis=1)


def layer_norm_simple_rnn(x, w, epsilon=1e-5, activation=np.tanh, go_backwards=False):
    """TF-Addons' LayerNormSimpleRNNCell over `x`: `h_t = f(gamma * LN(x W + h U) + b)`, a
    norm without shift."""
    h = np.zeros((x.shape[0], w["recurrent_kernel"].shape[0]))
    outputs = []
    for t in _steps(x, go_backwards):
        net = x[:, t] @ w["kernel"] + h @ w["recurrent_kernel"]
        h = activation(layer_norm(net, w["gamma"], 0.0, epsilon) + w["bias"])
        outputs.append(h)
    return np.stack(outputs, axis=1)


def dense(x, w, name):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def sparsemax(z, iterations=200):
    """The Euclidean projection of each row of `z` onto the simplex, by bisection on the
    threshold `tau` of `sum(max(z - tau, 0)) = 1` (no sorting: independent of the closed
    form)."""
    z = np.asarray(z, "float64")
    low = z.max(axis=-1, keepdims=True) - 1.0  # the sum is >= 1 here
    high = z.max(axis=-1, keepdims=True)  # and 0 here
    for _ in range(iterations):
        tau = (low + high) / 2
        above = np.maximum(z - tau, 0.0).sum(axis=-1, keepdims=True) > 1.0
        low, high = np.where(above, tau, low), np.where(above, high, tau)
    return np.maximum(z - (low + high) / 2, 0.0)
