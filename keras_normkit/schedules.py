"""keras_normkit.schedules (work in progress)."""
