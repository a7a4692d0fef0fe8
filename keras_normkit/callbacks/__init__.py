"""keras_normkit.callbacks (work in progress)."""
