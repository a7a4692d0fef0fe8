"""Training callbacks: learning-rate monitoring and reduction, early stopping, monitors."""

from keras_normkit.callbacks.activation_statistics import ActivationStatistics
from keras_normkit.callbacks.backup import BackupAndRestore
from keras_normkit.callbacks.divergence import DivergenceGuard
from keras_normkit.callbacks.early_stopping import EarlyStopping
from keras_normkit.callbacks.gradient_statistics import GradientStatistics
from keras_normkit.callbacks.learning_rate import LearningRateMonitor, ReduceLROnPlateau
from keras_normkit.callbacks.momentum import MomentumSchedule
from keras_normkit.callbacks.stateful import StatefulCallback
from keras_normkit.callbacks.stochastic_weight_averaging import StochasticWeightAveraging
from keras_normkit.callbacks.time_stopping import TimeStopping

__all__ = [
    "ActivationStatistics",
    "BackupAndRestore",
    "DivergenceGuard",
    "EarlyStopping",
    "GradientStatistics",
    "LearningRateMonitor",
    "MomentumSchedule",
    "ReduceLROnPlateau",
    "StatefulCallback",
    "StochasticWeightAveraging",
    "TimeStopping",
]
