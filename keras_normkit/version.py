"""The single source of keras_normkit's version (read by setup.cfg and `keras_normkit.__version__`)."""

__version__ = "0.1.0"
