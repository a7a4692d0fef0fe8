"""Weight constraints: the Parseval retraction and the projection onto the simplex.

Keras applies a variable's `constraint` right after each optimizer update
(`variable.assign(constraint(variable))`), which is exactly where Parseval networks put
their retraction step and their projection of the convex-combination weights.

References: Cisse, Bojanowski, Grave, Dauphin, Usunier, "Parseval Networks: Improving
Robustness to Adversarial Examples", ICML 2017, arXiv:1704.08847. Duchi, Shalev-Shwartz,
Singer, Chandra, "Efficient Projections onto the l1-Ball for Learning in High
Dimensions", ICML 2008 (the sort-based simplex projection).
"""

import keras
from keras import ops

from keras_normkit._validation import check_bool, check_int, check_number, check_seed
from keras_normkit.regularizers import parseval_scale

__all__ = ["ParsevalConstraint", "Simplex", "parseval_retraction", "project_to_simplex"]


def parseval_retraction(matrix, beta):
    """One step `W <- (1 + beta) W - beta W W^T W` on a 2-D matrix.

    Each singular value maps by `s -> (1 + beta) s - beta s^3` (singular vectors are
    kept), whose attracting fixed point is `s = 1`. `W W^T W` is computed through the
    smaller Gram matrix.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.constraints import parseval_retraction
    >>> w = np.diag([0.5, 2.0]).astype("float32")  # singular values 0.5 and 2
    >>> print(np.round(keras.ops.convert_to_numpy(parseval_retraction(w, 0.1)), 4))
    [[0.5375 0.    ]
     [0.     1.4   ]]
    """
    rows, cols = matrix.shape
    if cols <= rows:
        product = ops.matmul(matrix, ops.matmul(ops.transpose(matrix), matrix))
    else:
        product = ops.matmul(ops.matmul(matrix, ops.transpose(matrix)), matrix)
    beta = ops.cast(beta, matrix.dtype)
    return (1.0 + beta) * matrix - beta * product


@keras.saving.register_keras_serializable(package="keras_normkit")
class ParsevalConstraint(keras.constraints.Constraint):
    """Parseval retraction `W <- (1 + beta) W - beta W W^T W` after each update.

    The kernel is taken as a matrix as in `keras_normkit.regularizers.parseval_matrix`
    (a `Dense` kernel as is; a convolution kernel `(kh, kw, cin, cout)` reshaped to
    `(kh*kw*cin, cout)` and, with `conv_scaling`, multiplied by `sqrt(kh*kw)` before the
    step and divided by it after). The step is one gradient step on
    `beta/4 ||W^T W - I||_F^2`: every singular value moves by
    `s -> (1 + beta) s - beta s^3`, towards 1, while the singular vectors are kept, so
    repeated steps converge to the closest Parseval tight frame (the polar factor) and the
    layer's Lipschitz constant to at most 1. With `row_fraction < 1` each call updates only
    a random subset of `max(1, round(row_fraction * out))` output units (the paper's
    "rows" of `W`, i.e. the columns of a Keras kernel), which is cheaper for wide layers.

    The subset is drawn with a `keras.random.SeedGenerator` owned by the constraint: a new
    subset at every step with TensorFlow (eager, graph or XLA). Keras's JAX trainer does
    not carry the state of a constraint's generator from one compiled step to the next, so
    on JAX the same subset is drawn at every step: use `row_fraction=1.0` there.

    The fixed point attracts for `0 < beta < 1` (the slope there is `1 - 2 beta`); the
    paper uses `beta` around 1e-4 to 3e-3 during training. For `beta <= 0.5` every
    singular value in `(0, sqrt(1 + 1/beta))` converges to 1; larger ones overshoot and
    can diverge, so start from a kernel close to a frame (e.g. the `"orthogonal"`
    initializer), as the small optimizer steps between retractions then keep it.

    Args:
        beta: Float in (0, 1), the retraction step size.
        num_iterations: Positive int, retraction steps per call (per optimizer update).
        row_fraction: Float in (0, 1], the fraction of output units updated per call.
        conv_scaling: Bool, whether convolution kernels are scaled by `sqrt(kh*kw)`
            (for a Lipschitz bound of 1 on the convolution itself).
        seed: Optional int, the seed of the random subset (only used when
            `row_fraction < 1`).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.constraints import ParsevalConstraint
    >>> constraint = ParsevalConstraint(beta=0.3, num_iterations=30)
    >>> w = np.random.default_rng(0).normal(size=(16, 8)).astype("float32") / 4
    >>> s = np.linalg.svd(keras.ops.convert_to_numpy(constraint(w)), compute_uv=False)
    >>> bool(np.allclose(s, 1.0, atol=1e-3))
    True
    >>> layer = keras.layers.Dense(8, kernel_constraint=ParsevalConstraint(beta=3e-3))

    Reference: Cisse et al., "Parseval Networks: Improving Robustness to Adversarial
    Examples", ICML 2017, arXiv:1704.08847.
    """

    def __init__(self, beta=1e-3, num_iterations=1, row_fraction=1.0, conv_scaling=True, seed=None):
        self.beta = check_number("beta", beta, 0.0, 1.0, strict_minimum=True, strict_maximum=True)
        self.num_iterations = check_int("num_iterations", num_iterations, 1)
        self.row_fraction = check_number(
            "row_fraction", row_fraction, 0.0, 1.0, strict_minimum=True
        )
        self.conv_scaling = check_bool("conv_scaling", conv_scaling)
        self.seed = check_seed(seed)
        # A stateful generator: a fresh subset at every optimizer step, also inside a
        # compiled (graph / XLA) train step.
        self._seed_generator = keras.random.SeedGenerator(seed) if self.row_fraction < 1 else None

    def _retract(self, matrix, scale):
        if scale != 1.0:
            matrix = matrix * ops.cast(scale, matrix.dtype)
        for _ in range(self.num_iterations):
            matrix = parseval_retraction(matrix, self.beta)
        if scale != 1.0:
            matrix = matrix / ops.cast(scale, matrix.dtype)
        return matrix

    def __call__(self, w):
        w = ops.convert_to_tensor(w)
        scale = parseval_scale(w.shape, self.conv_scaling)
        matrix = ops.reshape(w, (-1, w.shape[-1]))
        units = matrix.shape[1]
        count = max(1, round(self.row_fraction * units))
        if count >= units:
            matrix = self._retract(matrix, scale)
        else:
            # `count` distinct random output units: the top-k of i.i.d. uniform scores.
            scores = keras.random.uniform((units,), seed=self._seed_generator)
            _, index = ops.top_k(scores, k=count, sorted=False)
            updated = self._retract(ops.take(matrix, index, axis=1), scale)
            # Put the updated columns back with gathers and a select (no full-matrix
            # scatter): `position[u]` is the column of `updated` that holds unit `u`.
            index = ops.expand_dims(index, -1)
            position = ops.scatter(index, ops.arange(count, dtype="int32"), (units,))
            chosen = ops.scatter(index, ops.ones((count,), dtype="int32"), (units,)) > 0
            matrix = ops.where(chosen[None, :], ops.take(updated, position, axis=1), matrix)
        return ops.reshape(matrix, w.shape)

    def get_config(self):
        return {
            "beta": self.beta,
            "num_iterations": self.num_iterations,
            "row_fraction": self.row_fraction,
            "conv_scaling": self.conv_scaling,
            "seed": self.seed,
        }


def project_to_simplex(x):
    """Euclidean projection of each vector along the last axis onto the probability simplex.

    Sort-based algorithm: with `u` sorted in decreasing order and `c_j` its cumulative
    sums, `rho = max{j : u_j - (c_j - 1) / j > 0}`, `theta = (c_rho - 1) / rho` and the
    projection is `max(x - theta, 0)`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.constraints import project_to_simplex
    >>> p = project_to_simplex(np.array([[0.5, 1.2, -0.3], [0.2, 0.2, 0.2]]))
    >>> print(np.round(keras.ops.convert_to_numpy(p), 4))  # theta = 0.35, then -0.2667
    [[0.15   0.85   0.    ]
     [0.3333 0.3333 0.3333]]
    """
    x = ops.convert_to_tensor(x)
    n = x.shape[-1]
    u = ops.flip(ops.sort(x, axis=-1), axis=-1)
    cumulative = ops.cumsum(u, axis=-1)
    j = ops.arange(1, n + 1, dtype=x.dtype)
    positive = (u - (cumulative - 1.0) / j) > 0
    # The condition holds on a prefix (j = 1 always qualifies): rho is its last index.
    rho = ops.max(ops.where(positive, ops.arange(1, n + 1, dtype="int32"), 0), axis=-1)
    rho = ops.expand_dims(rho, -1)
    c_rho = ops.take_along_axis(cumulative, rho - 1, axis=-1)
    theta = (c_rho - 1.0) / ops.cast(rho, x.dtype)
    return ops.maximum(x - theta, 0.0)


@keras.saving.register_keras_serializable(package="keras_normkit")
class Simplex(keras.constraints.Constraint):
    """Euclidean projection onto the probability simplex `{w : w_i >= 0, sum_i w_i = 1}`.

    `w <- argmin_{v in simplex} ||v - w||_2 = max(w - theta, 0)`, where the threshold
    `theta` is found by sorting (Duchi et al., 2008): with `u` the entries sorted in
    decreasing order and `c_j = u_1 + ... + u_j`, `rho = max{j : u_j > (c_j - 1) / j}`
    and `theta = (c_rho - 1) / rho`. Weights of rank > 1 are projected along their last
    axis (each vector along it is a separate simplex). Used by
    `keras_normkit.layers.ConvexCombination` to keep its mixing weights a convex
    combination after each update.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.constraints import Simplex
    >>> w = Simplex()(np.array([0.5, 1.2, -0.3]))
    >>> [round(float(v), 3) for v in keras.ops.convert_to_numpy(w)]
    [0.15, 0.85, 0.0]

    Reference: Duchi et al., "Efficient Projections onto the l1-Ball for Learning in High
    Dimensions", ICML 2008; used for Parseval networks' aggregation layers by Cisse et
    al., ICML 2017, arXiv:1704.08847.
    """

    def __call__(self, w):
        w = ops.convert_to_tensor(w)
        if len(w.shape) < 1 or w.shape[-1] is None:
            raise ValueError(
                "`Simplex` needs a weight of rank >= 1 with a known last axis. "
                f"Received: w.shape={tuple(w.shape)}"
            )
        return project_to_simplex(w)

    def get_config(self):
        return {}
