"""Out-of-distribution and misclassification detection: scores and measures.

* Scores from logits (`logit_scores.py`): `max_softmax_probability` (Hendrycks & Gimpel
  2017), `max_logit`, `energy_score` (Liu et al. 2020). From features
  (`mahalanobis.py`): `MahalanobisScore` (Lee et al. 2018; relative, Ren et al. 2021).
  Every score is a confidence: high = in-distribution.
* Measures (`measures.py`): `detection_measures` (AUROC, AUPR-In, AUPR-Out, FPR at 95 %
  TPR) and `fpr_at_tpr`.
"""

from keras_normkit.uncertainty.ood.logit_scores import (
    energy_score,
    max_logit,
    max_softmax_probability,
)
from keras_normkit.uncertainty.ood.mahalanobis import MahalanobisScore
from keras_normkit.uncertainty.ood.measures import (
    DetectionMeasures,
    detection_measures,
    fpr_at_tpr,
)

__all__ = [
    "DetectionMeasures",
    "MahalanobisScore",
    "detection_measures",
    "energy_score",
    "fpr_at_tpr",
    "max_logit",
    "max_softmax_probability",
]
