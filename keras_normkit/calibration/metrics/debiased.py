"""The debiased L2 calibration error of Kumar, Liang and Ma (2019): `debiased_calibration_error`.

The plug-in squared L2 error over equal-mass bins minus its bias, the per-bin variance of
the label mean. Takes what `expected_calibration_error` takes: `(n, k)` probabilities (a
binary `(n,)`/`(n, 1)` probability of class 1 becomes two columns) and integer or one-hot
labels; top-label by default, class-wise on request.

Reference: A. Kumar, P. Liang, T. Ma, "Verified Uncertainty Calibration", NeurIPS 2019,
arXiv:1909.10155, Section 5.
"""

import numpy as np

from keras_normkit._validation import check_bool, check_string_choice
from keras_normkit.calibration import _bins, _validation
from keras_normkit.calibration.metrics._top_label import checked_top_label

__all__ = ["debiased_calibration_error"]


def debiased_squared_error(confidence, correct, num_bins, binning, weights=None, index=None):
    """Kumar et al.'s unbiased estimate of the squared L2 error; `(B,)` with `weights`.

    `index`: the bins, if already known.
    """
    if index is not None:
        pass
    elif binning == "equal_mass":
        index = _bins.equal_mass_bin_indices(confidence, num_bins, weights)
    else:
        index = _bins.bin_indices(confidence, num_bins)
    counts = _bins.binned_sums(index, np.ones_like(confidence), num_bins, weights)
    conf_sums = _bins.binned_sums(index, confidence, num_bins, weights)
    hit_sums = _bins.binned_sums(index, correct, num_bins, weights)
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
    binning = check_string_choice("binning", binning, _bins.BINNINGS)
    squared = check_bool("squared", squared)
    classwise = check_bool("classwise", classwise)
    if not classwise:
        confidence, correct = checked_top_label(probabilities, labels)
        value = float(debiased_squared_error(confidence, correct, num_bins, binning))
        return value if squared else float(np.sqrt(max(value, 0.0)))
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    per_class = np.array(
        [
            debiased_squared_error(column, (labels == k).astype(np.float64), num_bins, binning)
            for k, column in enumerate(probabilities.T)
        ]
    )
    if squared:
        return float(per_class.mean())
    return float(np.sqrt(np.maximum(per_class, 0.0).mean()))
