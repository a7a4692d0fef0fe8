"""Model utilities of keras_normkit."""

from keras_normkit.utils.batch_norm_folding import fold_batch_normalization

__all__ = ["fold_batch_normalization"]
