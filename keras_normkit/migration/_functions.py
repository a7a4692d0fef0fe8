"""TF-Addons' activations that Keras 3 lacks or computes otherwise, as registered functions."""

import keras


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

    Example:

    >>> import numpy as np, keras
    >>> from keras_normkit.migration import tfa_gelu
    >>> y = tfa_gelu(np.array([-1.0, 0.0, 1.0], "float32"))
    >>> print(np.round(keras.ops.convert_to_numpy(y), 6))
    [-0.158808  0.        0.841192]
    """
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="keras_normkit")
def tfa_sparsemax(x):
    """Sparsemax over the last axis (Martins & Astudillo, 2016), as `tfa.activations.sparsemax`.

    `sparsemax(z) = max(z - tau(z), 0)`, where, with `z` sorted in decreasing order
    (`z_(1) >= z_(2) >= ...`), `k(z)` is the largest `k` with `1 + k z_(k) > sum_{j<=k} z_(j)`
    and `tau(z) = (sum_{j<=k(z)} z_(j) - 1) / k(z)`: the Euclidean projection of `z` onto
    the probability simplex (the outputs sum to 1). A row with an infinite or NaN entry
    gives NaN, as in TF-Addons. `load_tfa_model` puts it where a file has
    `Addons>sparsemax`. Keras's `keras.activations.sparsemax` (Keras 3.15) is not used: its
    threshold sums the cumulative sums over the support instead of taking the last one, so
    its outputs need not sum to 1 (docs/migration.md has the measured difference).

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

    Reference: Martins & Astudillo, "From Softmax to Sparsemax: A Sparse Model of Attention
    and Multi-Label Classification", ICML 2016, arXiv:1602.02068.
    """
    x = keras.ops.convert_to_tensor(x)
    n = x.shape[-1]
    z_sorted = keras.ops.flip(keras.ops.sort(x, axis=-1), axis=-1)
    cumulative = keras.ops.cumsum(z_sorted, axis=-1)
    k = keras.ops.arange(1, n + 1, dtype=x.dtype)
    support = keras.ops.cast(1.0 + k * z_sorted > cumulative, x.dtype)
    k_z = keras.ops.sum(support, axis=-1, keepdims=True)
    last = keras.ops.cast(keras.ops.maximum(k_z, 1.0) - 1.0, "int32")
    tau = (keras.ops.take_along_axis(cumulative, last, axis=-1) - 1.0) / k_z
    out = keras.ops.maximum(x - tau, 0.0)
    # No support (an infinite entry) or a NaN: NaN, as TF-Addons returns.
    invalid = keras.ops.logical_or(k_z == 0, keras.ops.isnan(cumulative[..., -1:]))
    return keras.ops.where(invalid, keras.ops.full_like(out, float("nan")), out)
