"""The smooth ECE of Błasiok and Nakkiran (2023): `smooth_calibration_error` and its
reliability curve, `smooth_calibration_curve`.

The kernel-smoothed ECE at the bandwidth sigma* where the error equals the bandwidth: no
bins, no bin count to choose. Takes what `expected_calibration_error` takes: `(n, k)`
probabilities (a binary `(n,)`/`(n, 1)` probability of class 1 becomes two columns) and
integer or one-hot labels. Top-label: does the confidence c = max_k p_k match the
probability that the argmax is correct?

Reference: J. Błasiok, P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via Kernel
Smoothing", ICLR 2024, arXiv:2309.12236 (the package `relplot`).
"""

import collections

import numpy as np

from keras_normkit._validation import check_bool, check_int, check_number
from keras_normkit.calibration import _bins, _bootstrap
from keras_normkit.calibration.metrics._top_label import checked_top_label

__all__ = ["SmoothCalibrationCurve", "smooth_calibration_curve", "smooth_calibration_error"]

#: Intervals of the grid on [0, 1] the confidences are spread onto for the smooth ECE.
GRID_INTERVALS = 4096
#: Smallest bandwidth the smooth ECE's fixed-point search goes down to (relplot's `eps`).
MIN_BANDWIDTH = 1e-3
#: Bisection steps of the fixed-point search (its bracket [1e-3, 1] shrinks to 1e-3), then
#: regula falsi steps (Illinois) on the bracket, where smECE_sigma - sigma is nearly linear.
BISECTION_STEPS = 10
SECANT_STEPS = 4


def _deposit(confidence, values, weights=None):
    """(1/n) sum_i w_i values_i spread linearly onto the grid nodes j / G: `(.., G + 1)`."""
    grid = GRID_INTERVALS
    position = confidence * grid
    node = np.minimum(np.floor(position).astype(np.int64), grid - 1)
    upper = position - node
    masses = _bins.binned_sums(node, values * (1.0 - upper), grid + 1, weights)
    masses += _bins.binned_sums(node + 1, values * upper, grid + 1, weights)
    total = len(confidence) if weights is None else np.asarray(weights).sum(axis=1)[:, None]
    return masses / total


def _dct1(x):
    """DCT-I along the last axis: y_k = x_0 + (-1)^k x_N + 2 sum_{0<j<N} x_j cos(pi k j / N).

    The real FFT of the even extension (x_0, ..., x_N, x_{N-1}, ..., x_1) (NumPy only).
    """
    extended = np.concatenate([x, x[..., -2:0:-1]], axis=-1)
    return np.fft.rfft(extended, axis=-1).real


def _cosine_coefficients(masses):
    """a_k = sum_j masses_j cos(pi k j / G), k = 0..G (a DCT-I with halved end weights)."""
    scaled = masses.copy()
    scaled[..., [0, -1]] *= 2.0
    return _dct1(scaled) / 2.0


def _smoothed(coefficients, bandwidth):
    """sum_j masses_j K_sigma(t_l, t_j) at the nodes t_l, K the reflected Gaussian kernel.

    On [0, 1] with reflection at both ends, K(t, s) = 1 + 2 sum_k exp(-(pi k sigma)^2 / 2)
    cos(pi k t) cos(pi k s) (the Neumann heat kernel), so smoothing multiplies the cosine
    coefficients by exp(-(pi k sigma)^2 / 2).
    """
    grid = coefficients.shape[-1] - 1
    k = np.arange(grid + 1)
    bandwidth = np.asarray(bandwidth, dtype=np.float64)[..., None]
    damped = coefficients * np.exp(-0.5 * (np.pi * k * bandwidth) ** 2)
    last = damped[..., -1:] * np.where(k % 2, -1.0, 1.0)
    return _dct1(damped) + last


def _integral_of_abs(values):
    """Trapezoid rule for the integral over [0, 1] of |values| given at the grid nodes."""
    magnitude = np.abs(values)
    interior = magnitude.sum(axis=-1) - 0.5 * (magnitude[..., 0] + magnitude[..., -1])
    return interior / (values.shape[-1] - 1)


def smooth_error_and_bandwidth(confidence, correct, bandwidth=None, weights=None):
    """`(smECE, sigma)` of confidences and 0/1 correctness, `(B,)` arrays with `weights`."""
    coefficients = _cosine_coefficients(_deposit(confidence, correct - confidence, weights))
    if bandwidth is not None:
        sigma = np.full(coefficients.shape[:-1], float(bandwidth))
        return _integral_of_abs(_smoothed(coefficients, sigma)), sigma
    sigma = _fixed_point(lambda s: _integral_of_abs(_smoothed(coefficients, s)) - s, coefficients)
    return _integral_of_abs(_smoothed(coefficients, sigma)), sigma


def _fixed_point(gap, coefficients):
    """The root of the decreasing `gap(sigma)` in [MIN_BANDWIDTH, 1], one per row.

    smECE_sigma decreases with sigma (smoothing is a contraction in L1), so smECE_sigma -
    sigma has one root; MIN_BANDWIDTH where it is already negative there.
    """
    low = np.full(coefficients.shape[:-1], MIN_BANDWIDTH)
    high = np.ones_like(low)
    gap_low, gap_high = gap(low), gap(high)
    stuck = gap_low <= 0
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        gap_middle = gap(middle)
        above = gap_middle > 0
        low, gap_low = np.where(above, middle, low), np.where(above, gap_middle, gap_low)
        high, gap_high = np.where(above, high, middle), np.where(above, gap_high, gap_middle)
    side = np.zeros(low.shape, dtype=np.int64)  # Illinois: halve a stale end's gap
    for _ in range(SECANT_STEPS):
        with np.errstate(invalid="ignore", divide="ignore"):
            guess = high - gap_high * (high - low) / (gap_high - gap_low)
        guess = np.where(np.isfinite(guess), np.clip(guess, low, high), 0.5 * (low + high))
        gap_guess = gap(guess)
        above = gap_guess > 0
        gap_high = np.where(above & (side == 1), 0.5 * gap_high, gap_high)
        gap_low = np.where(~above & (side == -1), 0.5 * gap_low, gap_low)
        low, gap_low = np.where(above, guess, low), np.where(above, gap_guess, gap_low)
        high, gap_high = np.where(above, high, guess), np.where(above, gap_high, gap_guess)
        side = np.where(above, 1, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        root = high - gap_high * (high - low) / (gap_high - gap_low)
    root = np.where(np.isfinite(root), np.clip(root, low, high), 0.5 * (low + high))
    return np.where(stuck, MIN_BANDWIDTH, root)


def _check_bandwidth(bandwidth):
    if bandwidth is None:
        return None
    return check_number("bandwidth", bandwidth, 0.0, 1.0, strict_minimum=True)


def smooth_calibration_error(probabilities, labels, bandwidth=None, return_bandwidth=False):
    """Smooth ECE of Błasiok and Nakkiran (2023): the kernel-smoothed calibration error.

    With confidences c_i = max_k p_ik, residuals r_i = 1[argmax_k p_ik = y_i] - c_i and
    K_sigma the Gaussian kernel of width sigma reflected at 0 and 1,

        smECE_sigma = integral_0^1 | (1/n) sum_i K_sigma(t, c_i) r_i | dt,

    the mean |E[correct - c | c ~ t]| under a kernel-smoothed reliability curve, weighted by
    the smoothed density of the confidences. The smooth ECE is smECE_sigma* at the unique
    bandwidth where smECE_sigma* = sigma* (smECE_sigma decreases with sigma): a consistent
    estimator of a distance to calibration, continuous in the predictions (unlike every
    binned ECE) and with no bin count to choose.

    Computation: the confidences are spread linearly onto a grid of 4097 nodes j/4096 (as
    relplot does), the reflected kernel is applied exactly in the cosine basis
    (K(t, s) = 1 + 2 sum_k exp(-(pi k sigma)^2/2) cos(pi k t) cos(pi k s)), the integral
    is the trapezoid rule on the grid, and sigma* is found by bisection on [0.001, 1]
    (0.001 if smECE_0.001 < 0.001, as relplot). It matches a direct quadrature of the
    definition (no grid for the c_i) to about 1e-7 and agrees with `relplot.smECE` to
    1e-3 on typical inputs; where many confidences sit at the edge of [0, 1] (e.g. 10 % of
    them above 0.999), relplot's coarser discretization (about 200 evaluation points)
    moves its value by up to 3e-3 while ours still matches the quadrature.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (read as two columns: top-label).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        bandwidth: A fixed sigma in (0, 1] (relplot's `smECE_sigma`) instead of sigma*.
        return_bandwidth: Also return the bandwidth used.

    Returns:
        The smooth ECE as a Python float in [0, 1], or `(smooth_ece, bandwidth)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import smooth_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> confidence = rng.uniform(0.5, 1.0, size=5000)
    >>> p = np.stack([confidence, 1.0 - confidence], axis=1)
    >>> overconfident = (rng.random(5000) > confidence - 0.1).astype(int)
    >>> value, sigma = smooth_calibration_error(p, overconfident, return_bandwidth=True)
    >>> round(value, 2), bool(abs(value - sigma) < 1e-6)
    (0.1, True)

    Reference: J. Błasiok, P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via
    Kernel Smoothing", ICLR 2024, arXiv:2309.12236 (the package `relplot`).
    """
    bandwidth = _check_bandwidth(bandwidth)
    return_bandwidth = check_bool("return_bandwidth", return_bandwidth)
    confidence, correct = checked_top_label(probabilities, labels)
    value, sigma = smooth_error_and_bandwidth(confidence, correct, bandwidth)
    value, sigma = float(value), float(sigma)
    return (value, sigma) if return_bandwidth else value


SmoothCalibrationCurve = collections.namedtuple(
    "SmoothCalibrationCurve", ["confidence", "accuracy", "density", "bandwidth", "low", "high"]
)
SmoothCalibrationCurve.__doc__ = """The kernel-smoothed reliability curve of `smooth_calibration_curve`.

Attributes:
    confidence: `(G + 1,)` grid t = 0, 1/G, ..., 1 (G = 4096).
    accuracy: `(G + 1,)` smoothed accuracy t + (sum_i K(t, c_i) r_i) / (sum_i K(t, c_i)).
    density: `(G + 1,)` smoothed density (1/n) sum_i K(t, c_i) of the confidences (it
        integrates to 1 over [0, 1]); the curve is meaningless where it is near 0.
    bandwidth: The kernel width sigma used.
    low, high: `(G + 1,)` pointwise percentile-bootstrap band of `accuracy` (same sigma),
        or `None` without bootstrap.
"""


def _curve(coefficients_r, coefficients_1, sigma, grid):
    residual = _smoothed(coefficients_r, sigma)
    density = _smoothed(coefficients_1, sigma)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(density > 0, residual / density, 0.0)
    return grid + ratio, density


def smooth_calibration_curve(
    probabilities, labels, bandwidth=None, bootstrap=0, seed=0, confidence_level=0.95
):
    """Smoothed reliability curve of Błasiok and Nakkiran (2023), with a bootstrap band.

    acc(t) = t + sum_i K_sigma(t, c_i) r_i / sum_i K_sigma(t, c_i): the Nadaraya-Watson
    estimate of P(correct | confidence = t), with the reflected Gaussian kernel and the
    bandwidth sigma* of `smooth_calibration_error` (the area between this curve and the
    diagonal, weighted by the smoothed density, is the smooth ECE). With `bootstrap=B`,
    the examples are resampled B times (a seeded `numpy.random.Generator`) and the
    pointwise percentile interval of the curve at the same sigma is returned.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (read as two columns: top-label).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        bandwidth: A fixed sigma in (0, 1] instead of sigma*.
        bootstrap: Number of bootstrap resamples for the band (0: no band).
        seed: Seed of the resampling.
        confidence_level: Coverage of the band, in (0, 1).

    Returns:
        A `SmoothCalibrationCurve(confidence, accuracy, density, bandwidth, low, high)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import smooth_calibration_curve
    >>> rng = np.random.default_rng(0)
    >>> confidence = rng.uniform(0.5, 1.0, size=5000)
    >>> p = np.stack([confidence, 1.0 - confidence], axis=1)
    >>> labels = (rng.random(5000) > confidence - 0.1).astype(int)  # 0.1 overconfident
    >>> curve = smooth_calibration_curve(p, labels, bootstrap=50)
    >>> i = np.searchsorted(curve.confidence, 0.75)
    >>> bool(abs(curve.accuracy[i] - 0.65) < 0.02), bool(curve.low[i] < 0.65 < curve.high[i])
    (True, True)

    Reference: Błasiok & Nakkiran, ICLR 2024, arXiv:2309.12236, Section 4 and Algorithm 1.
    """
    bandwidth = _check_bandwidth(bandwidth)
    bootstrap = check_int("bootstrap", bootstrap, 0)
    confidence_level = check_number(
        "confidence_level", confidence_level, 0.0, 1.0, strict_minimum=True, strict_maximum=True
    )
    confidence, correct = checked_top_label(probabilities, labels)
    residual = correct - confidence
    coefficients_r = _cosine_coefficients(_deposit(confidence, residual))
    coefficients_1 = _cosine_coefficients(_deposit(confidence, np.ones_like(confidence)))
    if bandwidth is None:
        _, sigma = smooth_error_and_bandwidth(confidence, correct)
        bandwidth = float(sigma)
    grid = np.linspace(0.0, 1.0, GRID_INTERVALS + 1)
    accuracy, density = _curve(coefficients_r, coefficients_1, bandwidth, grid)
    low = high = None
    if bootstrap:
        curves = []
        for weights in _bootstrap.resample_weights(len(confidence), bootstrap, seed):
            coefficients_r = _cosine_coefficients(_deposit(confidence, residual, weights))
            ones = np.ones_like(confidence)
            coefficients_1 = _cosine_coefficients(_deposit(confidence, ones, weights))
            curves.append(_curve(coefficients_r, coefficients_1, bandwidth, grid)[0])
        low, high = _bootstrap.percentile_interval(np.concatenate(curves), confidence_level)
    return SmoothCalibrationCurve(grid, accuracy, density, bandwidth, low, high)
