"""keras_normkit.regularizers (work in progress)."""
