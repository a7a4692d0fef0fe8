"""How well a score separates two groups: AUROC, AUPR-In, AUPR-Out and FPR at 95 % TPR.

"In" is the positive group: in-distribution examples (OOD detection) or correctly
classified ones (misclassification detection, where Hendrycks & Gimpel call AUPR-In
"AUPR-Succ" and AUPR-Out "AUPR-Err"). Scores are confidences: high = in. The areas come
from scikit-learn (`roc_auc_score`, `average_precision_score`, `roc_curve`).
"""

import collections

import numpy as np

from keras_normkit._validation import check_number
from keras_normkit.backend.optional import import_optional
from keras_normkit.uncertainty import _arrays

__all__ = ["DetectionMeasures", "detection_measures", "fpr_at_tpr"]

DetectionMeasures = collections.namedtuple(
    "DetectionMeasures", ["auroc", "aupr_in", "aupr_out", "fpr95"]
)
DetectionMeasures.__doc__ = """The measures of `detection_measures`, each a fraction in [0, 1].

Attributes:
    auroc: Area under the ROC curve: the probability that a random "in" example scores
        above a random "out" one (ties count one half); 0.5 is chance.
    aupr_in: Area under the precision-recall curve with "in" as positive, scored by the
        score (average precision); its chance level is the fraction of "in" examples.
    aupr_out: The same with "out" as positive, scored by minus the score; chance = the
        fraction of "out" examples. The hard one when "out" is rare.
    fpr95: The fraction of "out" examples accepted when the threshold accepts 95 % of the
        "in" ones (lower is better).
"""


def _sklearn_metrics():
    return import_optional("sklearn.metrics", "The OOD detection measures")


def _inputs(in_scores, out_scores):
    in_scores = _arrays.check_scores(in_scores, "in_scores")
    out_scores = _arrays.check_scores(out_scores, "out_scores")
    is_in = np.concatenate([np.ones(len(in_scores)), np.zeros(len(out_scores))])
    return is_in, np.concatenate([in_scores, out_scores])


def fpr_at_tpr(in_scores, out_scores, tpr=0.95):
    """The false positive rate at the threshold whose true positive rate first reaches `tpr`.

    The threshold t is the largest score with |{in >= t}| >= tpr * |in| (a threshold
    accepts tied scores together); the result is |{out >= t}| / |out|. With `tpr=0.95` this is
    the FPR95 of the OOD literature (Liang et al. 2018; Liu et al. 2020): the fraction of
    out-of-distribution inputs still accepted when 95 % of the in-distribution ones are.

    Args:
        in_scores: `(n_in,)` scores of the positive ("in") examples.
        out_scores: `(n_out,)` scores of the negative ("out") examples.
        tpr: The true positive rate to reach, in (0, 1].

    Returns:
        A Python float in [0, 1].

    Example:

    >>> from keras_normkit.uncertainty import fpr_at_tpr
    >>> fpr_at_tpr([0.9, 0.8, 0.7, 0.6], [0.75, 0.5], tpr=0.75)  # accept >= 0.7
    0.5
    """
    tpr = check_number("tpr", tpr, 0.0, 1.0, strict_minimum=True)
    is_in, scores = _inputs(in_scores, out_scores)
    fpr, tprs, _ = _sklearn_metrics().roc_curve(is_in, scores, drop_intermediate=False)
    return float(fpr[np.searchsorted(tprs, tpr - 1e-12, side="left")])


def detection_measures(in_scores, out_scores):
    """AUROC, AUPR-In, AUPR-Out and FPR at 95 % TPR of a confidence score.

    The measures of Hendrycks & Gimpel (2017) plus the FPR95 of later OOD work: "in"
    (in-distribution, or correctly classified) is positive; AUPR-In ranks by the score with
    "in" positive, AUPR-Out by minus the score with "out" positive (their AUPR-Err for
    misclassification), both with scikit-learn's `average_precision_score`.

    Args:
        in_scores: `(n_in,)` scores of the "in" examples (high = in).
        out_scores: `(n_out,)` scores of the "out" examples.

    Returns:
        A `DetectionMeasures(auroc, aupr_in, aupr_out, fpr95)` of fractions.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import detection_measures
    >>> rng = np.random.default_rng(0)
    >>> measures = detection_measures(rng.normal(1, 1, 5000), rng.normal(0, 1, 5000))
    >>> bool(abs(measures.auroc - 0.760) < 0.02)  # Phi(1 / sqrt(2)): N(1, 1) against N(0, 1)
    True

    Reference: Hendrycks & Gimpel, ICLR 2017, arXiv:1610.02136, Section 2; Liang, Li,
    Srikant, ICLR 2018 (FPR at 95 % TPR).
    """
    is_in, scores = _inputs(in_scores, out_scores)
    metrics = _sklearn_metrics()
    auroc = float(metrics.roc_auc_score(is_in, scores))
    aupr_in = float(metrics.average_precision_score(is_in, scores))
    aupr_out = float(metrics.average_precision_score(1 - is_in, -scores))
    fpr, tprs, _ = metrics.roc_curve(is_in, scores, drop_intermediate=False)
    fpr95 = float(fpr[np.searchsorted(tprs, 0.95 - 1e-12, side="left")])
    return DetectionMeasures(auroc, aupr_in, aupr_out, fpr95)
