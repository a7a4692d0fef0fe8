"""`PositionEncoding`: NumPy reference of l_kj, masking vs unpadded, padded length, errors."""

import keras
import numpy as np
import pytest

from keras_normkit.layers import PositionEncoding
from tests.conformance import LayerConformanceTestCase


def np_position_weights(sentence_length, dim):
    """l[j-1, k-1] = (1 - j/J) - (k/d)(1 - 2j/J), j = 1..J, k = 1..d, written as two loops."""
    weights = np.zeros((sentence_length, dim))
    for j in range(1, sentence_length + 1):
        for k in range(1, dim + 1):
            weights[j - 1, k - 1] = (1 - j / sentence_length) - (k / dim) * (
                1 - 2 * j / sentence_length
            )
    return weights


def np_encode(sentence, dim):
    """m = sum_j l_j * x_j of one unpadded sentence `(J, d)`."""
    return (np_position_weights(len(sentence), dim) * sentence).sum(axis=0)


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


class PositionEncodingConformanceTest(LayerConformanceTestCase):
    def test_conformance(self):
        self.run_conformance_test(
            PositionEncoding,
            {},
            input_shape=(2, 3, 4, 5),
            expected_output_shape=(2, 3, 5),
            supports_masking=True,
            expected_num_trainable_weights=0,
            run_training_check=False,
            dynamic_axes=(1, 2),
        )

    def test_conformance_padded_length(self):
        self.run_conformance_test(
            PositionEncoding,
            {"use_padded_length": True},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            run_training_check=False,
        )


def test_weights_by_hand():
    # J = 3, d = 2: j/J = 1/3, 2/3, 1; l_kj = (1 - j/J) - (k/2)(1 - 2j/J).
    expected = np.array(
        [[2 / 3 - 1 / 6, 2 / 3 - 1 / 3], [1 / 3 + 1 / 6, 1 / 3 + 1 / 3], [0.5, 1.0]]
    )
    np.testing.assert_allclose(np_position_weights(3, 2), expected, atol=1e-12)
    eye = np.zeros((1, 1, 3, 2), "float32") + np.eye(3, 2, dtype="float32")  # x_1=e_1, x_2=e_2
    np.testing.assert_allclose(
        to_numpy(PositionEncoding()(eye))[0, 0], [expected[0, 0], expected[1, 1]], atol=1e-6
    )


@pytest.mark.parametrize("sentence_length,dim", [(1, 1), (1, 4), (2, 3), (5, 7), (11, 50)])
def test_matches_numpy(sentence_length, dim):
    x = np.random.default_rng(sentence_length * 100 + dim).normal(size=(2, 3, sentence_length, dim))
    expected = np.einsum("jk,bsjk->bsk", np_position_weights(sentence_length, dim), x)
    for padded in (False, True):
        y = to_numpy(PositionEncoding(use_padded_length=padded)(x.astype("float32")))
        assert y.shape == (2, 3, dim)
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # Rank 3: one sentence per example.
    y = to_numpy(PositionEncoding()(x[:, 0].astype("float32")))
    np.testing.assert_allclose(y, expected[:, 0], rtol=1e-5, atol=1e-5)


def test_single_word_is_scaled_by_k_over_d():
    # J = 1: l_k1 = (1 - 1) - (k/d)(1 - 2) = k/d (not 1, not a plain sum).
    y = to_numpy(PositionEncoding()(np.ones((1, 1, 1, 4), "float32")))
    np.testing.assert_allclose(y[0, 0], [0.25, 0.5, 0.75, 1.0], atol=1e-7)


def _padded_batch(lengths, max_length, dim, seed=0):
    rng = np.random.default_rng(seed)
    words = rng.normal(size=(1, len(lengths), max_length, dim)).astype("float32")
    mask = np.zeros((1, len(lengths), max_length), bool)
    for s, length in enumerate(lengths):
        mask[0, s, :length] = True
    # Garbage in the padding: it must not matter.
    words[~mask] = 1e3
    return words, mask


def test_mask_equals_unpadded_sentences():
    lengths, max_length, dim = [1, 3, 6, 0], 6, 5
    words, mask = _padded_batch(lengths, max_length, dim)
    y = to_numpy(PositionEncoding()(words, mask=mask))
    for s, length in enumerate(lengths):
        if length == 0:
            np.testing.assert_array_equal(y[0, s], np.zeros(dim))
            continue
        unpadded = words[:, s : s + 1, :length]
        np.testing.assert_allclose(y[0, s], to_numpy(PositionEncoding()(unpadded))[0, 0], atol=1e-5)
        np.testing.assert_allclose(y[0, s], np_encode(words[0, s, :length], dim), atol=1e-4)


def test_mask_counts_only_unmasked_words():
    # Leading padding and holes: j is the rank among the unmasked words.
    words = np.random.default_rng(1).normal(size=(1, 1, 5, 3)).astype("float32")
    mask = np.array([[[False, True, False, True, True]]])
    y = to_numpy(PositionEncoding()(words, mask=mask))
    np.testing.assert_allclose(y[0, 0], np_encode(words[0, 0, [1, 3, 4]], 3), atol=1e-5)


def test_padded_length_option():
    lengths, max_length, dim = [2, 4], 7, 3
    words, mask = _padded_batch(lengths, max_length, dim, seed=2)
    y = to_numpy(PositionEncoding(use_padded_length=True)(words, mask=mask))
    weights = np_position_weights(max_length, dim)  # J = 7 for every sentence
    for s, length in enumerate(lengths):
        expected = (weights[:length] * words[0, s, :length]).sum(axis=0)
        np.testing.assert_allclose(y[0, s], expected, atol=1e-5)
        # ... which differs from the true-length encoding.
        assert not np.allclose(y[0, s], np_encode(words[0, s, :length], dim), atol=1e-3)


def test_output_mask_and_keras_masking_from_embedding():
    tokens = np.array([[[3, 1, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0]]], "int32")
    embed = keras.layers.Embedding(5, 4, mask_zero=True)
    layer = PositionEncoding()
    np.testing.assert_array_equal(
        to_numpy(layer.compute_mask(None, tokens != 0)), [[True, True, False]]
    )
    assert layer.compute_mask(None, None) is None
    inputs = keras.Input((3, 4), dtype="int32")
    outputs = layer(embed(inputs))
    model = keras.Model(inputs, outputs)
    y = to_numpy(model(tokens))
    table = to_numpy(embed.embeddings)
    np.testing.assert_allclose(y[0, 0], np_encode(table[[3, 1]], 4), atol=1e-5)
    np.testing.assert_allclose(y[0, 1], np_encode(table[[2]], 4), atol=1e-5)
    np.testing.assert_array_equal(y[0, 2], np.zeros(4))
    # The sentence mask reaches the next layer.
    seen = {}

    class Probe(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.supports_masking = True

        def call(self, x, mask=None):
            seen["mask"] = mask
            return x

    Probe()(layer(embed(tokens)))
    np.testing.assert_array_equal(to_numpy(seen["mask"]), [[True, True, False]])


def test_mixed_precision_computes_in_float32():
    x = (np.random.default_rng(3).normal(size=(2, 3, 9, 8)) * 100).astype("float16")
    reference = to_numpy(PositionEncoding()(x.astype("float32")))
    layer = PositionEncoding(dtype="mixed_float16")
    y = layer(x)
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    # One rounding of the float32 result (a float16 accumulation would be further off).
    np.testing.assert_allclose(
        to_numpy(y).astype("float32"), reference.astype("float16").astype("float32"), rtol=1e-6
    )
    y = PositionEncoding(dtype="mixed_bfloat16")(x)
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"


def test_compute_output_shape_and_config():
    layer = PositionEncoding(use_padded_length=True, name="pe")
    assert layer.compute_output_shape((None, 10, 6, 50)) == (None, 10, 50)
    assert layer.compute_output_shape((None, None, 50)) == (None, 50)
    restored = PositionEncoding.from_config(layer.get_config())
    assert restored.use_padded_length is True and restored.name == "pe"
    assert keras.saving.get_registered_name(PositionEncoding) == "keras_normkit>PositionEncoding"


def test_bad_arguments_and_inputs():
    with pytest.raises(TypeError, match="use_padded_length"):
        PositionEncoding(use_padded_length=1)
    with pytest.raises(ValueError, match="rank >= 3"):
        PositionEncoding()(np.ones((2, 3), "float32"))
    with pytest.raises(ValueError, match="rank >= 3"):
        PositionEncoding().compute_output_shape((None, 5))
    with pytest.raises(ValueError, match="must be known"):
        PositionEncoding()(keras.Input((3, 4, None)))
    with pytest.raises(ValueError, match="mask"):
        PositionEncoding()(np.ones((1, 2, 3, 4), "float32"), mask=np.ones((1, 2), bool))
