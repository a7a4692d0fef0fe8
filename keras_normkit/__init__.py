"""keras_normkit: Keras 3 building blocks that make deep networks train stably and predict honestly."""

from keras_normkit import activations, layers

__version__ = "0.1.0"

__all__ = ["activations", "layers", "__version__"]
