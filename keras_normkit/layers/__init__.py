"""Keras layers of keras_normkit."""

from keras_normkit.layers.alpha_dropout import AlphaDropout
from keras_normkit.layers.convex_combination import ConvexCombination
from keras_normkit.layers.fast_weights import FastWeightsRNN, FastWeightsRNNCell
from keras_normkit.layers.filter_response_normalization import TLU, FilterResponseNormalization
from keras_normkit.layers.ghost_batch_normalization import GhostBatchNormalization
from keras_normkit.layers.layer_norm_gru import LayerNormGRU, LayerNormGRUCell
from keras_normkit.layers.layer_norm_lstm import LayerNormLSTM, LayerNormLSTMCell
from keras_normkit.layers.layer_norm_simple_rnn import LayerNormSimpleRNN, LayerNormSimpleRNNCell
from keras_normkit.layers.nf_residual import NFResidual
from keras_normkit.layers.peephole_lstm import PeepholeLSTMCell
from keras_normkit.layers.position_encoding import PositionEncoding
from keras_normkit.layers.qrn import QRN, QRNCell
from keras_normkit.layers.scale_normalization import ScaleNormalization
from keras_normkit.layers.selu import SELU
from keras_normkit.layers.skip_init import SkipInit
from keras_normkit.layers.weight_normalization import WeightNormalization
from keras_normkit.layers.weight_standardization import WeightStandardization

__all__ = [
    "SELU",
    "AlphaDropout",
    "FastWeightsRNN",
    "FastWeightsRNNCell",
    "LayerNormSimpleRNNCell",
    "LayerNormLSTMCell",
    "LayerNormGRUCell",
    "LayerNormSimpleRNN",
    "LayerNormLSTM",
    "LayerNormGRU",
    "ScaleNormalization",
    "ConvexCombination",
    "QRN",
    "QRNCell",
    "WeightNormalization",
    "WeightStandardization",
    "SkipInit",
    "NFResidual",
    "GhostBatchNormalization",
    "PositionEncoding",
    "FilterResponseNormalization",
    "TLU",
    "PeepholeLSTMCell",
]
