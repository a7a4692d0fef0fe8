"""Calibration measures on arrays: binning, ECE, MCE, class-wise ECE and NLL.

All functions take NumPy arrays (or `keras.ops` tensors) and return NumPy values.
Probabilities are `(n, k)` softmax outputs, or `(n,)`/`(n, 1)` probabilities of class 1
for a binary classifier; labels are integers `(n,)`/`(n, 1)` or one-hot `(n, k)`.

The bins are those of Guo et al. (2017): M equal-width intervals B_m = ((m-1)/M, m/M] of
the confidence (a confidence of exactly m/M falls in bin m, not m+1; a probability of
exactly 0, possible only in the class-wise measure, falls in the first bin).

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599.
"""

import collections

import numpy as np

from keras_normkit.calibration import _validation

__all__ = [
    "CalibrationBins",
    "calibration_bins",
    "expected_calibration_error",
    "maximum_calibration_error",
    "classwise_expected_calibration_error",
    "negative_log_likelihood",
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


def bin_indices(values, num_bins):
    """Index m - 1 of the bin ((m-1)/M, m/M] holding each value (0 also goes to bin 0)."""
    edges = np.arange(1, num_bins, dtype=np.float64) / num_bins
    return np.searchsorted(edges, values, side="left")


def _binned(values, hits, num_bins):
    """Per-bin counts, mean value and mean hit rate (NaN where a bin is empty)."""
    index = bin_indices(values, num_bins)
    counts = np.bincount(index, minlength=num_bins).astype(np.int64)
    value_sums = np.bincount(index, weights=values, minlength=num_bins)
    hit_sums = np.bincount(index, weights=hits.astype(np.float64), minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts, value_sums / counts, hit_sums / counts


def _checked(probabilities, labels):
    probabilities = _validation.check_probabilities(probabilities)
    labels = _validation.check_labels(labels, *probabilities.shape)
    return probabilities, labels


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
    probabilities, labels = _checked(probabilities, labels)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    counts, mean_confidence, accuracy = _binned(confidence, correct, num_bins)
    edges = np.arange(num_bins + 1, dtype=np.float64) / num_bins
    return CalibrationBins(edges, counts, mean_confidence, accuracy)


def expected_calibration_error(probabilities, labels, num_bins=15):
    """Expected calibration error: ECE = sum_m (|B_m| / n) * |acc(B_m) - conf(B_m)|.

    The weighted mean gap between accuracy and confidence over M equal-width confidence
    bins B_m = ((m-1)/M, m/M] (see `calibration_bins`). 0 for a perfectly calibrated
    classifier; the value depends on M, so compare ECEs computed with the same bins.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier. Logits are rejected with a `ValueError`.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M (15 in Guo et al.).

    Returns:
        The ECE as a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import expected_calibration_error
    >>> p = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.3, 0.7]])
    >>> round(expected_calibration_error(p, [0, 1, 0, 1], num_bins=5), 4)
    0.375

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, eq. (3).
    """
    bins = calibration_bins(probabilities, labels, num_bins)
    full = bins.counts > 0
    weights = bins.counts[full] / bins.counts.sum()
    return float(np.sum(weights * np.abs(bins.accuracy[full] - bins.confidence[full])))


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
    probabilities, labels = _checked(probabilities, labels)
    n, num_classes = probabilities.shape
    total = 0.0
    for k in range(num_classes):
        counts, conf, freq = _binned(probabilities[:, k], labels == k, num_bins)
        full = counts > 0
        total += float(np.sum(counts[full] / n * np.abs(freq[full] - conf[full])))
    return total / num_classes


def log_softmax(logits):
    """Row-wise log-softmax in float64 of validated 2-D logits (binary `(n, 1)` -> 2 columns)."""
    z = np.asarray(logits, dtype=np.float64)
    if z.shape[1] == 1:
        z = np.concatenate([np.zeros_like(z), z], axis=1)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def negative_log_likelihood(y_pred, labels, from_logits=False):
    """Mean negative log-likelihood NLL = -(1/n) sum_i log p_i[y_i] of the true labels.

    The quantity temperature scaling minimizes, and a proper scoring rule: it rewards both
    accuracy and calibration. With `from_logits=True`, `y_pred` are logits and p =
    softmax(z) (or sigmoid(z) for a single binary logit), computed stably in float64.
    A probability of exactly 0 on a true label gives `inf` (no clipping).

    Args:
        y_pred: `(n, k)` probabilities (or logits with `from_logits=True`), or `(n,)`/
            `(n, 1)` for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        from_logits: Whether `y_pred` are logits rather than probabilities.

    Returns:
        The mean NLL in nats, a Python float.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import negative_log_likelihood
    >>> round(negative_log_likelihood(np.array([[0.5, 0.5], [0.9, 0.1]]), [1, 0]), 4)
    0.3993

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 2.
    """
    if from_logits:
        logits, _ = _validation.check_logits(y_pred, "y_pred")
        log_p = log_softmax(logits)
    else:
        probabilities = _validation.check_probabilities(y_pred, "y_pred")
        with np.errstate(divide="ignore"):
            log_p = np.log(probabilities)
    labels = _validation.check_labels(labels, *log_p.shape)
    return float(-np.mean(log_p[np.arange(len(labels)), labels]))
