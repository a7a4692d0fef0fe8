"""Streaming Keras metrics: `ExpectedCalibrationError`."""

import keras
from keras import ops

from keras_normkit._validation import check_int

__all__ = ["ExpectedCalibrationError"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class ExpectedCalibrationError(keras.metrics.Metric):
    """Streaming expected calibration error, ECE = sum_m (|B_m| / n) |acc(B_m) - conf(B_m)|.

    The confidence max_k p_k of each example falls in one of M equal-width bins
    B_m = ((m-1)/M, m/M]. The state is, per bin, the (weighted) number of examples, the sum
    of their confidences and the number of correct argmax predictions, so batches and
    replicas combine by summation (works under `tf.distribute`) and the result equals
    `keras_normkit.calibration.expected_calibration_error` on all the data seen:
    ECE = sum_m |correct_m - confidence_m| / sum_m count_m.

    `y_pred` must be probabilities (softmax outputs, or the sigmoid probability of class 1
    with shape `(batch, 1)`); inside a compiled graph they cannot be checked, so use
    `calibration.expected_calibration_error` for a checked one-off computation.

    Args:
        num_bins: Number of bins M (15 in Guo et al.).
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

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, eq. (3).
    """

    def __init__(self, num_bins=15, name="expected_calibration_error", dtype=None):
        super().__init__(name=name, dtype=dtype)
        num_bins = check_int("num_bins", num_bins, 1)
        self.num_bins = num_bins
        self.bin_counts = self.add_variable(
            shape=(num_bins,), initializer="zeros", dtype=self.dtype, name="bin_counts"
        )
        self.bin_confidence_sums = self.add_variable(
            shape=(num_bins,), initializer="zeros", dtype=self.dtype, name="bin_confidence_sums"
        )
        self.bin_correct_sums = self.add_variable(
            shape=(num_bins,), initializer="zeros", dtype=self.dtype, name="bin_correct_sums"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.convert_to_tensor(y_pred, dtype=self.dtype)
        y_true = ops.convert_to_tensor(y_true)
        num_classes = y_pred.shape[-1] if len(y_pred.shape) else None
        one_hot = len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == num_classes
        if num_classes is None:
            raise ValueError(
                "`y_pred` must have a known last dimension (number of classes). Received: "
                f"y_pred.shape={y_pred.shape}"
            )
        y_pred = ops.reshape(y_pred, (-1, num_classes))
        if num_classes == 1:
            positive = y_pred[:, 0]
            confidence = ops.maximum(positive, 1.0 - positive)
            predicted = ops.cast(positive > 0.5, "int32")
        else:
            confidence = ops.max(y_pred, axis=-1)
            predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        if num_classes > 1 and one_hot:
            labels = ops.argmax(ops.reshape(y_true, (-1, num_classes)), axis=-1)
        else:
            labels = ops.reshape(y_true, (-1,))
        correct = ops.cast(ops.equal(ops.cast(labels, "int32"), predicted), self.dtype)
        edges = ops.arange(1, self.num_bins, dtype=self.dtype) / self.num_bins
        index = ops.sum(
            ops.cast(ops.expand_dims(confidence, 1) > ops.expand_dims(edges, 0), "int32"), axis=1
        )
        in_bin = ops.one_hot(index, self.num_bins, dtype=self.dtype)
        if sample_weight is not None:
            weight = ops.reshape(ops.convert_to_tensor(sample_weight, dtype=self.dtype), (-1, 1))
            in_bin = in_bin * weight
        self.bin_counts.assign_add(ops.sum(in_bin, axis=0))
        self.bin_confidence_sums.assign_add(ops.matmul(confidence, in_bin))
        self.bin_correct_sums.assign_add(ops.matmul(correct, in_bin))

    def result(self):
        gap = ops.sum(ops.abs(self.bin_correct_sums - self.bin_confidence_sums))
        return ops.divide_no_nan(gap, ops.sum(self.bin_counts))

    def reset_state(self):
        for variable in (self.bin_counts, self.bin_confidence_sums, self.bin_correct_sums):
            variable.assign(ops.zeros(variable.shape, dtype=variable.dtype))

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "num_bins": self.num_bins}
