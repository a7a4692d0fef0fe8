"""`NFResidual`: the residual block of normalizer-free ResNets, `h + alpha * f(h / beta)`."""

import keras
from keras import ops

from keras_normkit._validation import check_number


def _check_layer(name, value, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, keras.layers.Layer):
        raise TypeError(
            f"`{name}` must be a keras.layers.Layer instance (e.g. a keras.Sequential)"
            f"{' or None' if optional else ''}. Received: {name}={value!r} of type "
            f"{type(value).__name__}"
        )
    return value


@keras.saving.register_keras_serializable(package="keras_normkit")
class NFResidual(keras.layers.Layer):
    """A normalizer-free residual block: `h + alpha * branch(h / beta)`.

    The block of NF-ResNets (Brock et al. 2021a), which keeps the signal's variance known
    analytically instead of normalizing it with batch statistics:

    - `h_{i+1} = h_i + alpha * f_i(h_i / beta_i)`, with `beta_i = sqrt(Var(h_i))`, the
      expected standard deviation of the block's input, so that the branch `f_i` (built
      to preserve unit variance, e.g. activations followed by
      `WeightStandardization`-wrapped convolutions with the activation's gain) sees a
      unit-variance input. Then `Var(h_{i+1}) = Var(h_i) + alpha^2`.
    - At a transition (a change of resolution or width), the skip path is a layer too,
      `h_{i+1} = shortcut(h_i / beta_i) + alpha * f_i(h_i / beta_i)`, and the variance
      is reset: `Var(h_{i+1}) = 1 + alpha^2`.

    So after `k` blocks of a stage the expected variance is `1 + k alpha^2` (with a
    unit-variance stem). `output_variance` gives it for this block; pass
    `sqrt(block.output_variance)` as the next block's `beta`, as in the example. A
    `SkipInit` gate at the end of the branch (NFNets) makes each block the identity at
    initialization.

    Args:
        branch: A Keras layer (e.g. a `keras.Sequential`), the residual branch `f`; its
            output has the shape of the block's output.
        shortcut: `None` (the identity skip path) or a Keras layer applied to `h / beta`
            at a transition block.
        alpha: Float > 0, the rate at which the variance grows per block. Default: `0.2`
            (the papers').
        beta: Float > 0, the expected standard deviation of the block's input. Default:
            `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The block's input `h`.
        training: Passed to `branch` and `shortcut`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import NFResidual, WeightStandardization
    >>> def branch():
    ...     return keras.Sequential([
    ...         keras.layers.ReLU(),
    ...         WeightStandardization(keras.layers.Dense(64), activation="relu"),
    ...     ])
    >>> inputs = keras.Input((64,))
    >>> h, variance = inputs, 1.0
    >>> for _ in range(3):
    ...     block = NFResidual(branch(), alpha=0.2, beta=variance ** 0.5)
    ...     h, variance = block(h), block.output_variance
    >>> round(variance, 2)  # 1 + 3 * 0.2^2
    1.12
    >>> x = np.random.default_rng(0).normal(size=(4096, 64)).astype("float32")
    >>> y = keras.Model(inputs, h).predict(x, verbose=0)
    >>> bool(abs(y.var() / variance - 1) < 0.05)
    True

    Reference: Brock, De, Smith, "Characterizing signal propagation to close the
    performance gap in unnormalized ResNets", ICLR 2021, arXiv:2101.08692, Section 3.
    """

    def __init__(self, branch, shortcut=None, alpha=0.2, beta=1.0, **kwargs):
        super().__init__(**kwargs)
        self.branch = _check_layer("branch", branch)
        self.shortcut = _check_layer("shortcut", shortcut, optional=True)
        self.alpha = check_number("alpha", alpha, minimum=0.0, strict_minimum=True)
        self.beta = check_number("beta", beta, minimum=0.0, strict_minimum=True)

    @property
    def output_variance(self):
        """The expected variance of the block's output: `1 + alpha^2` at a transition
        (with a `shortcut`), `beta^2 + alpha^2` otherwise."""
        base = 1.0 if self.shortcut is not None else self.beta**2
        return base + self.alpha**2

    def build(self, input_shape):
        if not self.branch.built:
            self.branch.build(input_shape)
        if self.shortcut is not None and not self.shortcut.built:
            self.shortcut.build(input_shape)
        self.built = True

    def call(self, inputs, training=None):
        dtype = self.compute_dtype
        inputs = ops.cast(inputs, dtype)
        scaled = ops.multiply(inputs, ops.cast(1.0 / self.beta, dtype))
        residual = ops.cast(self.branch(scaled, training=training), dtype)
        skip = inputs
        if self.shortcut is not None:
            skip = ops.cast(self.shortcut(scaled, training=training), dtype)
        return ops.add(skip, ops.multiply(residual, ops.cast(self.alpha, dtype)))

    def compute_output_shape(self, input_shape):
        return self.branch.compute_output_shape(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "branch": keras.saving.serialize_keras_object(self.branch),
                "shortcut": keras.saving.serialize_keras_object(self.shortcut),
                "alpha": self.alpha,
                "beta": self.beta,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        for key in ("branch", "shortcut"):
            if config.get(key) is not None:
                config[key] = keras.saving.deserialize_keras_object(
                    config[key], custom_objects=custom_objects
                )
        return cls(**config)
