"""Scaling: parametric maps of the logits, fitted by minimum NLL (or MSE) on held-out data.

* `temperature.py`: temperature scaling, softmax(z / T) (Guo et al. 2017).
* `affine.py`: vector scaling softmax(w * z + b) and matrix scaling softmax(z @ A + b).
* `ensemble_temperature.py`: a mixture of softmax(z / T), softmax(z) and uniform (Zhang
  et al. 2020).
* `dirichlet.py`: softmax(log p @ W + b) with ODIR (Kull et al. 2019);
  `dirichlet_selection.py` chooses its regularization by cross-validation.
* `platt.py`: sigmoid(a s + b) per class, one-vs-rest (Platt 1999).

Each module holds a method's fit function (`fit_*`, NumPy), the map it returns (`*Map`,
with `predict`) and its Keras wrapper. `_lbfgs.py` is the solver they share.
"""

from keras_normkit.calibration.scaling.affine import (
    MatrixScaling,
    MatrixScalingMap,
    VectorScaling,
    VectorScalingMap,
    fit_matrix_scaling,
    fit_vector_scaling,
)
from keras_normkit.calibration.scaling.dirichlet import (
    DirichletCalibration,
    DirichletCalibrationMap,
    fit_dirichlet_calibration,
)
from keras_normkit.calibration.scaling.dirichlet_selection import (
    DirichletRegularization,
    select_dirichlet_regularization,
)
from keras_normkit.calibration.scaling.ensemble_temperature import (
    EnsembleTemperatureScaling,
    EnsembleTemperatureScalingMap,
    fit_ensemble_temperature_scaling,
)
from keras_normkit.calibration.scaling.platt import (
    PlattScaling,
    PlattScalingMap,
    fit_platt_scaling,
)
from keras_normkit.calibration.scaling.temperature import (
    TemperatureScaling,
    TemperatureScalingMap,
    fit_temperature,
)

__all__ = [
    "DirichletCalibration",
    "DirichletCalibrationMap",
    "DirichletRegularization",
    "EnsembleTemperatureScaling",
    "EnsembleTemperatureScalingMap",
    "MatrixScaling",
    "MatrixScalingMap",
    "PlattScaling",
    "PlattScalingMap",
    "TemperatureScaling",
    "TemperatureScalingMap",
    "VectorScaling",
    "VectorScalingMap",
    "fit_dirichlet_calibration",
    "fit_ensemble_temperature_scaling",
    "fit_matrix_scaling",
    "fit_platt_scaling",
    "fit_temperature",
    "fit_vector_scaling",
    "select_dirichlet_regularization",
]
