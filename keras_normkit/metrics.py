"""Streaming Keras metrics: `ExpectedCalibrationError` (equal-width or equal-mass), `BrierScore`."""

import math

import keras
from keras import ops

from keras_normkit._validation import check_bool, check_int, check_string_choice
from keras_normkit.calibration import _bins

__all__ = ["BrierScore", "ExpectedCalibrationError"]

#: Fine bins of the equal-mass streaming ECE, equally spaced in s = -log(1 - confidence)
#: on [0, FINE_SURPRISE] (the last also holds every confidence above 1 - e^-16).
FINE_BINS = 4096
FINE_SURPRISE = 16.0


def _predictions(y_true, y_pred, dtype):
    """`(probabilities (n, k), sparse labels (n,), k)` of a batch; k = 1 for a sigmoid."""
    y_pred = ops.convert_to_tensor(y_pred, dtype=dtype)
    y_true = ops.convert_to_tensor(y_true)
    num_classes = y_pred.shape[-1] if len(y_pred.shape) else None
    if num_classes is None:
        raise ValueError(
            "`y_pred` must have a known last dimension (number of classes). Received: "
            f"y_pred.shape={y_pred.shape}"
        )
    one_hot = len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == num_classes
    y_pred = ops.reshape(y_pred, (-1, num_classes))
    if num_classes > 1 and one_hot:
        labels = ops.argmax(ops.reshape(y_true, (-1, num_classes)), axis=-1)
    else:
        labels = ops.reshape(y_true, (-1,))
    return y_pred, ops.cast(labels, "int32"), num_classes


def _weights(sample_weight, dtype):
    if sample_weight is None:
        return None
    return ops.reshape(ops.convert_to_tensor(sample_weight, dtype=dtype), (-1,))


@keras.saving.register_keras_serializable(package="keras_normkit")
class ExpectedCalibrationError(keras.metrics.Metric):
    """Streaming expected calibration error, ECE = sum_m (|B_m| / n) |acc(B_m) - conf(B_m)|.

    `binning="equal_width"` (default): the confidence max_k p_k of each example falls in
    one of M equal-width bins B_m = ((m-1)/M, m/M]. The state is, per bin, the (weighted)
    number of examples, the sum of their confidences and the number of correct argmax
    predictions, so batches and replicas combine by summation (works under
    `tf.distribute`) and the result equals
    `keras_normkit.calibration.expected_calibration_error` on all the data seen:
    ECE = sum_m |correct_m - confidence_m| / sum_m count_m.

    `binning="equal_mass"` (Nixon et al. 2019): equal-mass bins need the ranks of all the
    confidences, which no fixed-size state holds. The same three sums are kept on 4096
    fine bins equally spaced in s = -log(1 - confidence) over [0, 16] (width 0.0039 in s:
    0.4 % of 1 - confidence, so confidences near 1 stay apart), and `result()` merges the
    fine bins into M equal-mass bins with the rule of
    `expected_calibration_error(..., binning="equal_mass")`, each fine bin acting as a
    group of tied confidences (it goes to the bin of the rank of its first example). The
    result equals the function's exactly when the confidences in each fine bin are equal,
    and is otherwise that of confidences rounded to their fine bins (the mean confidence
    of each bin stays exact).

    `y_pred` must be probabilities (softmax outputs, or the sigmoid probability of class 1
    with shape `(batch, 1)`); inside a compiled graph they cannot be checked, so use
    `calibration.expected_calibration_error` for a checked one-off computation.

    Args:
        num_bins: Number of bins M (15 in Guo et al.).
        binning: `"equal_width"` or `"equal_mass"`.
        name: Name of the metric.
        dtype: Dtype of the state and result.

    Call arguments:
        y_true: Integer labels `(batch,)`/`(batch, 1)` or one-hot `(batch, k)`.
        y_pred: Probabilities `(batch, k)`, or `(batch, 1)` for a binary classifier.
        sample_weight: Optional `(batch,)` weights.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.metrics import ExpectedCalibrationError
    >>> metric = ExpectedCalibrationError(num_bins=5)
    >>> metric.update_state([0, 1], np.array([[0.9, 0.1], [0.9, 0.1]]))
    >>> metric.update_state([0, 1], np.array([[0.6, 0.4], [0.3, 0.7]]))
    >>> round(float(metric.result()), 4)
    0.375
    >>> metric = ExpectedCalibrationError(num_bins=2, binning="equal_mass")
    >>> metric.update_state([0, 1, 0, 1], np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.8, 0.2]]))
    >>> round(float(metric.result()), 4)  # bins {0.6, 0.8}: gap |1 - 1.4|, {0.9, 0.9}: |1 - 1.8|
    0.3

    References: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, eq. (3); Nixon et al., "Measuring Calibration in Deep Learning",
    CVPR Workshops 2019, arXiv:1904.01685.
    """

    def __init__(
        self, num_bins=15, binning="equal_width", name="expected_calibration_error", dtype=None
    ):
        super().__init__(name=name, dtype=dtype)
        num_bins = check_int("num_bins", num_bins, 1)
        self.num_bins = num_bins
        self.binning = check_string_choice("binning", binning, _bins.BINNINGS)
        size = num_bins if self.binning == "equal_width" else FINE_BINS
        # The edges m / M as the largest values of the metric's dtype <= m / M, once: a
        # confidence on an edge falls in the bin `calibration_bins` gives it in float64.
        self._edges = _bins.equal_width_edges(num_bins, self.dtype)
        self.bin_counts = self.add_variable(
            shape=(size,), initializer="zeros", dtype=self.dtype, name="bin_counts"
        )
        self.bin_confidence_sums = self.add_variable(
            shape=(size,), initializer="zeros", dtype=self.dtype, name="bin_confidence_sums"
        )
        self.bin_correct_sums = self.add_variable(
            shape=(size,), initializer="zeros", dtype=self.dtype, name="bin_correct_sums"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred, labels, num_classes = _predictions(y_true, y_pred, self.dtype)
        if num_classes == 1:
            positive = y_pred[:, 0]
            confidence = ops.maximum(positive, 1.0 - positive)
            predicted = ops.cast(positive > 0.5, "int32")
        else:
            confidence = ops.max(y_pred, axis=-1)
            predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        correct = ops.cast(ops.equal(labels, predicted), self.dtype)
        weight = _weights(sample_weight, self.dtype)
        if self.binning == "equal_mass":
            self._update_fine(confidence, correct, weight)
            return
        edges = ops.convert_to_tensor(self._edges, self.dtype)
        index = ops.sum(
            ops.cast(ops.expand_dims(confidence, 1) > ops.expand_dims(edges, 0), "int32"), axis=1
        )
        in_bin = ops.one_hot(index, self.num_bins, dtype=self.dtype)
        if weight is not None:
            in_bin = in_bin * ops.expand_dims(weight, 1)
        self.bin_counts.assign_add(ops.sum(in_bin, axis=0))
        self.bin_confidence_sums.assign_add(ops.matmul(confidence, in_bin))
        self.bin_correct_sums.assign_add(ops.matmul(correct, in_bin))

    def _update_fine(self, confidence, correct, weight):
        floor = math.exp(-FINE_SURPRISE)
        surprise = -ops.log(ops.maximum(1.0 - ops.cast(confidence, "float32"), floor))
        index = ops.cast(ops.floor(surprise * (FINE_BINS / FINE_SURPRISE)), "int32")
        index = ops.clip(index, 0, FINE_BINS - 1)
        ones = ops.ones_like(confidence)
        if weight is not None:
            ones, confidence, correct = ones * weight, confidence * weight, correct * weight
        for variable, values in (
            (self.bin_counts, ones),
            (self.bin_confidence_sums, confidence),
            (self.bin_correct_sums, correct),
        ):
            variable.assign_add(ops.segment_sum(values, index, num_segments=FINE_BINS))

    def result(self):
        gaps = self.bin_correct_sums - self.bin_confidence_sums
        total = ops.sum(self.bin_counts)
        if self.binning == "equal_mass":
            below = ops.cumsum(self.bin_counts) - self.bin_counts
            coarse = ops.floor(ops.divide_no_nan(below * self.num_bins, total))
            coarse = ops.clip(ops.cast(coarse, "int32"), 0, self.num_bins - 1)
            gaps = ops.segment_sum(gaps, coarse, num_segments=self.num_bins)
        return ops.divide_no_nan(ops.sum(ops.abs(gaps)), total)

    def reset_state(self):
        for variable in (self.bin_counts, self.bin_confidence_sums, self.bin_correct_sums):
            variable.assign(ops.zeros(variable.shape, dtype=variable.dtype))

    def get_config(self):
        return {
            "name": self.name,
            "dtype": self.dtype,
            "num_bins": self.num_bins,
            "binning": self.binning,
        }


@keras.saving.register_keras_serializable(package="keras_normkit")
class BrierScore(keras.metrics.Metric):
    """Streaming Brier score: BS = (1/n) sum_i sum_k (p_ik - y_ik)^2 (one-hot y).

    The state is the (weighted) sum of the per-example scores and the (weighted) number of
    examples, so batches and replicas combine by summation, and the result equals
    `keras_normkit.calibration.brier_score` on all the data seen. Convention of
    scikit-learn's `brier_score_loss`: with `scale_by_half="auto"` the score of a
    two-class model (a `(batch, 1)` sigmoid output or `(batch, 2)` softmax) is halved to
    (1/n) sum_i (p_i1 - y_i)^2, in [0, 1]; with three or more classes it is not (range
    [0, 2]). Unlike `keras.metrics.MeanSquaredError`, which averages over the k columns
    (and so divides by k), this sums them.

    Args:
        scale_by_half: `"auto"`, `True` or `False`.
        name: Name of the metric.
        dtype: Dtype of the state and result.

    Call arguments:
        y_true: Integer labels `(batch,)`/`(batch, 1)` or one-hot `(batch, k)`.
        y_pred: Probabilities `(batch, k)`, or `(batch, 1)` for a binary classifier.
        sample_weight: Optional `(batch,)` weights.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.metrics import BrierScore
    >>> metric = BrierScore()
    >>> metric.update_state([0, 2], np.array([[0.7, 0.2, 0.1], [0.2, 0.2, 0.6]]))
    >>> round(float(metric.result()), 4)  # (0.09 + 0.04 + 0.01 + 0.04 + 0.04 + 0.16) / 2
    0.19

    Reference: G. W. Brier, "Verification of forecasts expressed in terms of probability",
    Monthly Weather Review 78(1), 1950.
    """

    def __init__(self, scale_by_half="auto", name="brier_score", dtype=None):
        super().__init__(name=name, dtype=dtype)
        if isinstance(scale_by_half, str):
            scale_by_half = check_string_choice("scale_by_half", scale_by_half, ("auto",))
        else:
            scale_by_half = check_bool("scale_by_half", scale_by_half)
        self.scale_by_half = scale_by_half
        self.total = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="total"
        )
        self.count = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="count"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred, labels, num_classes = _predictions(y_true, y_pred, self.dtype)
        if num_classes == 1:
            y_pred = ops.concatenate([1.0 - y_pred, y_pred], axis=1)
            num_classes = 2
        one_hot = ops.one_hot(labels, num_classes, dtype=self.dtype)
        scores = ops.sum(ops.square(y_pred - one_hot), axis=1)
        half = num_classes == 2 if self.scale_by_half == "auto" else self.scale_by_half
        if half:
            scores = scores * 0.5
        ones = ops.ones_like(scores)
        weight = _weights(sample_weight, self.dtype)
        if weight is not None:
            scores, ones = scores * weight, ones * weight
        self.total.assign_add(ops.sum(scores))
        self.count.assign_add(ops.sum(ones))

    def result(self):
        return ops.divide_no_nan(self.total, self.count)

    def reset_state(self):
        for variable in (self.total, self.count):
            variable.assign(ops.zeros(variable.shape, dtype=variable.dtype))

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "scale_by_half": self.scale_by_half}
