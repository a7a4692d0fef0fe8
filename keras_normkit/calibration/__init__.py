"""Post-hoc calibration of Keras classifiers (Guo et al., ICML 2017, arXiv:1706.04599).

* Wrappers (`keras.Model`s that save, export and serve): `TemperatureScaling`,
  `VectorScaling`, `MatrixScaling`, fitted with `wrapper.calibrate(x, y)` (used before it,
  they raise `NotCalibratedError`).
* Beyond scaling (one-vs-rest, renormalized; Zadrozny & Elkan 2001/2002, Platt 1999):
  `HistogramBinning` / `fit_histogram_binning` (`binning.py`), `IsotonicCalibration` /
  `fit_isotonic_calibration` (`isotonic.py`), `PlattScaling` / `fit_platt_scaling`
  (`platt.py`); the fit functions return `HistogramBinningMap`, `IsotonicCalibrationMap`
  and `PlattScalingMap`, whose `predict` applies the map in NumPy.
* Fitting on arrays: `fit_temperature`, `fit_vector_scaling`, `fit_matrix_scaling`.
* Measures on arrays: `expected_calibration_error`, `maximum_calibration_error`,
  `classwise_expected_calibration_error`, `negative_log_likelihood`, `calibration_bins`;
  `debiased_calibration_error`, `smooth_calibration_error`, `smooth_calibration_curve`,
  `brier_score` (`measures.py`); `risk_coverage_curve`, `area_under_risk_coverage`
  (`selective.py`); `calibration_report`, all of them with bootstrap intervals (`report.py`).
* Plots: `reliability_diagram`. Streaming metrics: `keras_normkit.metrics.ExpectedCalibrationError`
  (equal-width or equal-mass bins), `keras_normkit.metrics.BrierScore`.
* Large validation sets: `collect_logits` (batch-wise, spilled to a memmap beyond a budget).
"""

from keras_normkit.calibration.binning import (
    HistogramBinning,
    HistogramBinningMap,
    fit_histogram_binning,
)
from keras_normkit.calibration.collect import CollectedLogits, collect_logits
from keras_normkit.calibration.fitting import (
    fit_matrix_scaling,
    fit_temperature,
    fit_vector_scaling,
)
from keras_normkit.calibration.functional import (
    CalibrationBins,
    calibration_bins,
    classwise_expected_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
)
from keras_normkit.calibration.isotonic import (
    IsotonicCalibration,
    IsotonicCalibrationMap,
    fit_isotonic_calibration,
)
from keras_normkit.calibration.measures import (
    SmoothCalibrationCurve,
    brier_score,
    debiased_calibration_error,
    smooth_calibration_curve,
    smooth_calibration_error,
)
from keras_normkit.calibration.platt import PlattScaling, PlattScalingMap, fit_platt_scaling
from keras_normkit.calibration.reliability import reliability_diagram
from keras_normkit.calibration.report import CalibrationReport, calibration_report
from keras_normkit.calibration.selective import (
    RiskCoverageCurve,
    area_under_risk_coverage,
    risk_coverage_curve,
)
from keras_normkit.calibration.wrappers import (
    MatrixScaling,
    NotCalibratedError,
    TemperatureScaling,
    VectorScaling,
)

__all__ = [
    "CalibrationBins",
    "CalibrationReport",
    "CollectedLogits",
    "HistogramBinning",
    "HistogramBinningMap",
    "IsotonicCalibration",
    "IsotonicCalibrationMap",
    "MatrixScaling",
    "NotCalibratedError",
    "PlattScaling",
    "PlattScalingMap",
    "RiskCoverageCurve",
    "SmoothCalibrationCurve",
    "TemperatureScaling",
    "VectorScaling",
    "area_under_risk_coverage",
    "brier_score",
    "calibration_bins",
    "calibration_report",
    "classwise_expected_calibration_error",
    "collect_logits",
    "debiased_calibration_error",
    "expected_calibration_error",
    "fit_histogram_binning",
    "fit_isotonic_calibration",
    "fit_matrix_scaling",
    "fit_platt_scaling",
    "fit_temperature",
    "fit_vector_scaling",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_diagram",
    "risk_coverage_curve",
    "smooth_calibration_curve",
    "smooth_calibration_error",
]
