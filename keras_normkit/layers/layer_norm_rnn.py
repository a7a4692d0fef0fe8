"""Layer-normalized recurrent cells and layers (Ba, Kiros & Hinton, 2016).

Drop-in replacements for Keras's `SimpleRNNCell`, `LSTMCell` and `GRUCell` (same
constructor arguments, same weights `kernel`, `recurrent_kernel`, `bias`, same gate order,
same dropout-mask API) in which the pre-activations are layer-normalized,
`LN(a) = gamma * (a - mean(a)) / sqrt(var(a) + epsilon) + beta` over the features of each
example, plus the `LayerNormSimpleRNN`, `LayerNormLSTM` and `LayerNormGRU` layers that wrap
them in `keras.layers.RNN`.

This module gathers the six classes under their original import path; each family lives in
its own module (`layer_norm_simple_rnn`, `layer_norm_lstm`, `layer_norm_gru`, with the
formulas) and their shared (private) cell and layer bases in `_layer_norm_rnn_base`, which
this module does not re-export. Saved `.keras`
files name the classes by their registered names (`keras_normkit>LayerNormLSTMCell`, ...),
which did not change.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
"""

from keras_normkit.layers import layer_norm_gru, layer_norm_lstm, layer_norm_simple_rnn
from keras_normkit.layers.layer_norm_gru import LayerNormGRU as LayerNormGRU
from keras_normkit.layers.layer_norm_gru import LayerNormGRUCell as LayerNormGRUCell
from keras_normkit.layers.layer_norm_lstm import LayerNormLSTM as LayerNormLSTM
from keras_normkit.layers.layer_norm_lstm import LayerNormLSTMCell as LayerNormLSTMCell
from keras_normkit.layers.layer_norm_simple_rnn import LayerNormSimpleRNN as LayerNormSimpleRNN
from keras_normkit.layers.layer_norm_simple_rnn import (
    LayerNormSimpleRNNCell as LayerNormSimpleRNNCell,
)

# The public names of the three family modules, each family's cell and layer.
__all__ = [*layer_norm_simple_rnn.__all__, *layer_norm_lstm.__all__, *layer_norm_gru.__all__]
