"""The `SELU` activation layer for any fixed point (mean, variance)."""

import keras
from keras import ops

from keras_normkit import activations
from keras_normkit._validation import check_fixed_point, check_number


def as_floating(layer, inputs):
    """`inputs`, cast to the layer's compute dtype unless they are already floating.

    SELU and alpha dropout are maps of real values: integer (or bool) inputs are converted
    the way Keras converts them for `Dense`, instead of reaching a float-only kernel.
    """
    inputs = ops.convert_to_tensor(inputs)
    if "float" in keras.backend.standardize_dtype(inputs.dtype):
        return inputs
    return ops.cast(inputs, layer.compute_dtype)


def resolve_selu_constants(fixed_point, alpha, scale):
    """Validated `(fixed_point, alpha, scale)`: solved from the fixed point unless given."""
    fixed_point = check_fixed_point("fixed_point", fixed_point)
    if (alpha is None) != (scale is None):
        raise ValueError(
            "`alpha` and `scale` must be given together (or both left None to solve them "
            f"from `fixed_point`). Received: alpha={alpha}, scale={scale}"
        )
    if alpha is None:
        alpha, scale = activations.selu_parameters(*fixed_point)
    else:
        alpha = check_number("alpha", alpha, minimum=0.0, strict_minimum=True)
        scale = check_number("scale", scale, minimum=0.0, strict_minimum=True)
    return fixed_point, alpha, scale


@keras.saving.register_keras_serializable(package="keras_normkit")
class SELU(keras.layers.Layer):
    """Scaled exponential linear unit whose moment map has a chosen fixed point.

    `SELU()(x) = scale * x` for `x > 0` and `scale * alpha * (exp(x) - 1)` otherwise.
    `alpha` and `scale` are solved once, at construction, so that activations with mean
    and variance `fixed_point` keep them layer after layer (with LeCun-normal weights,
    i.e. weight sum 0 and squared-weight sum 1). The default `(0, 1)` gives Keras's
    standard SELU constants (alpha01 = 1.6733, lambda01 = 1.0507). The solved constants
    are stored as Python floats in the config, so loading a model never re-solves.

    Convention: the constants are solved for weights summing to 0 (`selu_parameters`'s
    default `weight_sum=0.0`). The bioinf-jku/SNNs reference notebook
    (`getSELUparameters.ipynb`) solves for a pre-activation distributed like the fixed
    point itself, i.e. `weight_sum=1.0`; the two agree only at mean 0. To reproduce that
    notebook's constants (e.g. alpha = 1.97690, lambda = 1.07385 for (-0.1, 2.0)), solve them
    and pass them explicitly: `alpha, scale = selu_parameters(-0.1, 2.0, weight_sum=1.0)`,
    then `SELU((-0.1, 2.0), alpha=alpha, scale=scale)` (and the same three arguments to
    `AlphaDropout`).

    Integer (or bool) inputs are cast to the layer's compute dtype (float32 by default)
    first, so `SELU()(np.array([-1, 0, 2]))` is the SELU of `[-1.0, 0.0, 2.0]`.

    The self-normalizing recipe is `Dense(units, kernel_initializer="lecun_normal")`
    followed by `SELU()` and, for regularization, `AlphaDropout(rate)` with the same
    fixed point.

    Args:
        fixed_point: `(mean, variance)` the network should converge to; variance > 0.
        alpha: Optional precomputed alpha for `fixed_point` (given together with `scale`;
            used when a config is loaded). Leave `None` to solve it.
        scale: Optional precomputed scale (lambda), see `alpha`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor of any shape (integer tensors are cast to the compute dtype).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import SELU, AlphaDropout
    >>> model = keras.Sequential([
    ...     keras.Input((16,)),
    ...     keras.layers.Dense(64, kernel_initializer="lecun_normal"),
    ...     SELU(),
    ...     AlphaDropout(0.05),
    ...     keras.layers.Dense(10),
    ... ])
    >>> tuple(model(np.zeros((2, 16), "float32")).shape)
    (2, 10)

    Reference: Klambauer et al., "Self-Normalizing Neural Networks", NeurIPS 2017,
    arXiv:1706.02515.
    """

    def __init__(self, fixed_point=(0.0, 1.0), alpha=None, scale=None, **kwargs):
        super().__init__(**kwargs)
        self.fixed_point, self.alpha, self.scale = resolve_selu_constants(fixed_point, alpha, scale)
        self.supports_masking = True
        self._build_at_init()

    def call(self, inputs):
        inputs = as_floating(self, inputs)
        return activations.selu(inputs, alpha=self.alpha, scale=self.scale)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"fixed_point": list(self.fixed_point), "alpha": self.alpha, "scale": self.scale}
        )
        return config
