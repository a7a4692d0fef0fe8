"""Predictions that say when not to trust them: conformal sets, OOD scores, ensembles.

Calibration (`keras_normkit.calibration`) makes a model's confidence honest on average;
this package says more about each prediction:

* `conformal/`: prediction sets with a coverage guarantee (`ConformalClassifier`: LAC,
  APS, RAPS; Mondrian option) and intervals for regression (`ConformalRegressor`:
  residual, CQR with `PinballLoss`), the NumPy scores and `coverage` measures.
* `ood/`: out-of-distribution and misclassification scores (`max_softmax_probability`,
  `max_logit`, `energy_score`, `MahalanobisScore`) and `detection_measures` (AUROC,
  AUPR-In/Out, FPR at 95 % TPR).
* `ensembles/`: `MonteCarloDropout` and `DeepEnsemble`, Keras models whose mean
  probabilities feed the calibration and detection measures.
"""

from keras_normkit.uncertainty.conformal import (
    ConformalClassifier,
    ConformalRegressor,
    PinballLoss,
    PredictionSetMap,
    RAPSParameters,
    aps_scores,
    average_interval_width,
    average_set_size,
    classwise_coverage,
    conformal_quantile,
    coverage,
    cqr_scores,
    fit_prediction_sets,
    interval_coverage,
    lac_scores,
    naive_prediction_sets,
    prediction_sets,
    raps_scores,
    residual_scores,
    select_raps_parameters,
)
from keras_normkit.uncertainty.ensembles import DeepEnsemble, MonteCarloDropout
from keras_normkit.uncertainty.ood import (
    DetectionMeasures,
    MahalanobisScore,
    detection_measures,
    energy_score,
    fpr_at_tpr,
    max_logit,
    max_softmax_probability,
)

__all__ = [
    "ConformalClassifier",
    "ConformalRegressor",
    "DeepEnsemble",
    "DetectionMeasures",
    "MahalanobisScore",
    "MonteCarloDropout",
    "PinballLoss",
    "PredictionSetMap",
    "RAPSParameters",
    "aps_scores",
    "average_interval_width",
    "average_set_size",
    "classwise_coverage",
    "conformal_quantile",
    "coverage",
    "cqr_scores",
    "detection_measures",
    "energy_score",
    "fit_prediction_sets",
    "fpr_at_tpr",
    "interval_coverage",
    "lac_scores",
    "max_logit",
    "max_softmax_probability",
    "naive_prediction_sets",
    "prediction_sets",
    "raps_scores",
    "residual_scores",
    "select_raps_parameters",
]
