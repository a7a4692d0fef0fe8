"""`SkipInit`: a learned scalar gate on a residual branch, initialized at 0 (ReZero)."""

import keras
from keras import ops

from keras_normkit._validation import check_number


@keras.saving.register_keras_serializable(package="keras_normkit")
class SkipInit(keras.layers.Layer):
    """A learned scalar gate, `y = a * x`, with `a` initialized at 0 (SkipInit, ReZero).

    Put at the end of a residual branch, `h_{i+1} = h_i + a_i * f_i(h_i)`: at
    initialization every residual block is the identity, so a deep network without batch
    normalization starts as a shallow one and trains at large learning rates; the
    branches come in as the gates `a_i` are learned.

    Args:
        initial_value: Float, the gate's value at initialization. Default: `0.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A tensor of any shape (the output of a residual branch).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import SkipInit
    >>> inputs = keras.Input((4,))
    >>> branch = SkipInit()(keras.layers.Dense(4, activation="relu")(inputs))
    >>> model = keras.Model(inputs, keras.layers.Add()([inputs, branch]))
    >>> x = np.arange(8, dtype="float32").reshape(2, 4)
    >>> bool(np.array_equal(model.predict(x, verbose=0), x))  # the identity at init
    True

    Reference: De & Smith, "Batch Normalization Biases Residual Blocks Towards the
    Identity Function in Deep Networks", NeurIPS 2020, arXiv:2002.10444; Bachlechner et
    al., "ReZero is All You Need: Fast Convergence at Large Depth", arXiv:2003.04887, 2020.
    """

    def __init__(self, initial_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.initial_value = check_number("initial_value", initial_value)
        self.supports_masking = True

    def build(self, input_shape):
        self.gate = self.add_weight(
            name="gate",
            shape=(),
            initializer=keras.initializers.Constant(self.initial_value),
            trainable=True,
        )
        self.built = True

    def call(self, inputs):
        return ops.multiply(inputs, ops.cast(self.gate, inputs.dtype))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"initial_value": self.initial_value})
        return config
