"""Binning: non-parametric one-vs-rest maps of the predicted probabilities.

* `histogram.py`: histogram binning, the mean held-out label per bin (Zadrozny & Elkan
  2001).
* `isotonic.py`: isotonic regression by pool-adjacent-violators (Zadrozny & Elkan 2002).
* `bayesian.py`: Bayesian binning into quantiles, BBQ (Naeini et al. 2015).

Each module holds a method's fit function (`fit_*`, NumPy), the map it returns (`*Map`,
with `predict`) and its Keras wrapper. `_lookup.py` stores the fitted tables in the
wrappers' weights and looks them up in `keras.ops`; the one-vs-rest columns and
renormalization they share with Platt scaling are in `calibration/_one_vs_rest.py`.
"""

from keras_normkit.calibration.binning.bayesian import (
    BayesianBinning,
    BayesianBinningMap,
    fit_bayesian_binning,
)
from keras_normkit.calibration.binning.histogram import (
    HistogramBinning,
    HistogramBinningMap,
    fit_histogram_binning,
)
from keras_normkit.calibration.binning.isotonic import (
    IsotonicCalibration,
    IsotonicCalibrationMap,
    fit_isotonic_calibration,
)

__all__ = [
    "BayesianBinning",
    "BayesianBinningMap",
    "HistogramBinning",
    "HistogramBinningMap",
    "IsotonicCalibration",
    "IsotonicCalibrationMap",
    "fit_bayesian_binning",
    "fit_histogram_binning",
    "fit_isotonic_calibration",
]
