"""Selective prediction: the risk-coverage curve and its area (Geifman & El-Yaniv 2017).

A selective classifier answers only when its confidence reaches a threshold tau and
abstains otherwise. Coverage is the fraction of examples it answers, (selective) risk its
error rate on them. Lowering tau trades risk for coverage; a confidence that ranks the
mistakes last gives a low curve, whatever its calibration.
"""

import collections

import numpy as np

from keras_normkit.calibration import _bins, _validation
from keras_normkit.calibration.metrics._top_label import top_label

__all__ = ["RiskCoverageCurve", "area_under_risk_coverage", "risk_coverage_curve"]

RiskCoverageCurve = collections.namedtuple("RiskCoverageCurve", ["coverage", "risk", "thresholds"])
RiskCoverageCurve.__doc__ = """The risk-coverage curve of `risk_coverage_curve`.

Attributes:
    coverage: `(T,)` fraction of examples with confidence >= threshold, increasing to 1.
    risk: `(T,)` error rate of the argmax on those examples.
    thresholds: `(T,)` the distinct confidences, decreasing.
"""


def _inputs(probabilities, labels, confidence):
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    top, correct = top_label(probabilities, labels)
    if confidence is None:
        return top, 1.0 - correct
    confidence = _validation.to_numpy(confidence, "confidence")
    if confidence.shape not in ((len(labels),), (len(labels), 1)):
        raise ValueError(
            f"`confidence` must have one score per example, shape ({len(labels)},). "
            f"Received: confidence.shape={confidence.shape}"
        )
    confidence = np.asarray(confidence, dtype=np.float64).reshape(-1)
    if not np.isfinite(confidence).all():
        raise ValueError("`confidence` must be finite (no NaN or Inf).")
    return confidence, 1.0 - correct


def _groups(confidence):
    """Order by decreasing confidence and the tie group (0, 1, ...) of each sorted example."""
    order = np.argsort(-confidence, kind="stable")
    ordered = confidence[order]
    group = np.concatenate([[0], np.cumsum(ordered[1:] != ordered[:-1])])
    return order, group


def risk_coverage_curve(probabilities, labels, confidence=None):
    """Risk-coverage curve of the selective classifier "answer if confidence >= tau".

    For each distinct confidence tau (decreasing), coverage(tau) = |{i : c_i >= tau}| / n
    and risk(tau) = (number of errors among them) / |{i : c_i >= tau}|, an error being
    argmax_k p_ik != y_i. A threshold accepts a group of tied confidences whole, so the
    curve has one point per distinct confidence, the last at coverage 1 (the plain error
    rate).

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        confidence: Optional `(n,)` score to rank by (default the softmax response
            max_k p_k), e.g. from MC dropout or an ensemble.

    Returns:
        A `RiskCoverageCurve(coverage, risk, thresholds)` of NumPy arrays.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import risk_coverage_curve
    >>> p = np.array([[0.9, 0.1], [0.8, 0.2], [0.8, 0.2], [0.6, 0.4]])
    >>> curve = risk_coverage_curve(p, [0, 1, 0, 1])
    >>> curve.coverage.tolist(), curve.risk.tolist()
    ([0.25, 0.75, 1.0], [0.0, 0.3333333333333333, 0.5])

    Reference: Y. Geifman, R. El-Yaniv, "Selective Classification for Deep Neural
    Networks", NeurIPS 2017, arXiv:1705.08500, Section 2.
    """
    confidence, errors = _inputs(probabilities, labels, confidence)
    order, group = _groups(confidence)
    last = np.flatnonzero(np.r_[group[1:] != group[:-1], True])  # end of each tie group
    accepted = last + 1.0
    risk = np.cumsum(errors[order])[last] / accepted
    return RiskCoverageCurve(accepted / len(errors), risk, confidence[order][last])


def aurc_from_scores(confidence, errors, weights=None):
    """AURC of scores and 0/1 errors; `(B,)` with bootstrap multiplicities `weights` `(B, n)`.

    With the examples sorted by decreasing confidence, tie groups g of n_g examples (total
    weight) with e_g errors, S_g examples and E_g errors before them, and H the harmonic
    numbers, the mean of R_j / j over j = 1..n (R_j the expected errors among the j most
    confident under random tie-breaking) is
    (1/n) sum_g [e_g + (E_g - S_g e_g / n_g) (H(S_g + n_g) - H(S_g))].
    """
    order, group = _groups(confidence)
    num_groups = int(group[-1]) + 1
    errors = errors[order]
    if weights is not None and (order != np.arange(len(order))).any():
        weights = np.asarray(weights)[:, order]
    if num_groups == len(group):  # no ties: a group per example
        counts = np.ones(len(group)) if weights is None else weights
        wrong = errors if weights is None else weights * errors
    else:
        counts = _bins.binned_sums(group, np.ones(len(group)), num_groups, weights)
        wrong = _bins.binned_sums(group, errors, num_groups, weights)
    before = np.cumsum(counts, axis=-1) - counts
    wrong_before = np.cumsum(wrong, axis=-1) - wrong
    total = int(round(counts.sum(axis=-1).max()))
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, total + 1))])
    start = np.rint(before).astype(np.int64)
    steps = harmonic[start + np.rint(counts).astype(np.int64)] - harmonic[start]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(counts > 0, wrong / counts, 0.0)
    terms = wrong + (wrong_before - before * rate) * steps
    return terms.sum(axis=-1) / counts.sum(axis=-1)


def area_under_risk_coverage(probabilities, labels, confidence=None):
    """AURC: the mean selective risk over all coverages, (1/n) sum_{j=1}^n R_j / j.

    With the examples sorted by decreasing confidence, R_j is the number of errors among
    the j most confident; R_j / j is the risk at coverage j/n, so AURC is the area under
    the risk-coverage curve with one step per example (Geifman et al. 2019, eq. 1). Lower
    is better; it mixes the error rate with how well the confidence ranks the errors.
    Ties: examples of equal confidence cannot be ordered, so within a tie group R_j
    counts errors at the group's error rate (R_j is its expectation over random orders of
    the group, and so is the AURC); the result does not depend on the order of the
    inputs.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        confidence: Optional `(n,)` score to rank by (default max_k p_k).

    Returns:
        The AURC as a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import area_under_risk_coverage
    >>> p = np.array([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4]])
    >>> round(area_under_risk_coverage(p, [0, 0, 1]), 4)  # (0/1 + 0/2 + 1/3) / 3
    0.1111

    References: Geifman & El-Yaniv, NeurIPS 2017, arXiv:1705.08500; Y. Geifman, G. Uziel,
    R. El-Yaniv, "Bias-Reduced Uncertainty Estimation for Deep Neural Classifiers",
    ICLR 2019, arXiv:1805.08206 (the AURC).
    """
    confidence, errors = _inputs(probabilities, labels, confidence)
    return float(aurc_from_scores(confidence, errors))
