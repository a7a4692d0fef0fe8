"""keras_normkit.calibration (work in progress)."""
