"""Optimizer wrappers of keras_normkit: gradient transforms that any Keras optimizer goes in."""

from keras_normkit.optimizers.adaptive_gradient_clipping import AdaptiveGradientClipping

__all__ = ["AdaptiveGradientClipping"]
