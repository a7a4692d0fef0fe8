"""Isometric initialisation: the delta-orthogonal convolution kernel and LSUV.

`ConvolutionDeltaOrthogonal` makes every convolution an exact isometry at initialisation
(dynamical isometry: all singular values of a deep linear CNN's input-output Jacobian are
1). `lsuv_initialize` is the data-driven layer-sequential unit-variance initialisation:
orthogonal kernels, then each kernel rescaled, layer after layer, until its pre-activation
output has the target variance on a batch of real inputs.

References: Xiao, Bahri, Sohl-Dickstein, Schoenholz, Pennington, "Dynamical Isometry and a
Mean Field Theory of CNNs: How to Train 10,000-Layer Vanilla Convolutional Neural
Networks", ICML 2018, arXiv:1806.05393. Mishkin, Matas, "All you need is a good init",
ICLR 2016, arXiv:1511.06422.
"""

import math
import warnings

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_int, check_number, check_seed
from keras_normkit.backend.keras_compat import call_count

__all__ = ["ConvolutionDeltaOrthogonal", "lsuv_initialize"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class ConvolutionDeltaOrthogonal(keras.initializers.Initializer):
    """Delta-orthogonal convolution kernel: an orthogonal matrix at the spatial centre.

    For a kernel `(k_1, ..., k_d, cin, cout)` with `cout >= cin`, the tap at the centre
    `((k_1 - 1) // 2, ..., (k_d - 1) // 2)` is `gain * H` with `H` a random `cin x cout`
    matrix with orthonormal rows (`H H^T = I`) and every other tap is zero. With `'same'`
    padding and stride 1 the convolution then maps each pixel `x_p -> gain * H^T x_p`, an
    isometry (for `gain = 1`): all singular values of the input-output Jacobian of a deep
    linear CNN are exactly 1, whatever its depth (Xiao et al., 2018). `cout < cin` cannot
    be an isometry and raises a `ValueError`. The centre `(k - 1) // 2` is the tap that
    Keras's `'same'` padding aligns with the output pixel, also for even `k`.

    Args:
        gain: Positive float, the multiplier of the orthogonal matrix (e.g. 1 for linear
            or tanh networks).
        seed: Optional int. As with Keras's own initializers, one instance returns the
            same kernel at every call; unseeded instances differ from each other.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.initializers import ConvolutionDeltaOrthogonal
    >>> kernel = keras.ops.convert_to_numpy(ConvolutionDeltaOrthogonal(seed=0)((3, 3, 4, 8)))
    >>> centre = kernel[1, 1]
    >>> bool(np.allclose(centre @ centre.T, np.eye(4), atol=1e-5))
    True
    >>> conv = keras.layers.Conv2D(8, 3, padding="same",
    ...                            kernel_initializer=ConvolutionDeltaOrthogonal())

    Reference: Xiao et al., "Dynamical Isometry and a Mean Field Theory of CNNs",
    ICML 2018, arXiv:1806.05393.
    """

    def __init__(self, gain=1.0, seed=None):
        self.gain = check_number("gain", gain, 0.0, strict_minimum=True)
        self.seed = check_seed(seed)
        self._orthogonal = keras.initializers.Orthogonal(gain=self.gain, seed=seed)

    def __call__(self, shape, dtype=None):
        shape = tuple(shape)
        if len(shape) < 3:
            raise ValueError(
                "`ConvolutionDeltaOrthogonal` initializes convolution kernels of shape "
                f"(k_1, ..., k_d, cin, cout), rank >= 3. Received: shape={shape}"
            )
        cin, cout = shape[-2], shape[-1]
        if cout < cin:
            raise ValueError(
                "A delta-orthogonal kernel needs cout >= cin (an isometry cannot reduce "
                f"the number of channels). Received: shape={shape} (cin={cin}, cout={cout})"
            )
        centre = self._orthogonal((cin, cout), dtype=dtype)  # orthonormal rows
        centre = ops.reshape(centre, (1,) * (len(shape) - 2) + (cin, cout))
        pad = [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in shape[:-2]] + [(0, 0), (0, 0)]
        return ops.pad(centre, pad)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed}


# --------------------------------------------------------------------------------------
# LSUV
# --------------------------------------------------------------------------------------


def _kernel_layers(model):
    """Top-level layers that own a `kernel` variable, in topological order."""
    found = []
    for layer in model.layers:
        if isinstance(layer, (keras.Model, keras.layers.RNN)):
            continue
        kernel = getattr(layer, "kernel", None)
        if isinstance(kernel, keras.Variable):
            found.append(layer)
    return found


def _pre_activation(layer, inputs):
    """The layer's output with its own activation switched off: `kernel . x + bias`."""
    activation = getattr(layer, "activation", None)
    if activation is None:
        return layer(inputs, training=False)
    layer.activation = keras.activations.linear
    try:
        return layer(inputs, training=False)
    finally:
        layer.activation = activation


def _validate_lsuv_args(model, target_variance, tolerance, max_iterations):
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model. Received: model={model!r}")
    if not isinstance(model, (keras.Sequential, keras.Function)):
        raise TypeError(
            "`model` must be a Sequential or Functional model (its graph of layers is "
            f"needed). Received: model of type {type(model).__name__}"
        )
    for name, value in (("target_variance", target_variance), ("tolerance", tolerance)):
        check_number(name, value, 0.0, strict_minimum=True)
    check_int("max_iterations", max_iterations, 1)


def lsuv_initialize(model, x, target_variance=1.0, tolerance=0.05, max_iterations=10, seed=None):
    """Layer-sequential unit-variance initialisation (LSUV) of a model's kernels, in place.

    Every kernel is first re-initialised orthogonally (`keras.initializers.Orthogonal`,
    kernels of rank > 2 flattened to `(prod(shape[:-1]), out)`). Then, layer by layer in
    the order of the graph, the pre-activation output `z = kernel . x + bias` (the layer's
    output with its own activation switched off) is computed on the batch `x` and the
    kernel is divided by `sqrt(Var(z) / target_variance)`, until
    `|Var(z) - target_variance| <= tolerance` or `max_iterations` rescalings were done.
    `Var(z)` is the variance of all entries of `z`. Layers without a `kernel` variable
    (activations, pooling, normalization, ...), nested models and recurrent layers are
    skipped; biases are left unchanged. Each layer is processed after every layer before
    it, so its input already has the final statistics.

    Args:
        model: A built (or buildable on `x`) Sequential or Functional `keras.Model`.
        x: A batch of inputs (array or list of arrays for a multi-input model), large
            enough for a stable variance estimate (the paper uses a mini-batch).
        target_variance: Positive float, the variance to reach (1 in the paper).
        tolerance: Positive float, the absolute tolerance on the variance.
        max_iterations: Positive int, the maximum number of rescalings per layer.
        seed: Optional int for the orthogonal re-initialisation.

    Returns:
        A list with one dict per processed layer, in order: `{"layer": name,
        "initial_variance": float (after the orthogonal init), "variance": float
        (final), "iterations": int (rescalings done), "converged": bool, "reason": None,
        or why the layer did not converge}`.

    Warns:
        UserWarning: naming every layer that did not converge and why: an output variance
            of 0 on `x` (a constant batch, e.g. all zeros: no rescaling of the kernel can
            reach `target_variance`), a non-finite variance (NaN/inf in `x`), or
            `max_iterations` rescalings without reaching the tolerance.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.initializers import lsuv_initialize
    >>> model = keras.Sequential([keras.Input((16,))] + [
    ...     keras.layers.Dense(32, activation="tanh") for _ in range(5)])
    >>> x = np.random.default_rng(0).normal(size=(256, 16)).astype("float32")
    >>> report = lsuv_initialize(model, x)
    >>> all(abs(r["variance"] - 1.0) <= 0.05 for r in report)
    True

    Reference: Mishkin and Matas, "All you need is a good init", ICLR 2016,
    arXiv:1511.06422.
    """
    _validate_lsuv_args(model, target_variance, tolerance, max_iterations)
    if isinstance(x, (list, tuple)):
        x = [np.asarray(a) for a in x]
        if any(len(a) == 0 for a in x):
            raise ValueError("`x` must be a non-empty batch. Received an empty array.")
    else:
        x = np.asarray(x)
        if x.ndim == 0 or len(x) == 0:
            raise ValueError(f"`x` must be a non-empty batch. Received: x.shape={x.shape}")
    if not model.built:
        model(x, training=False)
    layers = _kernel_layers(model)
    rng = np.random.default_rng(seed)
    for layer in layers:
        layer_seed = int(rng.integers(2**31 - 1))
        initializer = keras.initializers.Orthogonal(seed=layer_seed)
        layer.kernel.assign(initializer(tuple(layer.kernel.shape), dtype=layer.kernel.dtype))

    sequential = isinstance(model, keras.Sequential)
    hidden = x
    report = []
    for layer in model.layers if sequential else layers:
        if sequential and layer not in layers:
            hidden = layer(hidden, training=False)
            continue
        if sequential:
            inputs = hidden
        else:
            if call_count(layer) != 1:
                raise ValueError(
                    f"`lsuv_initialize` needs each kernel layer to be called once in the model; "
                    f"layer {layer.name!r} is called {call_count(layer)} times."
                )
            inputs = keras.Model(model.input, layer.input)(x, training=False)
        report.append(_rescale_layer(layer, inputs, target_variance, tolerance, max_iterations))
        if sequential:
            hidden = layer(hidden, training=False)
    failed = [r for r in report if not r["converged"]]
    if failed:
        details = "; ".join(f"{r['layer']!r}: {r['reason']}" for r in failed)
        warnings.warn(
            f"lsuv_initialize did not reach target_variance={target_variance} (tolerance "
            f"{tolerance}) for {len(failed)} of {len(report)} layer(s): {details}.",
            UserWarning,
            stacklevel=2,
        )
    return report


def _rescale_layer(layer, inputs, target_variance, tolerance, max_iterations):
    variance = float(np.var(ops.convert_to_numpy(_pre_activation(layer, inputs))))
    entry = {"layer": layer.name, "initial_variance": variance, "iterations": 0}
    for _ in range(max_iterations):
        if abs(variance - target_variance) <= tolerance or not variance > 0.0:
            break  # converged, or no rescaling can help (a variance of 0, or NaN)
        if not math.isfinite(variance):
            break
        factor = math.sqrt(variance / target_variance)
        layer.kernel.assign(layer.kernel / factor)
        entry["iterations"] += 1
        variance = float(np.var(ops.convert_to_numpy(_pre_activation(layer, inputs))))
    entry["variance"] = variance
    entry["converged"] = abs(variance - target_variance) <= tolerance
    entry["reason"] = None
    if entry["converged"]:
        pass
    elif variance == 0.0:
        entry["reason"] = (
            "its output variance on `x` is 0 (the layer's input is constant, e.g. an all-zero "
            "or constant batch), so no rescaling of the kernel can reach the target; pass a "
            "batch of real, varied inputs"
        )
    elif not math.isfinite(variance):
        entry["reason"] = (
            f"its output variance is not finite ({variance}); check `x` for NaN or inf values"
        )
    else:
        entry["reason"] = (
            f"its output variance is {variance:.4g} after max_iterations={max_iterations} "
            "rescalings; increase `max_iterations` or `tolerance`"
        )
    return entry
