"""`ConvexCombination`: Parseval networks' aggregation of same-shaped inputs."""

import keras
from keras import ops

from keras_normkit.constraints import Simplex


@keras.saving.register_keras_serializable(package="keras_normkit")
class ConvexCombination(keras.layers.Layer):
    """Learned convex combination `sum_i alpha_i * x_i` of `k` same-shaped inputs.

    The mixing weights `alpha` (shape `(k,)`) start uniform (`alpha_i = 1/k`) and are
    projected onto the probability simplex (`alpha_i >= 0`, `sum_i alpha_i = 1`, see
    `keras_normkit.constraints.Simplex`) after every optimizer update. A convex
    combination of 1-Lipschitz branches is 1-Lipschitz, whereas their plain sum (e.g. a
    residual `x + f(x)`) can double the Lipschitz constant at each block: Parseval
    networks aggregate residual branches this way.

    Args:
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A list of `k >= 2` tensors of the same shape.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import ConvexCombination
    >>> x = keras.Input((8,))
    >>> branch = keras.layers.Dense(8, activation="tanh")(x)
    >>> y = ConvexCombination()([x, branch])
    >>> model = keras.Model(x, y)
    >>> tuple(model(np.ones((2, 8), "float32")).shape)
    (2, 8)

    Reference: Cisse et al., "Parseval Networks: Improving Robustness to Adversarial
    Examples", ICML 2017, arXiv:1704.08847.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = False

    def _check_shapes(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or not all(
            isinstance(s, (list, tuple)) for s in input_shape
        ):
            raise ValueError(
                "`ConvexCombination` must be called on a list of at least 2 tensors of the "
                f"same shape. Received: input_shape={input_shape}"
            )
        shapes = [tuple(s) for s in input_shape]
        if len(shapes) < 2:
            raise ValueError(
                "`ConvexCombination` must be called on a list of at least 2 tensors. "
                f"Received {len(shapes)} input(s) of shapes {shapes}"
            )
        for shape in shapes[1:]:
            if len(shape) != len(shapes[0]) or any(
                a is not None and b is not None and a != b
                for a, b in zip(shape, shapes[0], strict=True)
            ):
                raise ValueError(
                    "`ConvexCombination` inputs must all have the same shape. "
                    f"Received shapes: {shapes}"
                )
        return shapes

    def build(self, input_shape):
        shapes = self._check_shapes(input_shape)
        count = len(shapes)
        self.alpha = self.add_weight(
            name="alpha",
            shape=(count,),
            initializer=keras.initializers.Constant(1.0 / count),
            constraint=Simplex(),
        )

    def call(self, inputs):
        alpha = ops.cast(self.alpha, inputs[0].dtype)
        output = alpha[0] * inputs[0]
        for i in range(1, len(inputs)):
            output = output + alpha[i] * inputs[i]
        return output

    def compute_output_shape(self, input_shape):
        shapes = self._check_shapes(input_shape)
        # Merge the known dimensions of all inputs.
        merged = list(shapes[0])
        for shape in shapes[1:]:
            merged = [a if a is not None else b for a, b in zip(merged, shape, strict=True)]
        return tuple(merged)

    def get_config(self):
        return super().get_config()
