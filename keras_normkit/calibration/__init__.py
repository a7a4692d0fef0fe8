"""Post-hoc calibration of Keras classifiers (Guo et al., ICML 2017, arXiv:1706.04599).

One folder per role; every public name is importable from `keras_normkit.calibration`.

* `base.py`: `CalibrationWrapper`, the `keras.Model` every wrapper is (it saves, exports
  and serves), fitted with `wrapper.calibrate(x, y)` (used before it, a wrapper raises
  `NotCalibratedError`); `collect.py`: `collect_logits` runs the classifier over held-out
  data batch by batch (spilled to a memmap beyond a budget); `cross_fitting.py`:
  `CrossFittedCalibration(calibrator, cv=5)` averages k copies of any wrapper, each fitted
  on one fold; `plots.py`: `reliability_diagram`.
* `scaling/`: parametric maps of the logits. `TemperatureScaling` / `fit_temperature`,
  `VectorScaling` / `fit_vector_scaling`, `MatrixScaling` / `fit_matrix_scaling`,
  `EnsembleTemperatureScaling` / `fit_ensemble_temperature_scaling` (Zhang et al. 2020),
  `DirichletCalibration` / `fit_dirichlet_calibration` (Kull et al. 2019) with
  `select_dirichlet_regularization`, `PlattScaling` / `fit_platt_scaling` (Platt 1999).
* `binning/`: non-parametric one-vs-rest maps of the probabilities. `HistogramBinning` /
  `fit_histogram_binning` (Zadrozny & Elkan 2001), `IsotonicCalibration` /
  `fit_isotonic_calibration` (Zadrozny & Elkan 2002), `BayesianBinning` /
  `fit_bayesian_binning` (BBQ, Naeini et al. 2015).
* `metrics/`: measures on arrays. `expected_calibration_error` (equal-width or equal-mass
  bins), `maximum_calibration_error`, `classwise_expected_calibration_error`,
  `calibration_bins`; `smooth_calibration_error`, `smooth_calibration_curve`;
  `debiased_calibration_error`; `negative_log_likelihood`, `brier_score`;
  `risk_coverage_curve`, `area_under_risk_coverage`; `calibration_report`, all of them with
  bootstrap intervals. Streaming (Keras) metrics: `keras_normkit.metrics.ExpectedCalibrationError`,
  `keras_normkit.metrics.BrierScore`.

Every fit function returns a map (`TemperatureScalingMap`, `IsotonicCalibrationMap`, ...)
whose `predict` applies it in NumPy; each wrapper's `calibration_map_` is the map it serves.
Private helpers shared by the rooms live once: `_numeric.py` (softmax, log-softmax),
`_validation.py` (input checks), `_bins.py` (the bins of the confidences),
`_bootstrap.py`, `_arrays.py` (chunked reading of memmaps), `_one_vs_rest.py`.
"""

from keras_normkit.calibration.base import NotCalibratedError
from keras_normkit.calibration.binning import (
    BayesianBinning,
    BayesianBinningMap,
    HistogramBinning,
    HistogramBinningMap,
    IsotonicCalibration,
    IsotonicCalibrationMap,
    fit_bayesian_binning,
    fit_histogram_binning,
    fit_isotonic_calibration,
)
from keras_normkit.calibration.collect import CollectedLogits, collect_logits
from keras_normkit.calibration.cross_fitting import CrossFittedCalibration
from keras_normkit.calibration.metrics import (
    CalibrationBins,
    CalibrationReport,
    RiskCoverageCurve,
    SmoothCalibrationCurve,
    area_under_risk_coverage,
    brier_score,
    calibration_bins,
    calibration_report,
    classwise_expected_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    risk_coverage_curve,
    smooth_calibration_curve,
    smooth_calibration_error,
)
from keras_normkit.calibration.plots import reliability_diagram
from keras_normkit.calibration.scaling import (
    DirichletCalibration,
    DirichletCalibrationMap,
    DirichletRegularization,
    EnsembleTemperatureScaling,
    EnsembleTemperatureScalingMap,
    MatrixScaling,
    MatrixScalingMap,
    PlattScaling,
    PlattScalingMap,
    TemperatureScaling,
    TemperatureScalingMap,
    VectorScaling,
    VectorScalingMap,
    fit_dirichlet_calibration,
    fit_ensemble_temperature_scaling,
    fit_matrix_scaling,
    fit_platt_scaling,
    fit_temperature,
    fit_vector_scaling,
    select_dirichlet_regularization,
)

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
    "MatrixScalingMap",
    "NotCalibratedError",
    "PlattScaling",
    "PlattScalingMap",
    "RiskCoverageCurve",
    "SmoothCalibrationCurve",
    "TemperatureScaling",
    "TemperatureScalingMap",
    "VectorScaling",
    "VectorScalingMap",
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
