"""Post-hoc calibration of Keras classifiers (Guo et al., ICML 2017, arXiv:1706.04599).

* Wrappers (`keras.Model`s that save, export and serve): `TemperatureScaling`,
  `VectorScaling`, `MatrixScaling`, fitted with `wrapper.calibrate(x, y)` (used before it,
  they raise `NotCalibratedError`).
* Fitting on arrays: `fit_temperature`, `fit_vector_scaling`, `fit_matrix_scaling`.
* Measures on arrays: `expected_calibration_error`, `maximum_calibration_error`,
  `classwise_expected_calibration_error`, `negative_log_likelihood`, `calibration_bins`.
* Plots: `reliability_diagram`. Streaming metric: `keras_normkit.metrics.ExpectedCalibrationError`.
* Large validation sets: `collect_logits` (batch-wise, spilled to a memmap beyond a budget).
"""

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
from keras_normkit.calibration.reliability import reliability_diagram
from keras_normkit.calibration.wrappers import (
    MatrixScaling,
    NotCalibratedError,
    TemperatureScaling,
    VectorScaling,
)

__all__ = [
    "CalibrationBins",
    "CollectedLogits",
    "MatrixScaling",
    "NotCalibratedError",
    "TemperatureScaling",
    "VectorScaling",
    "calibration_bins",
    "classwise_expected_calibration_error",
    "collect_logits",
    "expected_calibration_error",
    "fit_matrix_scaling",
    "fit_temperature",
    "fit_vector_scaling",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_diagram",
]
