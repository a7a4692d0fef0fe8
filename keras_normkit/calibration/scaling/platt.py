"""Platt scaling (Platt, 1999): `fit_platt_scaling` and `PlattScaling`.

A binary classifier's logit z is mapped to sigmoid(a z + b), with a and b fitted by minimum
NLL (Bernoulli log-loss) on held-out data. For k >= 2 classes, each class j is calibrated
one-vs-rest on the log-odds of its probability, s_j = log(p_j / (1 - p_j)) (for one logit,
s = z), to q_j = sigmoid(a_j s_j + b_j), and the k values are renormalized to sum to 1
(Zadrozny & Elkan 2002; Guo et al. 2017). The log-odds do not change when a constant is
added to every logit of a row, as softmax does not.

By default the targets are Platt's (1999, Section 2.2): t+ = (N+ + 1) / (N+ + 2) for
positive and t- = 1 / (N- + 2) for negative examples, which keeps a and b finite when the
held-out scores separate the classes (as scikit-learn's `CalibratedClassifierCV(method=
"sigmoid")` does). With `smooth_targets=False` the targets are the 0/1 labels (maximum
likelihood, the same map as `VectorScaling` for one logit); a `ValueError` then says when
no finite optimum exists (a class absent, or separated by its score).

The two parameters of each column are fitted by the NumPy L-BFGS of `_lbfgs.py`.

References: Platt, "Probabilistic outputs for support vector machines and comparisons to
regularized likelihood methods", Advances in Large Margin Classifiers, 1999; Guo, Pleiss,
Sun, Weinberger, "On Calibration of Modern Neural Networks", ICML 2017, arXiv:1706.04599,
Section 4.2.
"""

import warnings

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_bool
from keras_normkit.calibration import _arrays, _one_vs_rest, _validation
from keras_normkit.calibration._one_vs_rest import OneVsRestMap, OneVsRestWrapper
from keras_normkit.calibration.scaling._lbfgs import lbfgs

__all__ = ["PlattScaling", "PlattScalingMap", "fit_platt_scaling"]


class PlattScalingMap(OneVsRestMap):
    """Fitted Platt scaling: q_j = sigmoid(scale_j * s_j + bias_j) per column.

    Attributes:
        scale: `(c,)` slopes a_j (c = 1 for a binary classifier, k otherwise).
        bias: `(c,)` intercepts b_j.

    `predict(logits)` computes the scores s_j (the logit for one column, the log-odds
    log(p_j / (1 - p_j)) of softmax(logits) otherwise), applies the sigmoids and, for
    k >= 2, renormalizes the rows to sum to 1. It takes logits `(n,)`/`(n, 1)` or `(n, k)`
    and returns probabilities of the same shape.
    """

    def __init__(self, scale, bias):
        self.scale = np.asarray(scale, np.float64).reshape(-1)
        self.bias = np.asarray(bias, np.float64).reshape(-1)

    _per_column = "scale"

    def _columns(self, logits):
        checked, _ = _validation.check_logits(logits)
        if checked.shape[1] != self.num_columns:
            raise ValueError(
                f"The map was fitted on {self.num_columns} column(s). Received logits of "
                f"shape {np.shape(logits)}."
            )
        return _one_vs_rest.log_odds(checked)

    def _map_column(self, column, values):
        u = values * self.scale[column] + self.bias[column]
        return np.exp(-np.logaddexp(0.0, -u))

    def predict(self, logits):
        """Calibrated probabilities from logits, shaped like `logits`."""
        return super().predict(logits)

    def _summary(self):
        return f"scale={self.scale.tolist()}, bias={self.bias.tolist()}"


def _objective(scores, targets):
    def function(params):
        a, b = params
        u = a * scores + b
        loss = float(np.mean(np.logaddexp(0.0, u) - targets * u))
        residual = np.exp(-np.logaddexp(0.0, -u)) - targets
        return loss, np.array([np.mean(residual * scores), np.mean(residual)])

    return function


def _check_finite_optimum(scores, positive, column, num_columns):
    what = "the positive class" if num_columns == 1 else f"class {column}"
    hint = "Use smooth_targets=True (Platt's targets, always finite) or more held-out data."
    if positive.all() or not positive.any():
        raise ValueError(
            f"Platt scaling with smooth_targets=False needs positive and negative held-out "
            f"examples of {what}; received {int(positive.sum())} positive of "
            f"{len(positive)}, so the optimal sigmoid is a constant 0 or 1. {hint}"
        )
    pos, neg = scores[positive], scores[~positive]
    if not (neg.max() > pos.min() and pos.max() > neg.min()):
        raise ValueError(
            f"Platt scaling with smooth_targets=False has no finite optimum: the held-out "
            f"scores of {what} separate its positive and negative examples (positive in "
            f"[{pos.min():.4g}, {pos.max():.4g}], negative in [{neg.min():.4g}, "
            f"{neg.max():.4g}]), so the NLL keeps falling as |a| -> infinity. {hint}"
        )


def _fit_scores(scores, labels, smooth_targets, max_iter, gtol):
    _validation.check_two_classes(
        labels, "Platt scaling", "it would fit a constant (slope 0) that ignores the classifier"
    )
    num_columns = scores.shape[1]
    scale, bias = np.ones(num_columns), np.zeros(num_columns)
    for j in range(num_columns):
        hard = _one_vs_rest.targets(labels, j, num_columns)
        positive = hard > 0
        s = scores[:, j]
        if smooth_targets:
            n_pos = float(positive.sum())
            n_neg = len(hard) - n_pos
            t = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        else:
            _check_finite_optimum(s, positive, j, num_columns)
            t = hard
        x, converged, iterations = lbfgs(_objective(s, t), np.array([1.0, 0.0]), max_iter, gtol)
        if not converged:
            warnings.warn(
                f"Platt scaling of column {j} did not converge in {iterations} L-BFGS "
                f"iterations (max_iter={max_iter}); the last iterate is returned.",
                stacklevel=3,
            )
        scale[j], bias[j] = x
    return PlattScalingMap(scale, bias)


def fit_platt_scaling(logits, labels, smooth_targets=True, max_iter=1000, gtol=1e-9):
    """Platt scaling: q = sigmoid(a s + b) per column, a and b by minimum NLL.

    For a binary classifier s is its logit z; for k >= 2 classes, each class j is fitted
    one-vs-rest on the log-odds s_j = log(p_j / (1 - p_j)) of p = softmax(z), and the k
    calibrated values are renormalized to sum to 1. Each column minimizes
    -(1/n) sum_i [t_i log q_i + (1 - t_i) log(1 - q_i)] by L-BFGS from a = 1, b = 0,
    where t_i are Platt's targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2) (`smooth_targets=
    True`, the default, as in Platt 1999 and scikit-learn) or the 0/1 labels.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` logits of a binary classifier (memmap
            OK; the scores are formed in float64).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        smooth_targets: Platt's targets (default) or, if `False`, the 0/1 labels; then a
            `ValueError` is raised when a class is absent or separated by its score (no
            finite optimum).
        max_iter: Maximum number of L-BFGS iterations per column (a warning if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        A `PlattScalingMap` (`scale`, `bias` of shape `(c,)`; `predict(logits)`).

    Raises:
        ValueError: for bad input; when the labels are all one class (the fit would be a
            constant, slope 0, that ignores the classifier); with `smooth_targets=False`,
            when a class is absent or separated by its score (no finite optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_platt_scaling
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=100_000) * 2
    >>> y = (rng.random(100_000) < 1 / (1 + np.exp(-(z - 1)))).astype(int)
    >>> fitted = fit_platt_scaling(3 * z, y)  # logits 3x too large, shifted by 1
    >>> np.round([fitted.scale[0] * 3, fitted.bias[0]], 1).tolist()
    [1.0, -1.0]

    References: Platt, 1999; Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2.
    """
    smooth_targets = check_bool("smooth_targets", smooth_targets)
    logits, labels, _ = _validation.check_logits_and_labels(logits, labels)
    scores = _arrays.map_rows(_one_vs_rest.log_odds, logits)
    return _fit_scores(scores, labels, smooth_targets, max_iter, gtol)


@keras.saving.register_keras_serializable(package="keras_normkit")
class PlattScaling(OneVsRestWrapper):
    """Platt scaling of a trained classifier: q = sigmoid(a s + b) per class.

    For a binary classifier (one logit or one sigmoid output) s is the logit z; for k >= 2
    classes each class is calibrated one-vs-rest on the log-odds s_j = log(p_j / (1 - p_j))
    of its softmax probability and the k values are renormalized to sum to 1. `calibrate`
    fits a and b per class by minimum NLL (see `fit_platt_scaling`; Platt's smoothed targets
    by default). They are non-trainable weights `scale` and `bias` of shape `(c,)`, saved
    with the model and served by `model.export()`. With k >= 2 it may change the argmax.
    Before `calibrate`, calling, predicting with or exporting the wrapper, and reading
    `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
        smooth_targets: Platt's targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2) (default), or
            the 0/1 labels if `False` (then `calibrate` raises a `ValueError` when a class
            is separated by its score: no finite optimum).

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import PlattScaling
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])
    >>> calibrated = PlattScaling(model).calibrate(x, y, verbose=0)
    >>> a = float(calibrated.calibration_map_.scale[0])
    >>> 0.8 < 4 * a < 1.2  # a close to 1/4 undoes the model's factor 4
    True

    References: Platt, 1999; Guo et al., "On Calibration of Modern Neural Networks",
    ICML 2017, arXiv:1706.04599, Section 4.2.
    """

    def __init__(
        self, model, output="probabilities", model_output="auto", smooth_targets=True, **kwargs
    ):
        smooth_targets = check_bool("smooth_targets", smooth_targets)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.smooth_targets = smooth_targets

    def _create_calibration_weights(self, num_classes):
        shape = (self._num_columns(num_classes),)
        self.scale = self.add_weight(shape=shape, initializer="ones", trainable=False, name="scale")
        self.bias = self.add_weight(shape=shape, initializer="zeros", trainable=False, name="bias")

    def _calibration_weights_created(self):
        return getattr(self, "scale", None) is not None

    def _columns(self, logits):
        return _one_vs_rest.ops_log_odds(logits)

    def _numpy_columns(self, logits):
        return _arrays.map_rows(_one_vs_rest.log_odds, logits)

    def _affine(self, scores):
        return scores * ops.cast(self.scale, scores.dtype) + ops.cast(self.bias, scores.dtype)

    def _map_columns(self, columns):
        return ops.sigmoid(self._affine(columns))

    def call(self, inputs, training=False):
        if self.output_type == "logits" and self._num_columns(self.num_classes) == 1:
            self._check_calibrated()  # the exact calibrated logit a z + b
            return self._affine(self._logits(self.classifier(inputs, training=training)))
        return super().call(inputs, training=training)

    def _fit(self, logits, labels):
        fitted = _fit_scores(
            self._numpy_columns(logits), labels, self.smooth_targets, max_iter=1000, gtol=1e-9
        )
        self.scale.assign(fitted.scale.astype("float32"))
        self.bias.assign(fitted.bias.astype("float32"))

    @property
    def calibration_map_(self):
        """The fitted `PlattScalingMap` (from the weights); `NotCalibratedError` before."""
        self._check_calibrated_map()
        return PlattScalingMap(ops.convert_to_numpy(self.scale), ops.convert_to_numpy(self.bias))

    def get_config(self):
        return {**super().get_config(), "smooth_targets": self.smooth_targets}
