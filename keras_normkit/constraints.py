"""keras_normkit.constraints (work in progress)."""
