"""`FilterResponseNormalization` and its activation `TLU` (Singh & Krishnan, CVPR 2020)."""

import keras
from keras import constraints, initializers, ops, regularizers

from keras_normkit._validation import check_bool, check_number


def _check_axis(axis, allow_list, name="axis"):
    axes = axis if allow_list and isinstance(axis, (list, tuple)) else [axis]
    expected = "an int or a non-empty list of ints" if allow_list else "an int"
    if not axes or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
        raise TypeError(f"`{name}` must be {expected}. Received: {name}={axis!r}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"`{name}` must not repeat an axis. Received: {name}={axis!r}")
    return list(axes) if isinstance(axis, (list, tuple)) else axis


def _resolve_axes(axis, rank, name="axis"):
    """The non-negative axes of `axis` for inputs of rank `rank`, sorted; a clear error if
    one is out of bounds or is the batch axis."""
    resolved = []
    for a in axis if isinstance(axis, list) else [axis]:
        if not -rank <= a < rank:
            raise ValueError(
                f"`{name}` {a} is out of bounds for inputs of rank {rank}. Received: {name}={axis}"
            )
        resolved.append(a % rank)
    if 0 in resolved:
        raise ValueError(f"`{name}` must not include the batch axis 0. Received: {name}={axis}")
    if len(set(resolved)) != len(resolved):
        raise ValueError(
            f"`{name}` names the same axis twice for inputs of rank {rank}. Received: {name}={axis}"
        )
    return sorted(resolved)


@keras.saving.register_keras_serializable(package="keras_normkit")
class FilterResponseNormalization(keras.layers.Layer):
    """Filter response normalization: `y = gamma * x / sqrt(nu2 + epsilon) + beta`.

    Per example and per channel, `nu2 = mean(x^2)` is the mean squared activation over the
    spatial axes (every axis but the batch axis and the channel axis `axis`); the input is
    divided by `sqrt(nu2 + epsilon)` (no mean is subtracted) and scaled and shifted by the
    learned per-channel `gamma` and `beta`. Nothing depends on the other examples of the
    batch, so it behaves the same for a batch of 1 and of 256, in training and inference.
    The paper follows it by the thresholded activation `TLU` (`max(y, tau)`), which takes
    the place of the mean subtraction.

    With `learned_epsilon=True` the epsilon used is `|epsilon| + |epsilon_l|`, with a
    trainable scalar `epsilon_l` (initial value `1e-4`): the paper's remedy for inputs with
    few spatial positions (at 1x1, `x / sqrt(x^2 + epsilon)` is nearly a sign function).

    A mask (shape: the input's without the channel axis, e.g. `(batch, time)` for
    sequences) removes the masked positions from the mean; the mask is passed on. Inputs
    in float16/bfloat16 are normalized in float32 and cast back.

    TF-Addons' `tfa.layers.FilterResponseNormalization(axis=[1, 2])` is this layer with
    `axis=-1` on 4-D inputs; it stores `gamma`, `beta` with shape `(1, 1, 1, C)` and
    `learned_epsilon` with shape `(1,)` (here `(C,)`, `(C,)` and `()`).
    `keras_normkit.migration.load_tfa_model` translates it.

    Args:
        axis: Integer, the channel axis: the axis that has its own `gamma` and `beta` and is
            not averaged over. Default: `-1` (channels last; `1` for channels first).
        epsilon: Float >= 0, added to `nu2`. Default: `1e-6` (the paper's).
        learned_epsilon: Boolean, whether to add a trainable `|epsilon_l|` to `epsilon`.
            Default: `False`.
        beta_initializer: Initializer of `beta`. Default: `"zeros"`.
        gamma_initializer: Initializer of `gamma`. Default: `"ones"`.
        beta_regularizer: Optional regularizer of `beta`.
        gamma_regularizer: Optional regularizer of `gamma`.
        beta_constraint: Optional constraint of `beta`.
        gamma_constraint: Optional constraint of `gamma`.
        learned_epsilon_constraint: Optional constraint of `epsilon_l`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor of rank >= 2 whose channel dimension is known, e.g. `(batch,
            height, width, channels)`. At rank 2 there is no spatial axis and `nu2 = x^2`.
        mask: Optional boolean tensor with the input's shape without the channel axis (or
            its leading axes, such as `(batch, time)`).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import FilterResponseNormalization
    >>> x = np.random.default_rng(0).normal(size=(2, 4, 4, 3)).astype("float32")
    >>> layer = FilterResponseNormalization()
    >>> y = keras.ops.convert_to_numpy(layer(x))
    >>> print(np.round(np.mean(y**2, axis=(1, 2)), 4))  # nu2 of the output: 1
    [[1. 1. 1.]
     [1. 1. 1.]]

    Reference: Singh & Krishnan, "Filter Response Normalization Layer: Eliminating Batch
    Dependence in the Training of Deep Neural Networks", CVPR 2020, arXiv:1911.09737.
    """

    def __init__(
        self,
        axis=-1,
        epsilon=1e-6,
        learned_epsilon=False,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        learned_epsilon_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.axis = _check_axis(axis, allow_list=False)
        self.epsilon = check_number("epsilon", epsilon, 0.0)
        self.learned_epsilon = check_bool("learned_epsilon", learned_epsilon)
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.beta_regularizer = regularizers.get(beta_regularizer)
        self.gamma_regularizer = regularizers.get(gamma_regularizer)
        self.beta_constraint = constraints.get(beta_constraint)
        self.gamma_constraint = constraints.get(gamma_constraint)
        self.learned_epsilon_constraint = constraints.get(learned_epsilon_constraint)
        self.supports_masking = True
        self.autocast = False

    def build(self, input_shape):
        channel = _resolve_axes(self.axis, len(input_shape))[0]
        if input_shape[channel] is None:
            raise ValueError(
                "FilterResponseNormalization: the channel dimension (`axis`) must be known. "
                f"Received: axis={self.axis} for an input of shape {tuple(input_shape)}"
            )
        shape = (input_shape[channel],)
        self._broadcast_shape = tuple(
            input_shape[channel] if a == channel else 1 for a in range(len(input_shape))
        )
        self._channel_axis = channel
        self._spatial_axes = tuple(a for a in range(1, len(input_shape)) if a != channel)
        self.gamma = self.add_weight(
            shape=shape,
            name="gamma",
            initializer=self.gamma_initializer,
            regularizer=self.gamma_regularizer,
            constraint=self.gamma_constraint,
        )
        self.beta = self.add_weight(
            shape=shape,
            name="beta",
            initializer=self.beta_initializer,
            regularizer=self.beta_regularizer,
            constraint=self.beta_constraint,
        )
        if self.learned_epsilon:
            self.epsilon_l = self.add_weight(
                shape=(),
                name="learned_epsilon",
                initializer=initializers.Constant(1e-4),
                constraint=self.learned_epsilon_constraint,
            )

    def call(self, inputs, mask=None):
        x = ops.convert_to_tensor(inputs)
        dtype = keras.backend.result_type(x.dtype, "float32")
        x32 = ops.cast(x, dtype)
        squares = ops.square(x32)
        if not self._spatial_axes:
            nu2 = squares
        elif mask is None:
            nu2 = ops.mean(squares, axis=self._spatial_axes, keepdims=True)
        else:
            weights = ops.cast(mask, dtype)
            for _ in range(len(x.shape) - 1 - len(weights.shape)):  # e.g. (batch, time)
                weights = ops.expand_dims(weights, -1)
            weights = ops.expand_dims(weights, self._channel_axis) * ops.ones_like(x32)
            total = ops.sum(squares * weights, axis=self._spatial_axes, keepdims=True)
            count = ops.sum(weights, axis=self._spatial_axes, keepdims=True)
            nu2 = total / ops.maximum(count, 1.0)
        epsilon = ops.abs(ops.cast(self.epsilon, dtype))
        if self.learned_epsilon:
            epsilon = epsilon + ops.abs(ops.cast(self.epsilon_l, dtype))
        gamma = ops.reshape(ops.cast(self.gamma, dtype), self._broadcast_shape)
        beta = ops.reshape(ops.cast(self.beta, dtype), self._broadcast_shape)
        outputs = gamma * (x32 * ops.rsqrt(nu2 + epsilon)) + beta
        return ops.cast(outputs, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        _resolve_axes(self.axis, len(input_shape))
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "axis": self.axis,
                "epsilon": self.epsilon,
                "learned_epsilon": self.learned_epsilon,
                "beta_initializer": initializers.serialize(self.beta_initializer),
                "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "beta_regularizer": regularizers.serialize(self.beta_regularizer),
                "gamma_regularizer": regularizers.serialize(self.gamma_regularizer),
                "beta_constraint": constraints.serialize(self.beta_constraint),
                "gamma_constraint": constraints.serialize(self.gamma_constraint),
                "learned_epsilon_constraint": constraints.serialize(
                    self.learned_epsilon_constraint
                ),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_normkit")
class TLU(keras.layers.Layer):
    """Thresholded linear unit: `y = max(x, tau)`, with a learned threshold `tau`.

    The activation the paper pairs with `FilterResponseNormalization`: FRN subtracts no
    mean, so its output can sit away from zero, and a ReLU's fixed threshold at 0 could
    then leave units dead; TLU learns where to cut instead (`tau` starts at 0, where
    `TLU` is a ReLU). With `affine=True` it is `y = max(x, alpha * x + tau)`, with a
    learned `alpha` too (TF-Addons' TLU-Affine; a leaky ReLU for `tau = 0`).

    As in Keras's `PReLU`, `tau` (and `alpha`) have one value per element of the input
    (TF-Addons' `tfa.layers.TLU`) unless `shared_axes` names axes along which one value is
    shared: the paper's per-channel threshold is `shared_axes=[1, 2]` for images
    `(batch, height, width, channels)`.

    Args:
        shared_axes: Optional integer or list of integers, the axes (not the batch axis)
            along which the parameters are shared. Default: `None` (one per element).
        affine: Boolean, whether to learn the slope `alpha` as well. Default: `False`.
        tau_initializer: Initializer of `tau`. Default: `"zeros"`.
        tau_regularizer: Optional regularizer of `tau`.
        tau_constraint: Optional constraint of `tau`.
        alpha_initializer: Initializer of `alpha` (`affine=True`). Default: `"zeros"`.
        alpha_regularizer: Optional regularizer of `alpha`.
        alpha_constraint: Optional constraint of `alpha`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor whose dimensions, except the batch axis and `shared_axes`, are
            known. A mask is passed on.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import TLU
    >>> layer = TLU(shared_axes=1, tau_initializer=keras.initializers.Constant(-0.5))
    >>> y = layer(np.array([[[-2.0, -0.25, 1.0]]], "float32"))
    >>> print(keras.ops.convert_to_numpy(y), layer.tau.shape)
    [[[-0.5  -0.25  1.  ]]] (1, 3)

    Reference: Singh & Krishnan, "Filter Response Normalization Layer: Eliminating Batch
    Dependence in the Training of Deep Neural Networks", CVPR 2020, arXiv:1911.09737.
    """

    def __init__(
        self,
        shared_axes=None,
        affine=False,
        tau_initializer="zeros",
        tau_regularizer=None,
        tau_constraint=None,
        alpha_initializer="zeros",
        alpha_regularizer=None,
        alpha_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if shared_axes is not None:
            shared_axes = _check_axis(shared_axes, allow_list=True, name="shared_axes")
        self.shared_axes = shared_axes
        self.affine = check_bool("affine", affine)
        self.tau_initializer = initializers.get(tau_initializer)
        self.tau_regularizer = regularizers.get(tau_regularizer)
        self.tau_constraint = constraints.get(tau_constraint)
        self.alpha_initializer = initializers.get(alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.alpha_constraint = constraints.get(alpha_constraint)
        self.supports_masking = True

    def _parameter_shape(self, input_shape):
        shape = list(input_shape[1:])
        if self.shared_axes is not None:
            for a in _resolve_axes(self.shared_axes, len(input_shape), "shared_axes"):
                shape[a - 1] = 1
        if any(s is None for s in shape):
            raise ValueError(
                "TLU: the dimensions of the input that are not shared must be known. "
                f"Received: shared_axes={self.shared_axes} for an input of shape "
                f"{tuple(input_shape)}"
            )
        return tuple(shape)

    def build(self, input_shape):
        shape = self._parameter_shape(input_shape)
        self.tau = self.add_weight(
            shape=shape,
            name="tau",
            initializer=self.tau_initializer,
            regularizer=self.tau_regularizer,
            constraint=self.tau_constraint,
        )
        if self.affine:
            self.alpha = self.add_weight(
                shape=shape,
                name="alpha",
                initializer=self.alpha_initializer,
                regularizer=self.alpha_regularizer,
                constraint=self.alpha_constraint,
            )

    def call(self, inputs):
        threshold = self.tau
        if self.affine:
            threshold = threshold + self.alpha * inputs
        return ops.maximum(inputs, threshold)

    def compute_output_shape(self, input_shape):
        if self.shared_axes is not None:
            _resolve_axes(self.shared_axes, len(input_shape), "shared_axes")
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "shared_axes": self.shared_axes,
                "affine": self.affine,
                "tau_initializer": initializers.serialize(self.tau_initializer),
                "tau_regularizer": regularizers.serialize(self.tau_regularizer),
                "tau_constraint": constraints.serialize(self.tau_constraint),
                "alpha_initializer": initializers.serialize(self.alpha_initializer),
                "alpha_regularizer": regularizers.serialize(self.alpha_regularizer),
                "alpha_constraint": constraints.serialize(self.alpha_constraint),
            }
        )
        return config
