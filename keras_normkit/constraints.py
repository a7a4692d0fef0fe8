"""Weight constraints: the Parseval retraction and the projection onto the simplex.

Keras applies a variable's `constraint` right after each optimizer update
(`variable.assign(constraint(variable))`), which is exactly where Parseval networks put
their retraction step and their projection of the convex-combination weights.

References: Cisse, Bojanowski, Grave, Dauphin, Usunier, "Parseval Networks: Improving
Robustness to Adversarial Examples", ICML 2017, arXiv:1704.08847. Duchi, Shalev-Shwartz,
Singer, Chandra, "Efficient Projections onto the l1-Ball for Learning in High
Dimensions", ICML 2008 (the sort-based simplex projection).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_bool, check_int, check_number, check_seed
from keras_normkit.backend.optional import jax_key_from_bits
from keras_normkit.regularizers import parseval_scale

__all__ = ["ParsevalConstraint", "Simplex", "parseval_retraction", "project_to_simplex"]


def _gram_and_product(matrix):
    """`(G, W W^T W)` with `G` the smaller Gram matrix (`W^T W` or `W W^T`)."""
    rows, cols = matrix.shape
    if cols <= rows:
        gram = ops.matmul(ops.transpose(matrix), matrix)
        return gram, ops.matmul(matrix, gram)
    gram = ops.matmul(matrix, ops.transpose(matrix))
    return gram, ops.matmul(gram, matrix)


def parseval_retraction(matrix, beta):
    """One step `W <- (1 + beta) W - beta W W^T W` on a 2-D matrix.

    Each singular value maps by `s -> (1 + beta) s - beta s^3` (singular vectors are
    kept), whose attracting fixed point is `s = 1`. `W W^T W` is computed through the
    smaller Gram matrix. This is the plain step, without the safeguard of
    `ParsevalConstraint`: a singular value above `sqrt(1 + 1/beta)` leaves the basin of 1
    (it changes sign and, a little further out, grows to inf within a few steps).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.constraints import parseval_retraction
    >>> w = np.diag([0.5, 2.0]).astype("float32")  # singular values 0.5 and 2
    >>> print(np.round(keras.ops.convert_to_numpy(parseval_retraction(w, 0.1)), 4))
    [[0.5375 0.    ]
     [0.     1.4   ]]
    """
    _, product = _gram_and_product(matrix)
    beta = ops.cast(beta, matrix.dtype)
    return (1.0 + beta) * matrix - beta * product


def _safe_bound(beta):
    """`t(beta) = sqrt(2 (1 + beta) / (3 beta))`, the largest singular value let through."""
    return math.sqrt(2.0 * (1.0 + beta) / (3.0 * beta))


def _entry_limit(shape, dtype):
    """Entries up to this size cannot make the Gram matrix or `W W^T W` overflow.

    `|G_ij| <= rows * a^2` and `|(W W^T W)_ij| <= rows * cols * a^3` for entries `|w| <= a`,
    so `a = (sqrt(max) / (rows * cols))^(1/3)` keeps both below `sqrt(max)` (`max` the
    largest finite number of the dtype; float32's for bfloat16 and anything else).
    """
    rows, cols = shape
    dtype = keras.backend.standardize_dtype(dtype)
    finfo = np.finfo(dtype if dtype in ("float16", "float32", "float64") else "float32")
    return (math.sqrt(float(finfo.max)) / (rows * cols)) ** (1.0 / 3.0)


def _safeguarded_retraction(matrix, beta, bound, limit):
    """One retraction step, after a scalar rescale when `s_max` may exceed `bound`.

    `||G||_inf` (the largest absolute row sum of the Gram matrix) bounds its largest
    eigenvalue `s_max^2` from above. When it exceeds `bound^2` the matrix is multiplied by
    `c = bound / sqrt(||G||_inf)`; the Gram matrix and `W W^T W` are reused (the step on
    `c W` is `(1 + beta) c W - beta c^3 W W^T W`), so the check costs no matmul. Otherwise
    `c = 1` and the result is the plain step bit for bit.
    """
    # Entries above `limit` are first divided down to it (no overflow in the Gram matrix);
    # `shrink` is exactly 1.0 for every other kernel.
    shrink = limit / ops.maximum(ops.max(ops.abs(matrix)), limit)
    matrix = matrix * shrink
    gram, product = _gram_and_product(matrix)
    estimate = ops.max(ops.sum(ops.abs(gram), axis=-1))  # >= s_max(matrix)^2
    # In units of the original matrix: rescale iff s_max(original)^2 may exceed bound^2.
    outside = estimate > (bound * shrink) ** 2
    factor = ops.where(outside, bound / ops.sqrt(estimate), 1.0 / shrink)
    beta = ops.cast(beta, matrix.dtype)
    return ((1.0 + beta) * factor) * matrix - (beta * (factor * factor * factor)) * product


@keras.saving.register_keras_serializable(package="keras_normkit")
class ParsevalConstraint(keras.constraints.Constraint):
    """Parseval retraction `W <- (1 + beta) W - beta W W^T W` after each update.

    The kernel is taken as a matrix as in `keras_normkit.regularizers.parseval_matrix`
    (a `Dense` kernel as is; a convolution kernel `(kh, kw, cin, cout)` reshaped to
    `(kh*kw*cin, cout)` and, with `conv_scaling`, multiplied by `sqrt(kh*kw)` before the
    step and divided by it after). The step is one gradient step on
    `beta/4 ||W^T W - I||_F^2`: every singular value moves by
    `s -> f(s) = (1 + beta) s - beta s^3`, towards 1, while the singular vectors are kept,
    so repeated steps converge to the closest Parseval tight frame (the polar factor) and
    the layer's Lipschitz constant to at most 1. With `row_fraction < 1` each call updates
    only a random subset of `max(1, round(row_fraction * out))` output units (the paper's
    "rows" of `W`, i.e. the columns of a Keras kernel), which is cheaper for wide layers.

    A new subset is drawn at every call, as in the paper, on every backend and inside a
    compiled train step too (graph, XLA or JAX's jit). On TensorFlow and PyTorch it comes
    from a `keras.random.SeedGenerator` owned by the constraint, which advances at every
    call. Keras's JAX trainer cannot advance that generator inside its compiled step (the
    step carries only the model's and the optimizer's variables, and a constraint's
    generator is neither: its state would be read as a constant, giving the same subset at
    every step), so on JAX the generator's key is folded with a hash of the kernel's bits.
    The kernel changes at every step (by the update and by the retraction itself), so the
    subset does too: a pseudo-random function of `seed` and the kernel, uniform over the
    subsets of that size (the hash is one pass over the kernel, cheap next to the
    retraction's products). Only a step that left the kernel bit for bit unchanged would
    draw the same subset again.

    Basin. `f(1) = 1` with slope `1 - 2 beta` (attracting for `0 < beta < 1`; the paper
    uses `beta` around 1e-4 to 3e-3), `f(0) = 0` with slope `1 + beta` (repelling).
    `f > 0` on `(0, s0)`, `s0 = sqrt(1 + 1/beta)`, and `f` has no 2-cycle there
    (`f(p) = q`, `f(q) = p` forces `(p - q)^2 = 1 - 1/beta < 0`), so every `s` in
    `(0, s0)` converges to 1; `f(s0) = 0`, and beyond `s0` the unit flips sign and, a
    little further out, `|f(s)| ~ beta s^3` grows to inf/NaN within a few steps.

    Safeguard. Before each step the constraint lets through singular values up to
    `t(beta) = sqrt(2 (1 + beta) / (3 beta))`, `sqrt(2)` times the maximiser
    `sqrt((1 + beta) / (3 beta))` of `f`: `1 < 2/sqrt(3) <= t < s0`, `f` maps `(0, t]`
    into itself (its maximum `(2/3) (1 + beta) sqrt((1 + beta) / (3 beta))` is `<= t`),
    and `f >= min(1, f(t)) >= 1/sqrt(2)` on `[1, t]` (`f(t) = (1 + beta) t / 3`), so no
    unit is sent towards 0 (`t(0.1) = 2.71`, `t(0.5) = 1.41`, `t(1e-3) = 25.8`).
    `s_max^2` is bounded from above, at no extra matmul, by the largest absolute row sum
    `||G||_inf` of the Gram matrix that the step forms anyway (`lambda_max(G) <=
    ||G||_inf`, with equality when the columns are orthogonal; 1 at a Parseval frame).
    When `||G||_inf > t^2` the matrix is first multiplied by the scalar
    `t / sqrt(||G||_inf)`, which puts every singular value in `(0, t]` and keeps the
    singular vectors, so the kernel still converges to the same frame. Otherwise
    (kernels near a frame, e.g. training from the `"orthogonal"` initializer with a
    small `beta`) the step is the plain retraction, bit for bit. The bound can be loose
    (at most `n^(1/4)` times `s_max` for an `n x n` Gram matrix, about 2x for a random
    kernel) and the margin `t^2 - 1` shrinks to 1/3 as `beta -> 1`: a kernel inside the
    basin but with `||G||_inf > t^2` is rescaled too, harmlessly. Kernels with entries
    above `(sqrt(max_float) / (rows * cols))^(1/3)` (4e4 for a 512 x 512 float32
    kernel) are divided down to it before the Gram matrix is formed, so nothing
    overflows: for any finite kernel and any `beta` in (0, 1) every call returns a
    finite kernel whose (conv-scaled) singular values are at most `t` (with
    `row_fraction < 1`: those of the updated units).

    Zero and non-finite kernels. The only division is by `sqrt(||G||_inf) > t`, never by
    a singular value: an exactly zero singular value stays 0 (a zero kernel stays zero, a
    zero column stays zero), so a rank-deficient kernel converges to a partial isometry;
    a tiny nonzero one (e.g. round-off) grows by about `1 + beta` per step, reaching 1
    after about `ln(1 / s) / beta` steps. A kernel (with `row_fraction < 1`: the updated
    units) that holds a NaN or an infinite entry is returned unchanged: the step would
    spread it through the Gram matrix to every entry; left where it is, the loss or
    `keras.callbacks.TerminateOnNaN` reports it.

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

    A kernel far outside the basin (scaled singular values up to 7.8 > t(0.1) = 2.7; the
    plain step reaches 1e9 in three calls and inf in five) is brought back and retracted:

    >>> w = np.random.default_rng(0).normal(0, 0.3, (3, 3, 4, 8)).astype("float32")
    >>> constraint = ParsevalConstraint(beta=0.1, num_iterations=60)
    >>> s = np.linalg.svd(3 * keras.ops.convert_to_numpy(constraint(w)).reshape(36, 8),
    ...                   compute_uv=False)  # 3 = sqrt(kh * kw)
    >>> bool(np.allclose(s, 1.0, atol=1e-3))
    True

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
        # compiled (graph / XLA) train step; on JAX see `_subset_seed`.
        self._seed_generator = keras.random.SeedGenerator(seed) if self.row_fraction < 1 else None

    def _subset_seed(self, matrix):
        """The seed of this call's random subset (see the class docstring)."""
        if keras.backend.backend() != "jax":
            return self._seed_generator
        # JAX's compiled step drops the generator's update (its key is a constant there):
        # fold in the kernel, which the step does carry and which changes at every step.
        return jax_key_from_bits(self._seed_generator.next(), matrix)

    def _retract(self, matrix, scale):
        bound = _safe_bound(self.beta)
        limit = _entry_limit(matrix.shape, matrix.dtype)
        finite = ops.all(ops.isfinite(matrix))
        retracted = matrix
        if scale != 1.0:
            retracted = retracted * ops.cast(scale, matrix.dtype)
        for _ in range(self.num_iterations):
            retracted = _safeguarded_retraction(retracted, self.beta, bound, limit)
        if scale != 1.0:
            retracted = retracted / ops.cast(scale, matrix.dtype)
        # A non-finite kernel is left as it is (see the class docstring).
        return ops.where(finite, retracted, matrix)

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
            scores = keras.random.uniform((units,), seed=self._subset_seed(matrix))
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
