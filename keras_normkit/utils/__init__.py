"""Model utilities of keras_normkit."""

from keras_normkit.utils.averaged_weights import ema_weights
from keras_normkit.utils.batch_norm_folding import fold_batch_normalization
from keras_normkit.utils.batch_norm_statistics import recompute_batch_norm_statistics
from keras_normkit.utils.weight_standardization_folding import fold_weight_standardization

__all__ = [
    "ema_weights",
    "fold_batch_normalization",
    "fold_weight_standardization",
    "recompute_batch_norm_statistics",
]
