"""Keras layers of keras_normkit."""

from keras_normkit.layers.alpha_dropout import AlphaDropout
from keras_normkit.layers.selu import SELU

__all__ = ["SELU", "AlphaDropout"]
