"""Weight penalties: Keras's L1/L2 and the Parseval tight-frame penalty.

`L1`, `L2` and `L1L2` are Keras's own classes (`keras.regularizers.L1`, ...), re-exported
here so one import gives every penalty; they are not re-implemented. `ParsevalRegularizer`
is the penalty of Parseval networks (Cisse et al., 2017), which keeps each kernel close to
a Parseval tight frame so that the layer's Lipschitz constant stays close to (at most) 1.

This module also holds the one place where a kernel becomes the matrix whose frame is
measured (`parseval_matrix`, `parseval_scale`): `ParsevalConstraint` in `keras_normkit.constraints` uses them
too.

Reference: Cisse, Bojanowski, Grave, Dauphin, Usunier, "Parseval Networks: Improving
Robustness to Adversarial Examples", ICML 2017, arXiv:1704.08847.
"""

import math

import keras
from keras import ops
from keras.regularizers import L1, L1L2, L2

from keras_normkit._validation import check_bool, check_number

__all__ = ["L1", "L2", "L1L2", "ParsevalRegularizer", "parseval_matrix"]


def parseval_matrix(kernel, conv_scaling=True):
    """The kernel as the matrix whose singular values a Parseval network drives to 1.

    A `Dense` kernel `(in, out)` is used as is. A convolution kernel
    `(k_1, ..., k_d, cin, cout)` is reshaped to `(k_1...k_d * cin, cout)` and, with
    `conv_scaling`, multiplied by `sqrt(k_1...k_d)`: every input pixel enters at most
    `k_1...k_d` patches, so the convolution's Lipschitz constant is at most
    `sqrt(k_1...k_d) * ||reshaped kernel||_2`, i.e. at most 1 when the scaled matrix is
    Parseval (its reshaped kernel then has singular values `1 / sqrt(k_1...k_d)`).

    Args:
        kernel: A tensor of rank >= 2, the last axis being the output units.
        conv_scaling: Bool, whether to scale convolution kernels by `sqrt(k_1...k_d)`.

    Returns:
        `(matrix, scale)`: the 2-D matrix and the Python float it was multiplied by.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.regularizers import parseval_matrix
    >>> matrix, scale = parseval_matrix(np.ones((3, 3, 4, 8), "float32"))
    >>> tuple(matrix.shape), scale  # (3 * 3 * 4, 8), sqrt(3 * 3)
    ((36, 8), 3.0)
    >>> float(keras.ops.convert_to_numpy(matrix)[0, 0])
    3.0
    """
    shape = tuple(kernel.shape)
    scale = parseval_scale(shape, conv_scaling)
    matrix = ops.reshape(kernel, (-1, shape[-1]))
    if scale != 1.0:
        matrix = matrix * ops.cast(scale, matrix.dtype)
    return matrix, scale


def parseval_scale(shape, conv_scaling=True):
    """`sqrt(k_1...k_d)` for a convolution kernel with `conv_scaling`, else 1 (validates)."""
    shape = tuple(shape)
    if len(shape) < 2 or any(d is None for d in shape):
        raise ValueError(
            "A Parseval penalty or constraint needs a kernel of rank >= 2 with a known "
            f"shape ((in, out) or (k..., cin, cout)). Received: kernel.shape={shape}"
        )
    return math.sqrt(math.prod(shape[:-2])) if conv_scaling and len(shape) > 2 else 1.0


def smaller_gram(matrix):
    """`W^T W` or `W W^T`, whichever is smaller (the side a tight frame can make identity)."""
    rows, cols = matrix.shape
    if cols <= rows:
        return ops.matmul(ops.transpose(matrix), matrix)
    return ops.matmul(matrix, ops.transpose(matrix))


@keras.saving.register_keras_serializable(package="keras_normkit")
class ParsevalRegularizer(keras.regularizers.Regularizer):
    """Parseval tight-frame penalty `factor / 2 * ||W^T W - I||_F^2`.

    `W` is the kernel as a matrix (see `parseval_matrix`): a `Dense` kernel `(in, out)`
    as is; a convolution kernel `(kh, kw, cin, cout)` reshaped to `(kh*kw*cin, cout)` and,
    with `conv_scaling`, multiplied by `sqrt(kh*kw)` so that a zero penalty means a
    convolution with Lipschitz constant at most 1. The Gram matrix is taken on the
    smaller side (`W^T W` when `out <= rows`, else `W W^T`), the one that a tight frame
    makes the identity; the two choices differ by the constant `|rows - out|` only, so
    the gradient is the same. Unlike `keras.regularizers.OrthogonalRegularizer` (which
    normalizes rows first and only penalizes their angles) this penalty also pins every
    singular value to 1, which is what bounds the layer's Lipschitz constant.

    Args:
        factor: Non-negative float, the `beta` of the paper (typically 1e-4 to 3e-3).
        conv_scaling: Bool, whether convolution kernels are scaled by
            `sqrt(kh*kw)` (default `True`).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.regularizers import ParsevalRegularizer
    >>> layer = keras.layers.Dense(8, kernel_regularizer=ParsevalRegularizer(1e-3))
    >>> penalty = ParsevalRegularizer(0.5)(np.eye(4, dtype="float32"))
    >>> float(penalty)
    0.0
    >>> float(ParsevalRegularizer(0.5)(2 * np.eye(4, dtype="float32")))  # 0.25 * ||3 I||_F^2
    9.0

    Reference: Cisse et al., "Parseval Networks: Improving Robustness to Adversarial
    Examples", ICML 2017, arXiv:1704.08847.
    """

    def __init__(self, factor=1e-3, conv_scaling=True):
        self.factor = check_number("factor", factor, 0.0)
        self.conv_scaling = check_bool("conv_scaling", conv_scaling)

    def __call__(self, x):
        matrix, _ = parseval_matrix(ops.convert_to_tensor(x), self.conv_scaling)
        gram = smaller_gram(matrix)
        residual = gram - ops.eye(gram.shape[0], dtype=gram.dtype)
        return ops.cast(0.5 * self.factor, gram.dtype) * ops.sum(ops.square(residual))

    def get_config(self):
        return {"factor": self.factor, "conv_scaling": self.conv_scaling}
