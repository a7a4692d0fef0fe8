"""Conformal prediction: sets for classifiers and intervals for regressors.

* Scores (NumPy): `lac_scores` (Sadinle et al. 2019, `lac.py`), `aps_scores` (Romano et
  al. 2020, `aps.py`), `raps_scores` and `select_raps_parameters` (Angelopoulos et al.
  2021, `raps.py`); the threshold `conformal_quantile` (`quantile.py`).
* Sets: `prediction_sets`, `naive_prediction_sets` (`sets.py`); `fit_prediction_sets` ->
  `PredictionSetMap` (`fit.py`); the Keras wrapper `ConformalClassifier` (`classifier.py`).
* Measures: `coverage`, `average_set_size`, `classwise_coverage` (`measures.py`).
* Regression: `residual_scores`, `cqr_scores`, `ConformalRegressor`, `interval_coverage`,
  `average_interval_width` (`regression.py`); `PinballLoss` (`pinball.py`).
"""

from keras_normkit.uncertainty.conformal.aps import aps_scores
from keras_normkit.uncertainty.conformal.classifier import ConformalClassifier
from keras_normkit.uncertainty.conformal.fit import PredictionSetMap, fit_prediction_sets
from keras_normkit.uncertainty.conformal.lac import lac_scores
from keras_normkit.uncertainty.conformal.measures import (
    average_set_size,
    classwise_coverage,
    coverage,
)
from keras_normkit.uncertainty.conformal.pinball import PinballLoss
from keras_normkit.uncertainty.conformal.quantile import conformal_quantile
from keras_normkit.uncertainty.conformal.raps import (
    RAPSParameters,
    raps_scores,
    select_raps_parameters,
)
from keras_normkit.uncertainty.conformal.regression import (
    ConformalRegressor,
    average_interval_width,
    cqr_scores,
    interval_coverage,
    residual_scores,
)
from keras_normkit.uncertainty.conformal.sets import naive_prediction_sets, prediction_sets

__all__ = [
    "ConformalClassifier",
    "ConformalRegressor",
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
    "fit_prediction_sets",
    "interval_coverage",
    "lac_scores",
    "naive_prediction_sets",
    "prediction_sets",
    "raps_scores",
    "residual_scores",
    "select_raps_parameters",
]
