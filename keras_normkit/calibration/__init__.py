"""Post-hoc calibration of Keras classifiers (Guo et al., ICML 2017, arXiv:1706.04599).

* Wrappers (`keras.Model`s that save, export and serve): `TemperatureScaling`
  (`temperature.py`), `VectorScaling`, `MatrixScaling` (`affine.py`), fitted with
  `wrapper.calibrate(x, y)` (used before it, they raise `NotCalibratedError`).
* Beyond scaling (one-vs-rest, renormalized; Zadrozny & Elkan 2001/2002, Platt 1999):
  `HistogramBinning` / `fit_histogram_binning` (`binning.py`), `IsotonicCalibration` /
  `fit_isotonic_calibration` (`isotonic.py`), `PlattScaling` / `fit_platt_scaling`
  (`platt.py`), `BayesianBinning` / `fit_bayesian_binning` (BBQ, Naeini et al. 2015,
  `bayesian_binning.py`); the fit functions return `HistogramBinningMap`,
  `IsotonicCalibrationMap`, `PlattScalingMap` and `BayesianBinningMap`, whose `predict`
  applies the map in NumPy.
* Ensembles of maps: `EnsembleTemperatureScaling` / `fit_ensemble_temperature_scaling`
  (`ensemble_temperature.py`, Zhang et al. 2020).
* `DirichletCalibration` / `fit_dirichlet_calibration` (`dirichlet.py`, Kull et al. 2019):
  a linear layer on the log-probabilities, ODIR-regularized; its weights chosen by
  cross-validation with `select_dirichlet_regularization` (`dirichlet_selection.py`).
* Cross-fitting: `CrossFittedCalibration(calibrator, cv=5)` averages k copies of any
  wrapper above, each fitted on one fold (`cross_fitting.py`).
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

from keras_normkit.calibration.affine import (
    MatrixScaling,
    VectorScaling,
    fit_matrix_scaling,
    fit_vector_scaling,
)
from keras_normkit.calibration.bayesian_binning import (
    BayesianBinning,
    BayesianBinningMap,
    fit_bayesian_binning,
)
from keras_normkit.calibration.binning import (
    HistogramBinning,
    HistogramBinningMap,
    fit_histogram_binning,
)
from keras_normkit.calibration.collect import CollectedLogits, collect_logits
from keras_normkit.calibration.cross_fitting import CrossFittedCalibration
from keras_normkit.calibration.dirichlet import (
    DirichletCalibration,
    DirichletCalibrationMap,
    fit_dirichlet_calibration,
)
from keras_normkit.calibration.dirichlet_selection import (
    DirichletRegularization,
    select_dirichlet_regularization,
)
from keras_normkit.calibration.ensemble_temperature import (
    EnsembleTemperatureScaling,
    EnsembleTemperatureScalingMap,
    fit_ensemble_temperature_scaling,
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
from keras_normkit.calibration.temperature import TemperatureScaling, fit_temperature
from keras_normkit.calibration.wrappers import NotCalibratedError

__all__ = [
    "BayesianBinning",
    "BayesianBinningMap",
    "CalibrationBins",
    "CalibrationReport",
    "CollectedLogits",
    "CrossFittedCalibration",
    "DirichletCalibration",
    "DirichletCalibrationMap",
    "DirichletRegularization",
    "EnsembleTemperatureScaling",
    "EnsembleTemperatureScalingMap",
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
    "fit_bayesian_binning",
    "fit_dirichlet_calibration",
    "fit_ensemble_temperature_scaling",
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
    "select_dirichlet_regularization",
    "smooth_calibration_curve",
    "smooth_calibration_error",
]
