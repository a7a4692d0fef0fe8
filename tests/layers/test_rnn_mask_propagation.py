"""Our recurrent layers hand their output mask to the layers after them, on every Keras.

keras-nightly 3.16.0.dev2026102704 turned `keras.layers.RNN.supports_masking` off, so a
subclass that relied on it dropped the mask of `Embedding(mask_zero=True)` (downstream
layers then average or attend over padding) and warned at every call. The layers set it
themselves; this test runs in the keras-nightly job too (`make test-keras-nightly`).
"""

import warnings

import keras
import numpy as np
import pytest

from keras_normkit.layers import (
    FastWeightsRNN,
    LayerNormGRU,
    LayerNormLSTM,
    LayerNormSimpleRNN,
)

LAYERS = [FastWeightsRNN, LayerNormGRU, LayerNormLSTM, LayerNormSimpleRNN]


@pytest.mark.parametrize("layer_class", LAYERS)
@pytest.mark.parametrize("return_sequences", [True, False])
def test_output_mask_follows_return_sequences(layer_class, return_sequences):
    tokens = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    embedded = keras.layers.Embedding(5, 3, mask_zero=True)(tokens)
    layer = layer_class(4, return_sequences=return_sequences)
    assert layer.supports_masking
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "... will therefore destroy the mask"
        outputs = layer(embedded)
    mask = getattr(outputs, "_keras_mask", None)
    if return_sequences:
        assert mask is not None, "the mask was dropped"
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mask), tokens != 0)
    else:
        assert mask is None


@pytest.mark.parametrize("layer_class", LAYERS)
def test_a_downstream_pooling_layer_ignores_the_padding(layer_class):
    """GlobalAveragePooling1D after a masked sequence averages the real steps only."""
    tokens = keras.Input((4,), dtype="int32")
    x = keras.layers.Embedding(5, 3, mask_zero=True)(tokens)
    sequence = layer_class(4, return_sequences=True)(x)
    pooled = keras.layers.GlobalAveragePooling1D()(sequence)
    model = keras.Model(tokens, [sequence, pooled])
    data = np.array([[1, 2, 0, 0], [3, 0, 0, 0]])
    steps, mean = (keras.ops.convert_to_numpy(v) for v in model(data))
    for row, length in enumerate((2, 1)):
        np.testing.assert_allclose(mean[row], steps[row, :length].mean(0), rtol=1e-5, atol=1e-6)
