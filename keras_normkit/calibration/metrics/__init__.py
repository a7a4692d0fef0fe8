"""Metrics: how calibrated a classifier's probabilities are, measured on arrays.

* `binned.py`: reliability bins, ECE (equal-width or equal-mass), MCE, class-wise ECE
  (Guo et al. 2017; Nixon et al. 2019; Kull et al. 2019).
* `smooth.py`: the smooth ECE and its reliability curve (Błasiok & Nakkiran 2023).
* `debiased.py`: the debiased L2 calibration error (Kumar et al. 2019).
* `scores.py`: proper scores, the negative log-likelihood and the Brier score.
* `selective.py`: the risk-coverage curve and its area (Geifman & El-Yaniv 2017).
* `report.py`: all of them at once, with percentile-bootstrap intervals.

The bins they share are in `calibration/_bins.py`, the bootstrap in
`calibration/_bootstrap.py`. The streaming (Keras metric) ECE and Brier score are
`keras_normkit.metrics.ExpectedCalibrationError` and `keras_normkit.metrics.BrierScore`.
"""

from keras_normkit.calibration.metrics.binned import (
    CalibrationBins,
    calibration_bins,
    classwise_expected_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
)
from keras_normkit.calibration.metrics.debiased import debiased_calibration_error
from keras_normkit.calibration.metrics.report import CalibrationReport, calibration_report
from keras_normkit.calibration.metrics.scores import brier_score, negative_log_likelihood
from keras_normkit.calibration.metrics.selective import (
    RiskCoverageCurve,
    area_under_risk_coverage,
    risk_coverage_curve,
)
from keras_normkit.calibration.metrics.smooth import (
    SmoothCalibrationCurve,
    smooth_calibration_curve,
    smooth_calibration_error,
)

__all__ = [
    "CalibrationBins",
    "CalibrationReport",
    "RiskCoverageCurve",
    "SmoothCalibrationCurve",
    "area_under_risk_coverage",
    "brier_score",
    "calibration_bins",
    "calibration_report",
    "classwise_expected_calibration_error",
    "debiased_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "risk_coverage_curve",
    "smooth_calibration_curve",
    "smooth_calibration_error",
]
