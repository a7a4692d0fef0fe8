"""Backend-specific code (TensorFlow, JAX, PyTorch) and the one shim over Keras internals.

Nothing here is public API: layers, callbacks and calibration call these helpers so that the
code that depends on one backend, or on a Keras internal, stands in one place.
"""
