"""keras_normkit.metrics (work in progress)."""
