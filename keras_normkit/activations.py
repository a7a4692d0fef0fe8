"""Scaled exponential linear units and the moment map of self-normalizing networks.

Everything about the SELU family lives here: the activation itself, the moment map
g(mu, nu) -> (mu~, nu~) of Klambauer et al. (2017), its Jacobian, and the solver that
returns the (alpha, scale) whose SELU has a prescribed fixed point (mean, variance).
Beside them, `activation_gain`: the constant gamma = 1 / sqrt(Var f(z)), z ~ N(0, 1), of
any activation f (the gain of scaled weight standardization, Brock et al. 2021).

The moment formulas are closed forms for a Gaussian pre-activation z ~ N(mu*omega, nu*tau)
(omega = sum of the incoming weights, tau = sum of their squares). They are evaluated with
`math.erfc` in log space (so e^a * erfc(b) never overflows or underflows on its way to a
finite result) and are pure NumPy/`math`: no SciPy needed.

Reference: Klambauer, Unterthiner, Mayr, Hochreiter, "Self-Normalizing Neural Networks",
NeurIPS 2017, arXiv:1706.02515.
"""

import math
import numbers

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_fixed_point, check_number

__all__ = [
    "ALPHA01",
    "LAMBDA01",
    "selu",
    "selu_moments",
    "selu_jacobian",
    "selu_parameters",
    "alpha_dropout_parameters",
    "activation_gain",
]

#: alpha of the SELU whose fixed point is (mean 0, variance 1).
ALPHA01 = 1.6732632423543772848170429916717
#: lambda (the scale) of the SELU whose fixed point is (mean 0, variance 1).
LAMBDA01 = 1.0507009873554804934193349852946


def _is_default(alpha, scale):
    # The solver reproduces the standard constants to ~1e-16: treat those as the standard
    # SELU so the backend's fused kernel runs.
    return math.isclose(alpha, ALPHA01, rel_tol=1e-12) and math.isclose(
        scale, LAMBDA01, rel_tol=1e-12
    )


@keras.saving.register_keras_serializable(package="keras_normkit")
def selu(x, alpha=ALPHA01, scale=LAMBDA01):
    """Scaled exponential linear unit with arbitrary `alpha` and `scale`.

    `selu(x) = scale * x` for `x > 0` and `scale * alpha * (exp(x) - 1)` for `x <= 0`.
    With the default constants this is Keras's own `keras.activations.selu` (and runs
    the backend's fused kernel); other constants, e.g. from `selu_parameters`, give a
    SELU with another fixed point.

    Args:
        x: Input tensor.
        alpha: Positive float, the negative saturation is `-scale * alpha`.
        scale: Positive float, the slope for positive inputs.

    Returns:
        A tensor of the same shape and dtype as `x`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.activations import selu
    >>> y = selu(np.array([-1.0, 0.0, 2.0], "float32"))
    >>> print(np.round(keras.ops.convert_to_numpy(y), 4))  # lambda * alpha * (e^-1 - 1), 0, 2 lambda
    [-1.1113  0.      2.1014]

    Reference: Klambauer et al., 2017, arXiv:1706.02515.
    """
    x = ops.convert_to_tensor(x)
    if _is_default(alpha, scale):
        return ops.selu(x)
    # scale*alpha*elu(x) + scale*(1 - alpha)*relu(x): two fused kernels (faster than a
    # select: benchmarks/DECISIONS.md#selu-formula), and elu never evaluates exp on large
    # positive inputs, so neither the value nor the gradient can overflow.
    alpha, scale = float(alpha), float(scale)
    return ops.add(
        ops.multiply(ops.elu(x), ops.cast(scale * alpha, x.dtype)),
        ops.multiply(ops.relu(x), ops.cast(scale * (1.0 - alpha), x.dtype)),
    )


# --------------------------------------------------------------------------------------
# Closed-form Gaussian expectations.
# --------------------------------------------------------------------------------------


def _check_finite(**values):
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"`{name}` must be a finite number. Received: {name}={value}")


def _erfcx_asymptotic(b):
    """exp(b^2) * erfc(b) for large positive b (b >= 25: error below 1e-14)."""
    inv = 1.0 / (2.0 * b * b)
    series = 1.0 - inv + 3.0 * inv**2 - 15.0 * inv**3 + 105.0 * inv**4
    return series / (b * math.sqrt(math.pi))


def _exp_erfc(a, b):
    """exp(a) * erfc(b) without intermediate overflow or underflow."""
    if b < 25.0:
        return math.exp(a + math.log(math.erfc(b)))
    return math.exp(a - b * b) * _erfcx_asymptotic(b)


def _gaussian_pieces(m, v):
    """Expectations of the pieces of SELU under z ~ N(m, v).

    Returns a dict with P(z>0), P(z<=0), E[z 1{z>0}], E[z^2 1{z>0}],
    E[e^z 1{z<=0}] and E[e^{2z} 1{z<=0}].
    """
    s = math.sqrt(2.0 * v)
    density = math.sqrt(v / (2.0 * math.pi)) * math.exp(-m * m / (2.0 * v))
    p_pos = 0.5 * math.erfc(-m / s)
    p_neg = 0.5 * math.erfc(m / s)
    return {
        "p_pos": p_pos,
        "p_neg": p_neg,
        "z_pos": m * p_pos + density,
        "z2_pos": (m * m + v) * p_pos + m * density,
        "e1_neg": 0.5 * _exp_erfc(m + v / 2.0, (m + v) / s),
        "e2_neg": 0.5 * _exp_erfc(2.0 * m + 2.0 * v, (m + 2.0 * v) / s),
        # density of z at 0 (for the kink of SELU in the second derivative).
        "pdf0": math.exp(-m * m / (2.0 * v)) / math.sqrt(2.0 * math.pi * v),
    }


def _validate_moment_args(mean, variance, weight_sum, weight_square_sum):
    mean, variance = float(mean), float(variance)
    weight_sum, weight_square_sum = float(weight_sum), float(weight_square_sum)
    _check_finite(
        mean=mean, variance=variance, weight_sum=weight_sum, weight_square_sum=weight_square_sum
    )
    if variance <= 0:
        raise ValueError(f"`variance` must be > 0. Received: variance={variance}")
    if weight_square_sum <= 0:
        raise ValueError(
            f"`weight_square_sum` (tau) must be > 0. Received: weight_square_sum={weight_square_sum}"
        )
    return mean, variance, weight_sum, weight_square_sum


def _validate_selu_constants(alpha, scale):
    alpha, scale = float(alpha), float(scale)
    _check_finite(alpha=alpha, scale=scale)
    if scale <= 0:
        raise ValueError(f"`scale` must be > 0. Received: scale={scale}")
    return alpha, scale


def _moments_scalar(mean, variance, alpha, scale, weight_sum, weight_square_sum):
    mean, variance, weight_sum, weight_square_sum = _validate_moment_args(
        mean, variance, weight_sum, weight_square_sum
    )
    alpha, scale = _validate_selu_constants(alpha, scale)
    g = _gaussian_pieces(mean * weight_sum, variance * weight_square_sum)
    first = scale * (g["z_pos"] + alpha * (g["e1_neg"] - g["p_neg"]))
    second = scale**2 * (g["z2_pos"] + alpha**2 * (g["e2_neg"] - 2.0 * g["e1_neg"] + g["p_neg"]))
    return first, second - first * first


def selu_moments(
    mean, variance, alpha=ALPHA01, scale=LAMBDA01, weight_sum=0.0, weight_square_sum=1.0
):
    """The SNN moment map g: (mean, variance) of a layer's input -> those of its output.

    For a unit whose incoming activations have mean `mean` and variance `variance`, and
    whose weights sum to `weight_sum` (omega) with squares summing to `weight_square_sum`
    (tau), the pre-activation is z ~ N(mean*omega, variance*tau) and the output
    selu(z) has mean E[selu(z)] and variance Var[selu(z)], computed in closed form.

    Args:
        mean: Input mean (float or array).
        variance: Input variance, > 0 (float or array broadcastable with `mean`).
        alpha: SELU alpha.
        scale: SELU scale (lambda), > 0.
        weight_sum: omega = sum_i w_i.
        weight_square_sum: tau = sum_i w_i^2, > 0.

    Returns:
        `(output_mean, output_variance)`: floats, or arrays for array inputs.

    Example:

    >>> from keras_normkit.activations import selu_moments
    >>> m, v = selu_moments(0.0, 1.0)  # the fixed point (0, 1) maps to itself
    >>> round(float(m), 6), round(float(v), 6)
    (0.0, 1.0)

    Reference: Klambauer et al., 2017, arXiv:1706.02515, eqs. (4)-(5).
    """
    if np.ndim(mean) == 0 and np.ndim(variance) == 0:
        return _moments_scalar(mean, variance, alpha, scale, weight_sum, weight_square_sum)
    mu, nu = np.broadcast_arrays(np.asarray(mean, float), np.asarray(variance, float))
    out = np.array(
        [
            _moments_scalar(m, v, alpha, scale, weight_sum, weight_square_sum)
            for m, v in zip(mu.ravel(), nu.ravel(), strict=True)
        ]
    )
    return out[:, 0].reshape(mu.shape), out[:, 1].reshape(mu.shape)


def selu_jacobian(
    mean, variance, alpha=ALPHA01, scale=LAMBDA01, weight_sum=0.0, weight_square_sum=1.0
):
    """The 2x2 Jacobian of the SNN moment map `selu_moments` with respect to (mean, variance).

    Computed analytically: for z ~ N(m, v), d E[f(z)]/dm = E[f'(z)] and
    d E[f(z)]/dv = E[f''(z)]/2 (SELU's kink at 0 contributes a point mass to f'').
    A spectral norm below 1 at a fixed point means the fixed point is attracting.

    Args:
        mean: As in `selu_moments`.
        variance: As in `selu_moments`.
        alpha: As in `selu_moments`.
        scale: As in `selu_moments`.
        weight_sum: As in `selu_moments`.
        weight_square_sum: As in `selu_moments`.

    Returns:
        A `(2, 2)` NumPy array `[[dmu~/dmu, dmu~/dnu], [dnu~/dmu, dnu~/dnu]]`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.activations import selu_jacobian
    >>> float(np.linalg.norm(selu_jacobian(0.0, 1.0), 2))  # < 1: (0, 1) is attracting
    0.787...

    Reference: Klambauer et al., 2017, arXiv:1706.02515, Theorem 1.
    """
    mean, variance, omega, tau = _validate_moment_args(
        mean, variance, weight_sum, weight_square_sum
    )
    alpha, scale = _validate_selu_constants(alpha, scale)
    g = _gaussian_pieces(mean * omega, variance * tau)
    lam2a2 = scale**2 * alpha**2
    # E[f'], E[f''] (with the kink's point mass), E[(f^2)'], E[(f^2)''].
    d1 = scale * g["p_pos"] + scale * alpha * g["e1_neg"]
    d2 = scale * alpha * g["e1_neg"] + scale * (1.0 - alpha) * g["pdf0"]
    s1 = 2.0 * scale**2 * g["z_pos"] + 2.0 * lam2a2 * (g["e2_neg"] - g["e1_neg"])
    s2 = 2.0 * scale**2 * g["p_pos"] + 2.0 * lam2a2 * (2.0 * g["e2_neg"] - g["e1_neg"])
    first, _ = _moments_scalar(mean, variance, alpha, scale, omega, tau)
    dmu_dmu, dmu_dnu = omega * d1, tau * 0.5 * d2
    dsq_dmu, dsq_dnu = omega * s1, tau * 0.5 * s2
    return np.array(
        [
            [dmu_dmu, dmu_dnu],
            [dsq_dmu - 2.0 * first * dmu_dmu, dsq_dnu - 2.0 * first * dmu_dnu],
        ]
    )


def _fixed_point_arguments(mean, variance):
    """`(mean, variance)` from `selu_parameters(mean, variance)` or `selu_parameters(pair)`."""
    if isinstance(mean, np.ndarray) and mean.ndim == 0:
        mean = mean.item()
    if isinstance(mean, numbers.Real) and not isinstance(mean, bool):
        mean = check_number("mean", mean)
        variance = 1.0 if variance is None else variance
        return mean, check_number("variance", variance, minimum=0.0, strict_minimum=True)
    if isinstance(mean, (str, bytes, bool)) or not hasattr(mean, "__iter__"):
        raise TypeError(
            "`mean` must be a number, or the fixed point as a pair (mean, variance), e.g. "
            f"selu_parameters(0.0, 1.0) or selu_parameters((0.0, 1.0)). Received: mean={mean!r} "
            f"of type {type(mean).__name__}"
        )
    if variance is not None:
        raise TypeError(
            "Give the fixed point either as a pair, selu_parameters((mean, variance)), or as "
            "two numbers, selu_parameters(mean, variance), not both. Received: "
            f"mean={mean!r}, variance={variance!r}"
        )
    return check_fixed_point("fixed_point", mean)


def selu_parameters(mean=0.0, variance=None, weight_sum=0.0, weight_square_sum=1.0):
    """Solve for the SELU `(alpha, scale)` whose moment map has the fixed point (mean, variance).

    The fixed point is given as two numbers, `selu_parameters(-0.1, 2.0)`, or as one pair,
    `selu_parameters((-0.1, 2.0))`: the same `(mean, variance)` tuple, list or array that
    `SELU(fixed_point=...)` and `AlphaDropout(fixed_point=...)` take.

    Convention: by default the unit's weights sum to 0 and their squares to 1
    (`weight_sum=0.0`, `weight_square_sum=1.0`, LeCun-normal weights), so the
    pre-activation is N(0, variance) whatever the mean; this is what `SELU` solves for.
    The bioinf-jku/SNNs reference notebook (`getSELUparameters.ipynb`) instead takes the
    pre-activation to be N(mean, variance), i.e. `weight_sum=1.0`: the two conventions
    agree only at mean 0, and `weight_sum=1.0` reproduces the notebook's constants exactly
    (see the example).

    When the input distribution is fixed at (mean, variance), the pre-activation
    distribution no longer depends on (alpha, scale), so the output moments are
    mu~ = scale * a(alpha) and E[selu^2] = scale^2 * b(alpha) with a linear and b
    quadratic in alpha. The two fixed-point equations mu~ = mean and
    Var = variance become, in (u, v) = (scale, scale*alpha), a line intersecting an
    ellipse: the 2-D root finding problem has a closed-form solution (a well-conditioned
    quadratic along the line), which this function evaluates, so there is no iteration
    to fail to converge and every admissible solution is found.

    Args:
        mean: Target fixed-point mean mu*, or the pair `(mean, variance)` (then leave
            `variance` out).
        variance: Target fixed-point variance nu*, > 0 (default 1.0).
        weight_sum: omega = sum of a unit's weights (0 for normalized weights; 1 for the
            convention of the bioinf-jku/SNNs notebooks).
        weight_square_sum: tau = sum of squared weights (1 for LeCun-normal weights), > 0.

    Returns:
        `(alpha, scale)` as Python floats, with `alpha > 0` and `scale > 0`.

    Raises:
        TypeError: for a `mean` (or pair) that is not a number (or a pair of numbers), or
            a pair given together with `variance`.
        ValueError: for non-finite inputs, `variance <= 0`, `weight_square_sum <= 0`, a
            pair that has not 2 entries, or a fixed point that no SELU with positive alpha
            and scale can have.

    Example:

    >>> from keras_normkit.activations import selu_parameters
    >>> selu_parameters(0.0, 1.0)
    (1.67326324235437..., 1.05070098735548...)
    >>> selu_parameters((0.0, 1.0)) == selu_parameters(0.0, 1.0)  # the form SELU takes
    True
    >>> alpha, scale = selu_parameters(-0.1, 2.0, weight_sum=1.0)  # bioinf-jku/SNNs notebook
    >>> round(alpha, 10), round(scale, 10)
    (1.9769021954, 1.0738512396)

    Reference: Klambauer et al., 2017, arXiv:1706.02515, Section "New SELU functions".
    """
    mean, variance = _fixed_point_arguments(mean, variance)
    mean, variance, omega, tau = _validate_moment_args(
        mean, variance, weight_sum, weight_square_sum
    )
    g = _gaussian_pieces(mean * omega, variance * tau)
    # a(alpha) = a0 + a1*alpha, b(alpha) = b0 + b2*alpha^2 (b has no linear term).
    a0, a1 = g["z_pos"], g["e1_neg"] - g["p_neg"]
    b0, b2 = g["z2_pos"], g["e2_neg"] - 2.0 * g["e1_neg"] + g["p_neg"]
    target_square = variance + mean * mean  # E[selu^2] at the fixed point

    # In u = scale, v = scale*alpha the equations are a line, a0*u + a1*v = mean, and an
    # ellipse, b0*u^2 + b2*v^2 = target_square (b0, b2 > 0). Intersect them along the
    # line, p0 + t*d: a well-conditioned quadratic in t for every mean, including 0.
    norm = math.hypot(a0, a1)
    if not (norm > 0.0 and b0 > 0.0 and b2 > 0.0):
        raise ValueError(
            f"The moment equations are degenerate at (mean={mean}, variance={variance}) "
            f"for weight_sum={omega}, weight_square_sum={tau}."
        )
    du, dv = -a1 / norm, a0 / norm
    pu, pv = mean * a0 / norm**2, mean * a1 / norm**2
    c2 = b0 * du * du + b2 * dv * dv
    c1 = 2.0 * (b0 * pu * du + b2 * pv * dv)
    c0 = b0 * pu * pu + b2 * pv * pv - target_square
    disc = c1 * c1 - 4.0 * c2 * c0
    roots = []
    if disc >= 0.0:
        root = math.sqrt(disc)
        roots = [(-c1 + root) / (2.0 * c2), (-c1 - root) / (2.0 * c2)]

    solutions = []
    for t in roots:
        scale, scaled_alpha = pu + t * du, pv + t * dv
        if scale > 0.0 and scaled_alpha > 0.0 and math.isfinite(scaled_alpha / scale):
            solutions.append((scaled_alpha / scale, scale))
    if not solutions:
        raise ValueError(
            "No SELU with alpha > 0 and scale > 0 has the fixed point "
            f"(mean={mean}, variance={variance}) for weight_sum={omega}, "
            f"weight_square_sum={tau}."
        )
    # With two admissible solutions, prefer the one closest to the standard SELU.
    alpha, scale = min(solutions, key=lambda p: abs(p[0] - ALPHA01) + abs(p[1] - LAMBDA01))
    return float(alpha), float(scale)


def alpha_dropout_parameters(rate, mean=0.0, variance=1.0, alpha=ALPHA01, scale=LAMBDA01):
    """Affine correction `(a, b, saturation)` of alpha dropout for a fixed point.

    Dropped units are set to the SELU's negative saturation alpha' = -scale*alpha, then
    y <- a*y + b restores mean `mean` and variance `variance` in expectation:
    a = sqrt(nu / (q((1-q)(alpha'-mu)^2 + nu))), b = mu - a(q mu + (1-q) alpha'),
    with q = 1 - rate the keep probability.

    Args:
        rate: Drop probability in [0, 1).
        mean: The fixed-point mean mu* of the network.
        variance: The fixed-point variance nu* of the network, > 0.
        alpha: The SELU alpha (see `selu_parameters`).
        scale: The SELU scale (lambda, see `selu_parameters`).

    Returns:
        `(a, b, saturation)` as Python floats.

    Example:

    >>> from keras_normkit.activations import alpha_dropout_parameters
    >>> a, b, _ = alpha_dropout_parameters(0.05)
    >>> round(a, 6), round(b, 6)
    (0.954844, 0.083936)

    Reference: Klambauer et al., 2017, arXiv:1706.02515, Section "New Dropout Technique".
    """
    rate = float(rate)
    _check_finite(rate=rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"`rate` must be in [0, 1). Received: rate={rate}")
    mean, variance, _, _ = _validate_moment_args(mean, variance, 0.0, 1.0)
    alpha, scale = _validate_selu_constants(alpha, scale)
    q = 1.0 - rate
    saturation = -scale * alpha
    a = math.sqrt(variance / (q * ((1.0 - q) * (saturation - mean) ** 2 + variance)))
    b = mean - a * (q * mean + (1.0 - q) * saturation)
    return a, b, saturation


# --------------------------------------------------------------------------------------
# The gain of an activation (scaled weight standardization).
# --------------------------------------------------------------------------------------

# Composite Gauss-Legendre quadrature of the standard normal density over [-_REACH, _REACH]
# (the mass outside is below 1e-32), on panels of width 1/2: the kinks of the piecewise
# activations Keras ships (0 for relu/elu/selu/leaky_relu, +-1 hard_tanh, +-0.5 the
# shrinks, +-3 hard_sigmoid/hard_silu, 6 relu6) fall on panel edges, and each panel's
# 16-point rule is exact for polynomials of degree 31, so smooth pieces are integrated to
# rounding error.
_REACH = 12.0
_PANEL = 0.5
_NODES_PER_PANEL = 16


def _standard_normal_quadrature():
    nodes, weights = np.polynomial.legendre.leggauss(_NODES_PER_PANEL)
    edges = np.arange(-_REACH, _REACH + _PANEL / 2, _PANEL)
    half = _PANEL / 2.0
    centers = (edges[:-1] + edges[1:]) / 2.0
    z = (centers[:, None] + half * nodes[None, :]).ravel()
    w = (half * np.broadcast_to(weights, (len(centers), _NODES_PER_PANEL))).ravel()
    return z, w * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _resolve_activation(activation):
    if isinstance(activation, str):
        return keras.activations.get(activation)
    if not callable(activation):
        raise TypeError(
            "`activation` must be None, the name of a Keras activation or a callable "
            f"(a function or a layer). Received: activation={activation!r} of type "
            f"{type(activation).__name__}"
        )
    return activation


def activation_gain(activation):
    """The gain `gamma = 1 / sqrt(Var f(z))`, `z ~ N(0, 1)`, of an activation `f`.

    Multiplying `f`'s output by `gamma` gives it unit variance for a unit Gaussian input:
    the constant that scaled weight standardization folds into the weights of the layer
    that follows `f` (`WeightStandardization(..., activation=f)`), so that signals keep
    unit variance through `f` and the layer. For ReLU,
    `gamma = sqrt(2 / (1 - 1/pi)) = 1.7129`; for the standard SELU it is 1 (its fixed
    point); for a SELU with another fixed point `(alpha, scale)` it is
    `1 / sqrt(selu_moments(0, 1, alpha, scale)[1])`.

    The variance is computed by numerical integration against the Gaussian density
    (composite 16-point Gauss-Legendre rules on panels of width 1/2 over [-12, 12], whose
    edges hold the kinks of Keras's piecewise-linear activations; accurate to about 1e-7,
    the float32 rounding of the activation's values on backends that evaluate in float32),
    so any elementwise activation works: a Keras name, a function such as
    `keras_normkit.activations.selu` (or a `functools.partial` of it with the constants of
    another fixed point), or an activation layer such as `keras_normkit.layers.SELU`.

    Args:
        activation: `None` (the identity: gain 1), the name of a Keras activation
            (`"relu"`, `"gelu"`, `"tanh"`, ...) or an elementwise callable.

    Returns:
        The gain as a Python float.

    Example:

    >>> import math
    >>> from keras_normkit.activations import activation_gain
    >>> round(activation_gain("relu"), 6), round(math.sqrt(2 / (1 - 1 / math.pi)), 6)
    (1.712859, 1.712859)
    >>> round(activation_gain("selu"), 5), activation_gain(None)
    (1.0, 1.0)

    Reference: Brock, De, Smith, "Characterizing signal propagation to close the
    performance gap in unnormalized ResNets", ICLR 2021, arXiv:2101.08692, Section 4.
    """
    if activation is None:
        return 1.0
    function = _resolve_activation(activation)
    z, w = _standard_normal_quadrature()
    try:
        values = ops.convert_to_numpy(function(ops.convert_to_tensor(z, "float32")))
    except Exception as error:  # noqa: BLE001 - re-raised with the argument named
        raise ValueError(
            f"`activation` could not be evaluated on a vector of inputs: {error}. "
            f"Received: activation={activation!r}"
        ) from error
    values = np.asarray(values, dtype="float64")
    if values.shape != z.shape:
        raise ValueError(
            "`activation` must be elementwise (its output shaped like its input). "
            f"Received: activation={activation!r}, output shape {values.shape} for input "
            f"shape {z.shape}"
        )
    mean = float(np.sum(w * values))
    variance = float(np.sum(w * (values - mean) ** 2))
    if not (math.isfinite(variance) and variance > 0.0):
        raise ValueError(
            "`activation` must have a finite, non-zero variance for a standard normal "
            f"input. Received: activation={activation!r}, variance={variance}"
        )
    return 1.0 / math.sqrt(variance)
