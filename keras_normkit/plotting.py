"""keras_normkit.plotting (work in progress)."""
