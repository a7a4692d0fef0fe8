"""`WeightNormalization`: a wrapper reparameterizing a layer's kernel as `w = g * v / ||v||`."""

import keras
from keras import ops

from keras_normkit._validation import check_bool

_EPSILON = 1e-12  # the smallest squared norm of `v` divided by
_VARIANCE_EPSILON = 1e-10  # added to the batch variance in the data-dependent initialization

_CONV = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_CONV_TRANSPOSE = (
    keras.layers.Conv1DTranspose,
    keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose,
)
_SUPPORTED = "`Dense`, `Conv1D`, `Conv2D`, `Conv3D`, `Conv1DTranspose`, `Conv2DTranspose`, " + (
    "`Conv3DTranspose`"
)


def _kind(layer):
    # Separable, depthwise and other kernels are not per-output-unit columns: rejected.
    if isinstance(layer, _CONV_TRANSPOSE):
        return "conv_transpose"
    if isinstance(layer, _CONV):
        return "conv"
    if isinstance(layer, keras.layers.Dense):
        return "dense"
    return None


@keras.saving.register_keras_serializable(package="keras_normkit")
class WeightNormalization(keras.layers.Wrapper):
    """Weight normalization: the wrapped layer's kernel becomes `w = g * v / ||v||`.

    Each output unit's weight vector `v` (a kernel column) is divided by its L2 norm and
    multiplied by a learned scalar `g`, decoupling the length of the weight vector from its
    direction. The norm is taken per output unit: over axis 0 of a `Dense` kernel
    `(in, out)`, over all but the last axis of a `ConvND` kernel `(*kernel_size, in, out)`
    and over all but the second-to-last axis of a `ConvNDTranspose` kernel
    `(*kernel_size, out, in)`. The wrapped layer's own `kernel` variable is `v` and its
    `bias` is the bias; the wrapper adds `g` (one per output unit), initialized to `||v||`
    so the wrapped layer starts out computing what it computed before.

    With `data_init=True` the first training call (`training=True`, e.g. the first batch
    of `fit`, compiled or not) initializes the layer from that batch (the paper's
    data-dependent initialization): with `t = x * v / ||v||` the pre-activation with unit
    scale, the scale becomes `1 / std(t)` and the bias `-mean(t) / std(t)` per output unit,
    so the pre-activation has mean 0 and variance 1 on that batch; the output of that call
    already uses them. This happens once: a non-trainable `initialized` flag is set and
    saved with the weights, so a reloaded model never re-initializes. The initial values
    are stored in two non-trainable offsets (`g_offset`, `bias_offset`) added to `g` and
    the bias, because a compiled train step can update non-trainable variables on every
    backend (JAX's stateless step drops updates of trainable ones); gradients with respect
    to `g` and the bias are unchanged by an additive offset. The effective values are the
    `scale` and `effective_bias` properties. The wrapped layer's activation is applied
    after the normalized pre-activation. Under mixed precision the norm is computed in
    float32.

    Weights, in `get_weights()` order: `g`, then (`data_init=True` only) `initialized`,
    `g_offset` and, if the wrapped layer has a bias, `bias_offset`, then the wrapped
    layer's `kernel` (`v`) and `bias`.

    Porting from TF-Addons' `tfa.layers.WeightNormalization`: its `get_weights()` is
    `[g, v, bias, initialized]` (`g` the wrapper's own trainable weight, `v` the wrapped
    layer's kernel, then its bias, then the boolean flag), followed with `data_init=True`
    by `[v_copy, bias_copy]`, the variables of the non-trainable clone it runs for the
    data-dependent initialization (unused once initialized: drop them). Map them as
    `[g, float(initialized), zeros_like(g), zeros_like(bias), v, bias]` for
    `WeightNormalization(..., data_init=True)` (without `zeros_like(bias)` and `bias` for a
    layer without bias) and `[g, v, bias]` for `data_init=False`, and `set_weights` them.
    The forward pass is the same (`w = g * v / ||v||`, bias, activation). Port initialized
    models: TF-Addons' own data-dependent initialization measures the pre-activation with
    the raw `v` rather than `v / ||v||`, so on an uninitialized model the two differ.
    TF-Addons normalizes a transposed convolution's kernel per *input* channel; this layer
    normalizes per output channel, so only Dense and ConvND weights port as they are.

    Args:
        layer: A `keras.layers.Dense`, `Conv1D`, `Conv2D`, `Conv3D`, `Conv1DTranspose`,
            `Conv2DTranspose` or `Conv3DTranspose` instance.
        data_init: Python bool, whether to run the data-dependent initialization on the
            first training batch. Default: `True`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The input of the wrapped layer.
        training: Python bool; the first call with `training=True` runs the
            data-dependent initialization.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import WeightNormalization
    >>> x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    >>> layer = WeightNormalization(keras.layers.Dense(2))
    >>> y = keras.ops.convert_to_numpy(layer(x, training=True))  # data-dependent init
    >>> print(np.round(y.mean(axis=0), 4) + 0.0, np.round(y.var(axis=0), 4))
    [0. 0.] [1. 1.]
    >>> print(float(keras.ops.convert_to_numpy(layer.initialized)))
    1.0

    Reference: Salimans & Kingma, "Weight Normalization: A Simple Reparameterization to
    Accelerate Training of Deep Neural Networks", NIPS 2016, arXiv:1602.07868.
    """

    def __init__(self, layer, data_init=True, **kwargs):
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
        self.data_init = check_bool("data_init", data_init)
        self._kind = _kind(layer)
        # Inputs are cast explicitly; the wrapper's own weights are created with
        # autocast=False so they are always read in float32.
        self.autocast = False

    # -- geometry -------------------------------------------------------------------------

    def _norm_axes(self, rank):
        if self._kind == "conv_transpose":
            return tuple(a for a in range(rank) if a != rank - 2)
        return tuple(range(rank - 1))

    def _channel_axis(self, output_rank):
        if self._kind != "dense" and self.layer.data_format == "channels_first":
            return 1
        return output_rank - 1

    def _broadcast(self, per_unit, output_rank):
        shape = [1] * output_rank
        shape[self._channel_axis(output_rank)] = -1
        return ops.reshape(per_unit, shape)

    def _normalized_kernel(self):
        v = ops.cast(self.layer.kernel, "float32")
        axes = self._norm_axes(len(v.shape))
        squared = ops.sum(ops.square(v), axis=axes, keepdims=True)
        return v * ops.rsqrt(ops.maximum(squared, _EPSILON))

    def _apply_kernel(self, inputs, kernel):
        layer = self.layer
        if self._kind == "dense":
            return ops.matmul(inputs, kernel)
        if self._kind == "conv":
            padding = layer.padding
            if padding == "causal":
                left = layer.dilation_rate[0] * (layer.kernel_size[0] - 1)
                pads = [[0, 0], [left, 0], [0, 0]]
                if layer.data_format == "channels_first":
                    pads = [[0, 0], [0, 0], [left, 0]]
                inputs = ops.pad(inputs, pads)
                padding = "valid"
            return ops.conv(
                inputs,
                kernel,
                strides=list(layer.strides),
                padding=padding,
                dilation_rate=layer.dilation_rate,
                data_format=layer.data_format,
            )
        return ops.conv_transpose(
            inputs,
            kernel,
            strides=list(layer.strides),
            padding=layer.padding,
            output_padding=layer.output_padding,
            dilation_rate=layer.dilation_rate,
            data_format=layer.data_format,
        )

    # -- Keras API ------------------------------------------------------------------------

    def build(self, input_shape):
        if not self.layer.built:
            self.layer.build(input_shape)
        kernel = self.layer.kernel
        units = kernel.shape[-2] if self._kind == "conv_transpose" else kernel.shape[-1]
        has_bias = getattr(self.layer, "bias", None) is not None

        def norm_of_v(shape, dtype=None):
            v = ops.cast(kernel, "float32")
            norm = ops.sqrt(ops.sum(ops.square(v), axis=self._norm_axes(len(v.shape))))
            return ops.cast(ops.reshape(norm, shape), dtype or "float32")

        self.g = self.add_weight(
            name="g",
            shape=(units,),
            initializer=norm_of_v,
            dtype="float32",
            trainable=True,
            autocast=False,
        )
        if self.data_init:
            self.initialized = self.add_weight(
                name="initialized",
                shape=(),
                initializer="zeros",
                dtype="float32",
                trainable=False,
                autocast=False,
            )
            self.g_offset = self.add_weight(
                name="g_offset",
                shape=(units,),
                initializer="zeros",
                dtype="float32",
                trainable=False,
                autocast=False,
            )
            self.bias_offset = None
            if has_bias:
                self.bias_offset = self.add_weight(
                    name="bias_offset",
                    shape=(units,),
                    initializer="zeros",
                    dtype="float32",
                    trainable=False,
                    autocast=False,
                )
        self.built = True

    @property
    def scale(self):
        """The effective per-unit scale `g` (plus the data-init offset)."""
        g = ops.convert_to_tensor(self.g)
        return g + self.g_offset if self.data_init else g

    @property
    def effective_bias(self):
        """The effective bias (plus the data-init offset), or `None` without a bias."""
        if getattr(self.layer, "bias", None) is None:
            return None
        bias = ops.cast(self.layer.bias, "float32")
        return bias + self.bias_offset if self.data_init else bias

    def call(self, inputs, training=None):
        compute_dtype = self.compute_dtype
        inputs = ops.cast(inputs, compute_dtype)
        direction = ops.cast(self._normalized_kernel(), compute_dtype)
        # The layer is linear in its kernel: x * (g v/||v||) = g * (x * v/||v||).
        t = self._apply_kernel(inputs, direction)
        rank = len(t.shape)
        g = ops.cast(self.g, "float32")
        has_bias = getattr(self.layer, "bias", None) is not None
        bias = ops.cast(self.layer.bias, "float32") if has_bias else None
        if self.data_init:
            g_offset = ops.convert_to_tensor(self.g_offset)
            bias_offset = ops.convert_to_tensor(self.bias_offset) if has_bias else None
            if training:
                channel = self._channel_axis(rank)
                stats_axes = tuple(a for a in range(rank) if a != channel)
                t32 = ops.stop_gradient(ops.cast(t, "float32"))
                mean = ops.mean(t32, axis=stats_axes)
                variance = ops.mean(ops.square(t32 - self._broadcast(mean, rank)), axis=stats_axes)
                inverse_std = ops.rsqrt(variance + _VARIANCE_EPSILON)
                done = ops.greater(ops.convert_to_tensor(self.initialized), 0.5)
                g_const = ops.stop_gradient(g)
                g_offset = ops.where(done, g_offset, inverse_std - g_const)
                self.g_offset.assign(g_offset)
                if has_bias:
                    b_const = ops.stop_gradient(bias)
                    bias_offset = ops.where(done, bias_offset, -mean * inverse_std - b_const)
                    self.bias_offset.assign(bias_offset)
                self.initialized.assign(ops.ones((), "float32"))
            g = g + g_offset
            if has_bias:
                bias = bias + bias_offset
        outputs = t * ops.cast(self._broadcast(g, rank), compute_dtype)
        if has_bias:
            outputs = outputs + ops.cast(self._broadcast(bias, rank), compute_dtype)
        if self.layer.activation is not None:
            outputs = self.layer.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"data_init": self.data_init})
        return config
