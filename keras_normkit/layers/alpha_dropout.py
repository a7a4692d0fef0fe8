"""Alpha dropout that preserves any SELU fixed point (mean, variance)."""

import math
import warnings

import keras
from keras import ops

from keras_normkit import activations
from keras_normkit._validation import check_number, check_seed
from keras_normkit.backend import keras_compat
from keras_normkit.layers.selu import SELU, as_floating, resolve_selu_constants


def _selu_constants_of(layer):
    """`(fixed_point, alpha, scale)` of a SELU layer or a layer with a 'selu' activation."""
    if isinstance(layer, SELU):
        return tuple(layer.fixed_point), layer.alpha, layer.scale
    activation = getattr(layer, "activation", None)
    if activation is not None and activation in (keras.activations.selu, activations.selu):
        return (0.0, 1.0), activations.ALPHA01, activations.LAMBDA01
    return None


def _same(a, b):
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b, strict=True))


@keras.saving.register_keras_serializable(package="keras_normkit")
class AlphaDropout(keras.layers.Layer):
    """Alpha dropout for self-normalizing networks with any fixed point.

    During training each unit is kept with probability `q = 1 - rate`; dropped units are
    set to the SELU's negative saturation `alpha' = -scale * alpha`, and the result is
    mapped by `y -> a*y + b` with
    `a = sqrt(nu / (q((1-q)(alpha' - mu)^2 + nu)))` and `b = mu - a(q*mu + (1-q)alpha')`,
    so inputs with mean `mu` and variance `nu` (the `fixed_point`) keep both in
    expectation. For the default fixed point `(0, 1)` this is exactly Keras's
    `keras.layers.AlphaDropout`. At inference the layer is the identity. Use it after a
    `SELU` layer with the same `fixed_point`: when it is called, in a functional or
    `Sequential` model, on the output of a `SELU` (or of a layer with Keras's `"selu"`
    activation, whose fixed point is `(0, 1)`) whose fixed point or constants differ, a
    `UserWarning` names both.

    Convention: like `SELU`, the constants are solved by `selu_parameters` for weights
    summing to 0. To match the bioinf-jku/SNNs notebook (`getSELUparameters.ipynb`, which
    solves with weight sum 1), pass the constants of
    `selu_parameters(*fixed_point, weight_sum=1.0)` as `alpha` and `scale`, to both this
    layer and its `SELU`.

    Integer (or bool) inputs are cast to the layer's compute dtype, in training and at
    inference, as `SELU` does.

    Args:
        rate: Float in [0, 1), the probability of dropping a unit.
        fixed_point: `(mean, variance)` of the activations, as in `SELU`.
        noise_shape: Optional shape of the binary mask, broadcast against the inputs;
            `None` entries take the input's dimension (e.g. `(None, 1, None)` shares the
            mask across time steps).
        seed: Optional Python integer seed.
        alpha: Optional precomputed SELU alpha for `fixed_point` (with `scale`).
        scale: Optional precomputed SELU scale for `fixed_point` (with `alpha`).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor of any shape (integer tensors are cast to the compute dtype).
        training: Python boolean, whether to apply dropout (training mode) or return
            the inputs unchanged (inference mode).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import AlphaDropout
    >>> layer = AlphaDropout(0.1, fixed_point=(0.0, 1.0), seed=0)
    >>> x = np.random.default_rng(0).normal(size=(1000, 64)).astype("float32")
    >>> y = keras.ops.convert_to_numpy(layer(x, training=True))
    >>> bool(abs(y.mean()) < 0.05), bool(abs(y.var() - 1.0) < 0.05)  # (0, 1) is kept
    (True, True)

    Reference: Klambauer et al., "Self-Normalizing Neural Networks", NeurIPS 2017,
    arXiv:1706.02515.
    """

    def __init__(
        self,
        rate,
        fixed_point=(0.0, 1.0),
        noise_shape=None,
        seed=None,
        alpha=None,
        scale=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        rate = check_number("rate", rate, 0.0, 1.0, strict_maximum=True)
        if noise_shape is not None:
            try:
                noise_shape = tuple(None if d is None else int(d) for d in noise_shape)
            except (TypeError, ValueError):
                raise ValueError(
                    "`noise_shape` must be a tuple of positive integers or None entries. "
                    f"Received: noise_shape={noise_shape!r}"
                ) from None
            if any(d is not None and d <= 0 for d in noise_shape):
                raise ValueError(
                    "`noise_shape` entries must be positive integers or None. "
                    f"Received: noise_shape={noise_shape!r}"
                )
        seed = check_seed(seed)
        self.rate = rate
        self.fixed_point, self.alpha, self.scale = resolve_selu_constants(fixed_point, alpha, scale)
        self.noise_shape = noise_shape
        self.seed = seed
        self._a, self._b, self._saturation = activations.alpha_dropout_parameters(
            self.rate, *self.fixed_point, alpha=self.alpha, scale=self.scale
        )
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self._build_at_init()

    def __call__(self, inputs, *args, **kwargs):
        self._check_preceding_selu(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _check_preceding_selu(self, inputs):
        """Warn when the symbolic `inputs` come from a SELU with other constants."""
        producer = keras_compat.producing_layer(inputs)
        found = None if producer is None else _selu_constants_of(producer)
        if found is None:
            return
        fixed_point, alpha, scale = found
        source = f"{type(producer).__name__} {producer.name!r}"
        if not isinstance(producer, SELU):
            source += " (activation 'selu')"
        if _same(fixed_point, self.fixed_point) and _same((alpha, scale), (self.alpha, self.scale)):
            return
        warnings.warn(
            f"AlphaDropout {self.name!r} has fixed_point={tuple(self.fixed_point)} "
            f"(alpha={self.alpha:.6g}, scale={self.scale:.6g}) but is applied to the output of "
            f"{source} with fixed_point={tuple(fixed_point)} "
            f"(alpha={alpha:.6g}, scale={scale:.6g}): dropped units would be set to the wrong "
            "saturation and rescaled to the wrong moments. Give both layers the same "
            "`fixed_point` (and the same `alpha`/`scale` if you pass them).",
            UserWarning,
            stacklevel=3,
        )

    def call(self, inputs, training=False):
        inputs = as_floating(self, inputs)
        if not training or self.rate == 0:
            return inputs
        noise_shape = self._concrete_noise_shape(inputs)
        keep = ops.greater_equal(
            keras.random.uniform(noise_shape, seed=self.seed_generator), self.rate
        )
        keep = ops.cast(keep, inputs.dtype)
        saturation = ops.cast(self._saturation, inputs.dtype)
        dropped = inputs * keep + saturation * (1 - keep)
        return dropped * ops.cast(self._a, inputs.dtype) + ops.cast(self._b, inputs.dtype)

    def _concrete_noise_shape(self, inputs):
        shape = ops.shape(inputs)
        if self.noise_shape is None:
            return shape
        if len(self.noise_shape) != len(shape):
            raise ValueError(
                f"`noise_shape` must have the rank of the inputs ({len(shape)}). "
                f"Received: noise_shape={self.noise_shape} for inputs of shape {shape}"
            )
        return tuple(s if d is None else d for d, s in zip(self.noise_shape, shape, strict=True))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "rate": self.rate,
                "fixed_point": list(self.fixed_point),
                "noise_shape": None if self.noise_shape is None else list(self.noise_shape),
                "seed": self.seed,
                "alpha": self.alpha,
                "scale": self.scale,
            }
        )
        return config
