"""keras_normkit.utils (work in progress)."""
