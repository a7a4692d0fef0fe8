"""keras_normkit: Keras 3 building blocks for stable training and honest predictions."""

from keras_normkit import (
    activations,
    calibration,
    callbacks,
    constraints,
    initializers,
    layers,
    metrics,
    migration,
    ops,
    optimizers,
    plotting,
    regularizers,
    schedules,
    uncertainty,
    utils,
)
from keras_normkit.version import __version__

__all__ = [
    "activations",
    "calibration",
    "callbacks",
    "constraints",
    "initializers",
    "layers",
    "metrics",
    "migration",
    "ops",
    "optimizers",
    "plotting",
    "regularizers",
    "schedules",
    "uncertainty",
    "utils",
    "__version__",
]
