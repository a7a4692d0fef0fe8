"""The binned calibration measures: reliability bins, ECE (equal-width or equal-mass), MCE and
class-wise ECE.

All functions take NumPy arrays (or `keras.ops` tensors) and return NumPy values.
Probabilities are `(n, k)` softmax outputs, or `(n,)`/`(n, 1)` probabilities of class 1
for a binary classifier; labels are integers `(n,)`/`(n, 1)` or one-hot `(n, k)`.

The bins are those of Guo et al. (2017): M equal-width intervals B_m = ((m-1)/M, m/M] of
the confidence (a confidence of exactly m/M falls in bin m, not m+1; a probability of
exactly 0, possible only in the class-wise measure, falls in the first bin). The
equal-mass bins of Nixon et al. (2019) are defined in `equal_mass_bin_indices` of
`calibration/_bins.py`, the binning these measures share with histogram binning and the
streaming `keras_normkit.metrics.ExpectedCalibrationError`.

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599.
"""

import collections

import numpy as np

from keras_normkit._validation import check_string_choice
from keras_normkit.calibration import _bins, _validation
from keras_normkit.calibration.metrics._top_label import checked_top_label

__all__ = [
    "CalibrationBins",
    "calibration_bins",
    "classwise_expected_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
]

CalibrationBins = collections.namedtuple(
    "CalibrationBins", ["edges", "counts", "confidence", "accuracy"]
)
CalibrationBins.__doc__ = """Per-bin statistics of a reliability diagram.

Attributes:
    edges: `(M + 1,)` bin edges `0, 1/M, ..., 1`.
    counts: `(M,)` number of examples per bin.
    confidence: `(M,)` mean confidence per bin (NaN for an empty bin).
    accuracy: `(M,)` accuracy per bin (NaN for an empty bin).
"""


def ece_from_top_label(confidence, correct, num_bins, binning, weights=None, index=None):
    """ECE of confidences and 0/1 correctness; `(B,)` with bootstrap `weights` `(B, n)`.

    ECE = sum_m (|B_m| / n) |acc(B_m) - conf(B_m)| = (1/n) sum_m |sum_{i in B_m} (c_i - p_i)|.
    `index`: the bins, if already known.
    """
    if index is not None:
        pass
    elif binning == "equal_width":
        index = _bins.bin_indices(confidence, num_bins)
    else:
        index = _bins.equal_mass_bin_indices(confidence, num_bins, weights)
    gaps = _bins.binned_sums(index, correct - confidence, num_bins, weights)
    total = len(confidence) if weights is None else np.asarray(weights).sum(axis=1)
    return np.abs(gaps).sum(axis=-1) / total


def _binned(values, hits, num_bins):
    """Per-bin counts, mean value and mean hit rate (NaN where a bin is empty)."""
    index = _bins.bin_indices(values, num_bins)
    counts = np.bincount(index, minlength=num_bins).astype(np.int64)
    value_sums = np.bincount(index, weights=values, minlength=num_bins)
    hit_sums = np.bincount(index, weights=hits.astype(np.float64), minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts, value_sums / counts, hit_sums / counts


def calibration_bins(probabilities, labels, num_bins=15):
    """Confidence bins of a classifier: count, mean confidence and accuracy per bin.

    The confidence of an example is its largest predicted probability, max_k p_k; it falls
    in bin B_m = ((m-1)/M, m/M]. For each bin, conf(B_m) is the mean confidence and
    acc(B_m) the fraction of its examples whose argmax is the label. These are the bars of
    a reliability diagram and the terms of ECE and MCE.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of equal-width bins M (15 in Guo et al.).

    Returns:
        A `CalibrationBins(edges, counts, confidence, accuracy)` of NumPy arrays.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import calibration_bins
    >>> bins = calibration_bins(np.array([[0.9, 0.1], [0.4, 0.6]]), [0, 0], num_bins=5)
    >>> bins.counts.tolist()
    [0, 0, 1, 0, 1]

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 2.
    """
    num_bins = _validation.check_num_bins(num_bins)
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    counts, mean_confidence, accuracy = _binned(confidence, correct, num_bins)
    edges = np.arange(num_bins + 1, dtype=np.float64) / num_bins
    return CalibrationBins(edges, counts, mean_confidence, accuracy)


def expected_calibration_error(probabilities, labels, num_bins=15, binning="equal_width"):
    """Expected calibration error: ECE = sum_m (|B_m| / n) * |acc(B_m) - conf(B_m)|.

    The weighted mean gap between accuracy acc(B_m) and mean confidence conf(B_m) over M
    bins of the confidence max_k p_k. 0 for a perfectly calibrated classifier in the limit;
    on a finite sample it is biased upwards (each bin's gap is an absolute value of noise)
    and it depends on M, so compare ECEs computed with the same bins and n (see
    `debiased_calibration_error` and `smooth_calibration_error` for estimators without
    these faults, and `calibration_report` for error bars).

    * `binning="equal_width"` (Guo et al. 2017): B_m = ((m-1)/M, m/M] (see
      `calibration_bins`).
    * `binning="equal_mass"` (adaptive ECE, Nixon et al. 2019): each bin holds n/M of the
      examples sorted by confidence; bin m holds ranks [m n/M, (m+1) n/M), tied confidences
      stay in one bin (see `equal_mass_bin_indices` in `calibration/_bins.py`). Bins then follow the
      data, so regions where a modern network puts most of its confidences (near 1) are
      resolved finely.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (read as two columns, so the confidence is
            max(p, 1 - p)). Logits are rejected with a `ValueError`.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M (15 in Guo et al.).
        binning: `"equal_width"` (the default, Guo et al.) or `"equal_mass"` (Nixon et al.).

    Returns:
        The ECE as a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import expected_calibration_error
    >>> p = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.3, 0.7]])
    >>> round(expected_calibration_error(p, [0, 1, 0, 1], num_bins=5), 4)
    0.375
    >>> round(expected_calibration_error(p, [0, 1, 0, 1], num_bins=2, binning="equal_mass"), 4)
    0.375

    References: Guo et al., ICML 2017, arXiv:1706.04599, eq. (3); Nixon, Dusenberry,
    Zhang, Jerfel, Tran, "Measuring Calibration in Deep Learning", CVPR Workshops 2019,
    arXiv:1904.01685 (adaptive calibration error).
    """
    binning = check_string_choice("binning", binning, _bins.BINNINGS)
    if binning == "equal_width":
        bins = calibration_bins(probabilities, labels, num_bins)
        full = bins.counts > 0
        weights = bins.counts[full] / bins.counts.sum()
        return float(np.sum(weights * np.abs(bins.accuracy[full] - bins.confidence[full])))
    num_bins = _validation.check_num_bins(num_bins)
    confidence, correct = checked_top_label(probabilities, labels)
    return float(ece_from_top_label(confidence, correct, num_bins, binning))


def maximum_calibration_error(probabilities, labels, num_bins=15):
    """Maximum calibration error: MCE = max_m |acc(B_m) - conf(B_m)| over non-empty bins.

    The worst gap between accuracy and confidence over the M equal-width confidence bins
    B_m = ((m-1)/M, m/M]; relevant where a confident mistake is costly. Empty bins are
    skipped, so a bin holding a single example counts fully: MCE is noisy on small sets.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M.

    Returns:
        The MCE as a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import maximum_calibration_error
    >>> p = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.3, 0.7]])
    >>> round(maximum_calibration_error(p, [0, 1, 0, 1], num_bins=5), 4)
    0.4

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, eq. (5).
    """
    bins = calibration_bins(probabilities, labels, num_bins)
    full = bins.counts > 0
    return float(np.max(np.abs(bins.accuracy[full] - bins.confidence[full])))


def classwise_expected_calibration_error(probabilities, labels, num_bins=15):
    """Class-wise ECE: the mean over classes k of the ECE of the probability p_k.

    classwise-ECE = (1/K) sum_k sum_m (|B_mk| / n) * |freq(B_mk) - conf(B_mk)|, where
    B_mk = examples with p_k in ((m-1)/M, m/M] (p_k = 0 in the first bin), conf(B_mk) their
    mean p_k and freq(B_mk) the fraction of them whose label is k. Unlike ECE it also
    checks the probabilities of the classes that are not predicted.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (then K = 2).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M.

    Returns:
        The class-wise ECE as a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import classwise_expected_calibration_error
    >>> p = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> round(classwise_expected_calibration_error(p, [0, 1], num_bins=10), 4)
    0.15

    Reference: Kull et al., "Beyond temperature scaling", NeurIPS 2019, arXiv:1910.12656
    (the per-class generalization of Guo et al., 2017).
    """
    num_bins = _validation.check_num_bins(num_bins)
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    n, num_classes = probabilities.shape
    total = 0.0
    for k in range(num_classes):
        counts, conf, freq = _binned(probabilities[:, k], labels == k, num_bins)
        full = counts > 0
        total += float(np.sum(counts[full] / n * np.abs(freq[full] - conf[full])))
    return total / num_classes
