"""Proper scores of the predicted probabilities: `negative_log_likelihood` and `brier_score`.

Both reward calibration and sharpness together (a strictly proper scoring rule is
minimized in expectation only by the true probabilities). Take `(n, k)` probabilities (a
binary `(n,)`/`(n, 1)` probability of class 1 becomes two columns) and integer or one-hot
labels.
"""

import numpy as np

from keras_normkit._validation import check_bool, check_string_choice
from keras_normkit.calibration import _numeric, _validation

__all__ = ["brier_score", "negative_log_likelihood"]


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
        logits, labels, _ = _validation.check_logits_and_labels(y_pred, labels, "y_pred")
        log_p = _numeric.log_softmax(logits)
    else:
        probabilities, labels, _ = _validation.check_probabilities_and_labels(
            y_pred, labels, "y_pred"
        )
        with np.errstate(divide="ignore"):
            log_p = np.log(probabilities)
    return float(-np.mean(log_p[np.arange(len(labels)), labels]))


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
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    scale = brier_scale(scale_by_half, probabilities.shape[1])
    return float(scale * brier_losses(probabilities, labels).mean())
