"""Calibration measures beyond the binned ECE: debiased L2, smooth ECE, Brier score.

* `debiased_calibration_error`: Kumar, Liang, Ma (2019), the plug-in squared L2 error over
  equal-mass bins minus its bias, the per-bin variance of the label mean.
* `smooth_calibration_error`: Błasiok & Nakkiran (2023), the kernel-smoothed ECE at the
  bandwidth sigma* where the error equals the bandwidth (no bins, no bin count to choose);
  `smooth_calibration_curve` is its reliability curve.
* `brier_score`: the mean squared error of the probability vector (Brier 1950), a strictly
  proper score, with scikit-learn's convention for two classes.

All take what `expected_calibration_error` takes: `(n, k)` probabilities (a binary
`(n,)`/`(n, 1)` probability of class 1 becomes two columns) and integer or one-hot labels.
The calibration measures are top-label: they ask whether the confidence c = max_k p_k
matches the probability that the argmax is correct.
"""

import collections

import numpy as np

from keras_normkit._validation import check_bool, check_int, check_number, check_string_choice
from keras_normkit.calibration import _validation, functional

__all__ = [
    "SmoothCalibrationCurve",
    "brier_score",
    "debiased_calibration_error",
    "smooth_calibration_curve",
    "smooth_calibration_error",
]

#: Intervals of the grid on [0, 1] the confidences are spread onto for the smooth ECE.
GRID_INTERVALS = 4096
#: Smallest bandwidth the smooth ECE's fixed-point search goes down to (relplot's `eps`).
MIN_BANDWIDTH = 1e-3
#: Bisection steps of the fixed-point search (its bracket [1e-3, 1] shrinks to 1e-3), then
#: regula falsi steps (Illinois) on the bracket, where smECE_sigma - sigma is nearly linear.
BISECTION_STEPS = 10
SECANT_STEPS = 4


def _top_label(probabilities, labels):
    probabilities = _validation.check_probabilities(probabilities)
    labels = _validation.check_labels(labels, *probabilities.shape)
    return functional.top_label(probabilities, labels)


# ---------------------------------------------------------------------------------------
# Debiased L2 calibration error.
# ---------------------------------------------------------------------------------------


def debiased_squared_error(confidence, correct, num_bins, binning, weights=None, index=None):
    """Kumar et al.'s unbiased estimate of the squared L2 error; `(B,)` with `weights`.

    `index`: the bins, if already known.
    """
    if index is not None:
        pass
    elif binning == "equal_mass":
        index = functional.equal_mass_bin_indices(confidence, num_bins, weights)
    else:
        index = functional.bin_indices(confidence, num_bins)
    counts = functional.binned_sums(index, np.ones_like(confidence), num_bins, weights)
    conf_sums = functional.binned_sums(index, confidence, num_bins, weights)
    hit_sums = functional.binned_sums(index, correct, num_bins, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = hit_sums / counts
        gap = (accuracy - conf_sums / counts) ** 2
        variance = accuracy * (1.0 - accuracy) / (counts - 1.0)
    terms = np.where(counts >= 2, counts * (gap - variance), 0.0)
    return terms.sum(axis=-1) / counts.sum(axis=-1)


def debiased_calibration_error(
    probabilities, labels, num_bins=15, binning="equal_mass", squared=False, classwise=False
):
    """Debiased L2 calibration error of Kumar, Liang and Ma (2019).

    With the confidences c_i = max_k p_ik split into M bins B_m of n_m examples, mean
    confidence conf_m and accuracy acc_m, the plug-in estimate of the squared L2
    calibration error E[(P(correct | c) - c)^2] is sum_m (n_m/n) (acc_m - conf_m)^2. It is
    biased upwards: even for a calibrated model, E[(acc_m - conf_m)^2] = Var(acc_m) > 0.
    The debiased estimator subtracts an unbiased estimate of that variance in each bin,

        CE^2 = sum_m (n_m / n) [(acc_m - conf_m)^2 - acc_m (1 - acc_m) / (n_m - 1)],

    (bins with fewer than 2 examples contribute 0). It converges with fewer samples than
    the plug-in (Kumar et al., Theorem 5.4) and can be negative for a calibrated model;
    the error returned is sqrt(max(CE^2, 0)), or CE^2 itself with `squared=True` (unbiased,
    so what to average or bootstrap). The semantics of `get_calibration_error(probs,
    labels, p=2, debias=True)` of the authors' `calibration` package, in top-label mode;
    its equal-mass bins are the same as ours when M divides n and no confidences tie.

    With `classwise=True` (the package's default `mode="marginal"`), the same estimator is
    applied to each class probability p_k against 1[y = k] (bins of p_k), and the result is
    sqrt(mean_k max(CE_k^2, 0)) (`squared=True`: mean_k CE_k^2, unclipped).

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (read as two columns: top-label).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M (15, the package's default).
        binning: `"equal_mass"` (the default, as in the paper) or `"equal_width"` (see
            `expected_calibration_error`).
        squared: Return the unbiased estimate of the squared error instead of its root.
        classwise: Measure every class probability (marginal calibration) instead of the
            top label.

    Returns:
        A Python float: the L2 calibration error in [0, 1], or its squared estimate.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import debiased_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> confidence = rng.uniform(0.5, 1.0, size=20_000)
    >>> p = np.stack([confidence, 1.0 - confidence], axis=1)
    >>> calibrated = (rng.random(20_000) > confidence).astype(int)  # P(label 0) = confidence
    >>> round(debiased_calibration_error(p, calibrated), 3)
    0.0
    >>> overconfident = (rng.random(20_000) > confidence - 0.1).astype(int)
    >>> round(debiased_calibration_error(p, overconfident), 2)
    0.1

    Reference: A. Kumar, P. Liang, T. Ma, "Verified Uncertainty Calibration", NeurIPS 2019,
    arXiv:1909.10155, Section 5 (the debiased estimator).
    """
    num_bins = _validation.check_num_bins(num_bins)
    binning = check_string_choice("binning", binning, functional.BINNINGS)
    squared = check_bool("squared", squared)
    classwise = check_bool("classwise", classwise)
    if not classwise:
        confidence, correct = _top_label(probabilities, labels)
        value = float(debiased_squared_error(confidence, correct, num_bins, binning))
        return value if squared else float(np.sqrt(max(value, 0.0)))
    probabilities = _validation.check_probabilities(probabilities)
    labels = _validation.check_labels(labels, *probabilities.shape)
    per_class = np.array(
        [
            debiased_squared_error(column, (labels == k).astype(np.float64), num_bins, binning)
            for k, column in enumerate(probabilities.T)
        ]
    )
    if squared:
        return float(per_class.mean())
    return float(np.sqrt(np.maximum(per_class, 0.0).mean()))


# ---------------------------------------------------------------------------------------
# Smooth ECE.
# ---------------------------------------------------------------------------------------


def _deposit(confidence, values, weights=None):
    """(1/n) sum_i w_i values_i spread linearly onto the grid nodes j / G: `(.., G + 1)`."""
    grid = GRID_INTERVALS
    position = confidence * grid
    node = np.minimum(np.floor(position).astype(np.int64), grid - 1)
    upper = position - node
    masses = functional.binned_sums(node, values * (1.0 - upper), grid + 1, weights)
    masses += functional.binned_sums(node + 1, values * upper, grid + 1, weights)
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
    confidence, correct = _top_label(probabilities, labels)
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
    confidence, correct = _top_label(probabilities, labels)
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
        from keras_normkit.calibration import report

        curves = []
        for weights in report.resample_weights(len(confidence), bootstrap, seed):
            coefficients_r = _cosine_coefficients(_deposit(confidence, residual, weights))
            ones = np.ones_like(confidence)
            coefficients_1 = _cosine_coefficients(_deposit(confidence, ones, weights))
            curves.append(_curve(coefficients_r, coefficients_1, bandwidth, grid)[0])
        tail = 50.0 * (1.0 - confidence_level)
        low, high = np.percentile(np.concatenate(curves), [tail, 100.0 - tail], axis=0)
    return SmoothCalibrationCurve(grid, accuracy, density, bandwidth, low, high)


# ---------------------------------------------------------------------------------------
# Brier score.
# ---------------------------------------------------------------------------------------


def brier_losses(probabilities, labels):
    """Per-example sum_k (p_ik - 1[y_i = k])^2 of validated inputs."""
    squared = probabilities**2
    rows = np.arange(len(labels))
    return squared.sum(axis=1) - 2.0 * probabilities[rows, labels] + 1.0


def _check_scale_by_half(scale_by_half):
    if isinstance(scale_by_half, str):
        return check_string_choice("scale_by_half", scale_by_half, ("auto",))
    return check_bool("scale_by_half", scale_by_half)


def brier_scale(scale_by_half, num_classes):
    """1/2 with `scale_by_half` True, or `"auto"` and two classes; 1 otherwise."""
    half = num_classes == 2 if scale_by_half == "auto" else scale_by_half
    return 0.5 if half else 1.0


def brier_score(probabilities, labels, scale_by_half="auto"):
    """Brier score: BS = (1/n) sum_i sum_k (p_ik - y_ik)^2, y_ik = 1 if y_i = k else 0.

    The mean squared distance between the predicted probability vector and the one-hot
    label (Brier 1950), in [0, 2]; a strictly proper scoring rule, so it rewards both
    calibration and sharpness (it decomposes into calibration minus resolution plus
    uncertainty, Murphy 1973). Convention of scikit-learn's `brier_score_loss`: with
    `scale_by_half="auto"` the two-class score is halved to (1/n) sum_i (p_i1 - y_i)^2, the
    usual binary Brier score in [0, 1], and the multiclass score is not.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        scale_by_half: `"auto"` (halve for two classes), `True` or `False`.

    Returns:
        The Brier score as a Python float.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import brier_score
    >>> round(brier_score(np.array([0.9, 0.2]), [1, 1]), 4)  # ((0.1)^2 + (0.8)^2) / 2
    0.325
    >>> round(brier_score(np.array([[0.7, 0.2, 0.1]]), [0]), 4)  # 0.3^2 + 0.2^2 + 0.1^2
    0.14

    Reference: G. W. Brier, "Verification of forecasts expressed in terms of probability",
    Monthly Weather Review 78(1), 1950.
    """
    scale_by_half = _check_scale_by_half(scale_by_half)
    probabilities = _validation.check_probabilities(probabilities)
    labels = _validation.check_labels(labels, *probabilities.shape)
    scale = brier_scale(scale_by_half, probabilities.shape[1])
    return float(scale * brier_losses(probabilities, labels).mean())
