"""`ScaleNormalization`: one learned scale times the input divided by its L2 norm."""

import math

import keras
from keras import ops

from keras_normkit._validation import check_number


def _validate_axis(axis):
    axes = axis if isinstance(axis, (list, tuple)) else [axis]
    if not axes or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
        raise TypeError(
            f"`axis` must be an int or a non-empty list of ints. Received: axis={axis!r}"
        )
    if len(set(axes)) != len(axes):
        raise ValueError(f"`axis` must not repeat an axis. Received: axis={axis!r}")
    return list(axes) if isinstance(axis, (list, tuple)) else axis


@keras.saving.register_keras_serializable(package="keras_normkit")
class ScaleNormalization(keras.layers.Layer):
    """Scale normalization: `y = g * x / max(||x||, epsilon)`, one learned scalar `g`.

    The L2 norm `||x||` is taken per example over `axis` (the `d` features), so every
    example is projected onto the sphere of radius `g`. `g` is a single trainable scalar
    initialized to `sqrt(d)`, which makes the initial output have unit root mean square,
    like `LayerNormalization` with gain 1 (and `d` parameters fewer, no mean subtraction).
    `epsilon` bounds the norm from below so an all-zero input gives zero, not NaN. Inputs
    in float16/bfloat16 are normalized in float32 and cast back.

    Args:
        axis: Integer or list of integers, the axis (axes) holding the features. Default:
            `-1`.
        epsilon: Float > 0, the smallest norm divided by. Default: `1e-5` (as in the
            paper's code).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor of rank >= 2 whose `axis` dimensions are known.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import ScaleNormalization
    >>> layer = ScaleNormalization()
    >>> y = layer(np.array([[3.0, 4.0, 0.0, 0.0]], "float32"))
    >>> print(np.round(keras.ops.convert_to_numpy(y), 4))  # g = sqrt(4) = 2, ||x|| = 5
    [[1.2 1.6 0.  0. ]]

    Reference: Nguyen & Salazar, "Transformers without Tears: Improving the Normalization
    of Self-Attention", IWSLT 2019, arXiv:1910.05895.
    """

    def __init__(self, axis=-1, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.axis = _validate_axis(axis)
        self.epsilon = check_number("epsilon", epsilon, 0.0, strict_minimum=True)
        self.supports_masking = True
        self.autocast = False

    def _axes(self, rank):
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        resolved = []
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(
                    f"`axis` {a} is out of bounds for inputs of rank {rank}. "
                    f"Received: axis={self.axis}"
                )
            resolved.append(a % rank)
        if 0 in resolved:
            raise ValueError(
                f"`axis` must not include the batch axis 0. Received: axis={self.axis}"
            )
        return sorted(resolved)

    def build(self, input_shape):
        axes = self._axes(len(input_shape))
        sizes = [input_shape[a] for a in axes]
        if any(s is None for s in sizes):
            raise ValueError(
                f"The dimensions on `axis` must be known. Received: axis={self.axis} "
                f"for an input of shape {input_shape}"
            )
        self._reduction_axes = tuple(axes)
        self.scale = self.add_weight(
            shape=(),
            name="scale",
            initializer=keras.initializers.Constant(math.sqrt(math.prod(sizes))),
        )

    def call(self, inputs):
        x = ops.convert_to_tensor(inputs)
        dtype = keras.backend.result_type(x.dtype, "float32")
        x32 = ops.cast(x, dtype)
        squared_norm = ops.sum(ops.square(x32), axis=self._reduction_axes, keepdims=True)
        inverse_norm = ops.rsqrt(ops.maximum(squared_norm, self.epsilon**2))
        outputs = x32 * (ops.cast(self.scale, dtype) * inverse_norm)
        return ops.cast(outputs, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        self._axes(len(input_shape))
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis, "epsilon": self.epsilon})
        return config
