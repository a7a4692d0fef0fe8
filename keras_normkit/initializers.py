"""keras_normkit.initializers (work in progress)."""
