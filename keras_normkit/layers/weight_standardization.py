"""`WeightStandardization`: scaled weight standardization of a layer's kernel (NF-ResNets)."""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_bool, check_number
from keras_normkit.activations import activation_gain

_CONV = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_CONV_TRANSPOSE = (
    keras.layers.Conv1DTranspose,
    keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose,
)
_DEPTHWISE = (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)
_SUPPORTED = "`Dense`, `Conv1D`, `Conv2D`, `Conv3D`, `DepthwiseConv1D`, `DepthwiseConv2D`"


def _kind(layer):
    # Transposed kernels are (..., out, in) and separable ones hold two kernels: rejected
    # (checked first: Keras's ConvNDTranspose classes are not subclasses of ConvND, but a
    # user subclass could be both).
    if isinstance(layer, (*_CONV_TRANSPOSE, keras.layers.SeparableConv1D)):
        return None
    if isinstance(layer, keras.layers.SeparableConv2D):
        return None
    if isinstance(layer, _DEPTHWISE):
        return "depthwise"
    if isinstance(layer, _CONV):
        return "conv"
    if isinstance(layer, keras.layers.Dense):
        return "dense"
    return None


def fan_in_axes(kind, rank):
    """The axes of a kernel of rank `rank` that hold one output unit's fan-in.

    `Dense` `(in, out)` and `ConvND` `(*kernel_size, in, out)`: every axis but the last.
    `DepthwiseConvND` `(*kernel_size, in, multiplier)`: the spatial axes (output channel
    `c * multiplier + m` sees input channel `c` only).
    """
    if kind == "depthwise":
        return tuple(range(rank - 2))
    return tuple(range(rank - 1))


def standardize_kernel(kernel, kind, epsilon, gain=None, activation_gain=1.0):
    """`gamma * g * (W - mean) * rsqrt(max(N * var, epsilon))` over each unit's fan-in.

    `kernel` in float32; `gain` the per-unit gain shaped like the kernel's unit axes (the
    last axis, or the last two of a depthwise kernel), or `None`.
    """
    axes = fan_in_axes(kind, len(kernel.shape))
    fan_in = int(np.prod([kernel.shape[a] for a in axes]))
    mean = ops.mean(kernel, axis=axes, keepdims=True)
    centered = kernel - mean
    variance = ops.mean(ops.square(centered), axis=axes, keepdims=True)
    scale = ops.rsqrt(ops.maximum(variance * fan_in, epsilon)) * activation_gain
    if gain is not None:
        scale = scale * gain
    return centered * scale


@keras.saving.register_keras_serializable(package="keras_normkit")
class WeightStandardization(keras.layers.Wrapper):
    """Scaled weight standardization: the wrapped layer's kernel is standardized per unit.

    The kernel the wrapped layer applies is, for each output unit `j` with fan-in `N`,

    `W_hat[:, j] = gamma * g_j * (W[:, j] - mean_j) / sqrt(max(N * var_j, epsilon))`

    where `mean_j` and `var_j` are the mean and (biased) variance of unit `j`'s `N`
    incoming weights, `g_j` a learned gain (initialized to 1; `gain=False` leaves it
    out) and `gamma` the gain of `activation`, the nonlinearity applied to this layer's
    *input*: `gamma = 1 / sqrt(Var f(z))` for `z ~ N(0, 1)`
    (`keras_normkit.activations.activation_gain`: `sqrt(2 / (1 - 1/pi))` for ReLU, 1 for
    the standard SELU). With `var_j` the variance over the fan-in, `N * var_j` is the
    squared norm of the centered weights, so each unit's weights have mean 0 and squared
    norm `(gamma g_j)^2`: a unit-variance input to `activation` leaves this layer with
    unit variance and zero mean, at initialization and during training, without batch
    statistics. `epsilon` bounds the denominator from below as the reference does
    (`rsqrt(max(N var, epsilon))`).

    The fan-in is axis 0 of a `Dense` kernel `(in, out)`, all axes but the last of a
    `ConvND` kernel `(*kernel_size, in, out)` and the spatial axes of a
    `DepthwiseConvND` kernel `(*kernel_size, in, multiplier)`. The wrapped layer's
    `kernel` variable is the raw `W`, its bias and activation apply after the
    standardized kernel. The standardization is computed in float32 (also under mixed
    precision). For deployment, `keras_normkit.utils.fold_weight_standardization(model)`
    replaces each wrapper by the plain layer with the kernel `W_hat`
    (`standardized_kernel()`), which computes the same function.

    Args:
        layer: A `keras.layers.Dense`, `Conv1D`, `Conv2D`, `Conv3D`, `DepthwiseConv1D`
            or `DepthwiseConv2D` instance.
        gain: Python bool, whether to learn the per-unit gain `g` (initialized to 1).
            Default: `True`.
        activation: The nonlinearity whose output this layer receives (`None`: a linear
            input, `gamma = 1`): the name of a Keras activation, a function or an
            activation layer (e.g. `keras_normkit.layers.SELU(fixed_point)` for a SELU at
            any fixed point). Only its gain is used; this layer does not apply it. It is
            saved in the config: give a name, a registered function or a layer (a
            `functools.partial` or a lambda does not save).
        epsilon: Float > 0, the lower bound of `N * var`. Default: `1e-4`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The input of the wrapped layer.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import WeightStandardization
    >>> layer = WeightStandardization(keras.layers.Conv2D(8, 3), activation="relu")
    >>> x = np.random.default_rng(0).normal(size=(2, 6, 6, 3)).astype("float32")
    >>> tuple(layer(x).shape)
    (2, 4, 4, 8)
    >>> w = keras.ops.convert_to_numpy(layer.standardized_kernel())
    >>> bool(np.allclose(w.mean(axis=(0, 1, 2)), 0.0, atol=1e-6))  # mean 0 per unit
    True
    >>> print(np.round((w ** 2).sum(axis=(0, 1, 2))[:3], 4))  # squared norm gamma^2
    [2.9339 2.9339 2.9339]

    Reference: Qiao et al., "Micro-Batch Training with Batch-Channel Normalization and
    Weight Standardization", arXiv:1903.10520, 2019; Brock, De, Smith, "Characterizing
    signal propagation to close the performance gap in unnormalized ResNets", ICLR 2021,
    arXiv:2101.08692, Section 4.
    """

    def __init__(self, layer, gain=True, activation=None, epsilon=1e-4, **kwargs):
        if not isinstance(layer, keras.layers.Layer):
            raise TypeError(
                f"`layer` must be a keras.layers.Layer instance. Received: layer={layer!r} "
                f"of type {type(layer).__name__}"
            )
        if _kind(layer) is None:
            raise ValueError(
                f"`layer` must be one of {_SUPPORTED}. Received: layer={layer!r} "
                f"of type {type(layer).__name__}"
            )
        super().__init__(layer, **kwargs)
        self.gain = check_bool("gain", gain)
        self.epsilon = check_number("epsilon", epsilon, minimum=0.0, strict_minimum=True)
        self.activation = activation
        self.activation_gain = activation_gain(activation)
        self._kind = _kind(layer)
        # The kernel is standardized in float32 and cast to the compute dtype explicitly.
        self.autocast = False

    # -- the kernel -----------------------------------------------------------------------

    def _unit_shape(self):
        kernel_shape = self.layer.kernel.shape
        return tuple(kernel_shape[-2:]) if self._kind == "depthwise" else (kernel_shape[-1],)

    def standardized_kernel(self):
        """The kernel `W_hat` the layer applies, a float32 tensor shaped like `W`."""
        gain = None
        if self.gain:
            gain = ops.reshape(ops.cast(self.g, "float32"), self._unit_shape())
        kernel = ops.cast(self.layer.kernel, "float32")
        return standardize_kernel(kernel, self._kind, self.epsilon, gain, self.activation_gain)

    def _apply_kernel(self, inputs, kernel):
        layer = self.layer
        if self._kind == "dense":
            return ops.matmul(inputs, kernel)
        padding = layer.padding
        if padding == "causal":  # Conv1D / DepthwiseConv1D
            left = layer.dilation_rate[0] * (layer.kernel_size[0] - 1)
            pads = [[0, 0], [left, 0], [0, 0]]
            if layer.data_format == "channels_first":
                pads = [[0, 0], [0, 0], [left, 0]]
            inputs = ops.pad(inputs, pads)
            padding = "valid"
        convolve = ops.depthwise_conv if self._kind == "depthwise" else ops.conv
        return convolve(
            inputs,
            kernel,
            strides=tuple(layer.strides),
            padding=padding,
            dilation_rate=layer.dilation_rate,
            data_format=layer.data_format,
        )

    # -- Keras API ------------------------------------------------------------------------

    def build(self, input_shape):
        if not self.layer.built:
            self.layer.build(input_shape)
        if self.gain:
            self.g = self.add_weight(
                name="g",
                shape=(int(np.prod(self._unit_shape())),),
                initializer="ones",
                dtype="float32",
                trainable=True,
                autocast=False,
            )
        self.built = True

    def call(self, inputs):
        compute_dtype = self.compute_dtype
        inputs = ops.cast(inputs, compute_dtype)
        kernel = ops.cast(self.standardized_kernel(), compute_dtype)
        outputs = self._apply_kernel(inputs, kernel)
        if getattr(self.layer, "bias", None) is not None:
            bias = ops.cast(self.layer.bias, compute_dtype)
            if self._kind != "dense" and self.layer.data_format == "channels_first":
                bias = ops.reshape(bias, (1, -1) + (1,) * (len(outputs.shape) - 2))
            outputs = outputs + bias
        if self.layer.activation is not None:
            outputs = self.layer.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def get_config(self):
        config = super().get_config()
        activation = self.activation
        if activation is not None and not isinstance(activation, str):
            activation = keras.saving.serialize_keras_object(activation)
        config.update({"gain": self.gain, "activation": activation, "epsilon": self.epsilon})
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        activation = config.get("activation")
        if isinstance(activation, dict):
            config["activation"] = keras.saving.deserialize_keras_object(
                activation, custom_objects=custom_objects
            )
        return super().from_config(config, custom_objects=custom_objects)
