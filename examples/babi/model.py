"""The QRN model of Seo et al. (2017) for bAbI, and an LSTM baseline with the same inputs.

Input module (as in the paper and MemN2N): a shared word embedding and a position
encoding per sentence, `x_t = sum_j l_j * A w_tj` with
`l_kj = (1 - j/J) - (k/d)(1 - 2j/J)`; the question is encoded the same way into `q`.
Empty (padding) sentences are masked. Reduction: two bidirectional `QRN` layers with reset
gates ("2rb"), the second returning the state at the last sentence; answer = softmax(W_y h).
"""

import keras
import numpy as np
from keras import ops

from keras_normkit.layers import QRN


def position_encoding(sentence_length, dim):
    """`l[j, k] = (1 - j/J) - (k/d)(1 - 2j/J)` for 1-based word j and dimension k."""
    j = np.arange(1, sentence_length + 1)[:, None] / sentence_length
    k = np.arange(1, dim + 1)[None, :] / dim
    return ((1 - j) - k * (1 - 2 * j)).astype("float32")


class PositionEncoder(keras.layers.Layer):
    """Sum of position-weighted word vectors `(..., J, d) -> (..., d)`; masks empty sentences."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, words, mask=None):
        weights = position_encoding(words.shape[-2], words.shape[-1])
        if mask is not None:
            words = words * ops.expand_dims(ops.cast(mask, words.dtype), -1)
        return ops.sum(words * ops.cast(weights, words.dtype), axis=-2)

    def compute_mask(self, words, mask=None):
        return None if mask is None else ops.any(mask, axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape[:-2] + input_shape[-1:]


def _inputs(max_sentences, sentence_length, vocab_size, dim):
    story = keras.Input((max_sentences, sentence_length), dtype="int32", name="story")
    question = keras.Input((sentence_length,), dtype="int32", name="question")
    embed = keras.layers.Embedding(vocab_size + 1, dim, mask_zero=True, name="embedding")
    encode = PositionEncoder(name="position_encoding")
    return story, question, encode(embed(story)), encode(embed(question))


def build_qrn(
    max_sentences,
    sentence_length,
    vocab_size,
    dim=50,
    layers=2,
    vector_gates=False,
    last_bidirectional=True,
    update_gate_bias=-2.5,
):
    """The "2rb" QRN: `layers` bidirectional QRN layers with reset gates.

    `update_gate_bias` initializes `b_z` (negative: gates start mostly closed, as the
    reference implementation's "forget bias" does).
    """
    story, question, x, q = _inputs(max_sentences, sentence_length, vocab_size, dim)
    h = q
    qrn_layers = []
    for i in range(layers):
        last = i == layers - 1
        qrn_layers.append(
            QRN(
                dim,
                bidirectional=last_bidirectional or not last,
                vector_gates=vector_gates,
                return_sequences=not last,
                name=f"qrn_{i + 1}",
            )
        )
        h = qrn_layers[-1]([x, h])
    answer = keras.layers.Dense(vocab_size + 1, activation="softmax", name="answer")(h)
    model = keras.Model([story, question], answer, name="qrn_babi")
    for layer in qrn_layers:
        size = layer.cell.gate_size
        bias = ops.convert_to_numpy(layer.cell.gate_bias)
        bias[:size] = update_gate_bias
        layer.cell.gate_bias.assign(bias)
    return model


def build_lstm(max_sentences, sentence_length, vocab_size, dim=50):
    """Baseline: an LSTM reads the sentence vectors, each concatenated with the question."""
    story, question, x, q = _inputs(max_sentences, sentence_length, vocab_size, dim)
    repeated = keras.layers.RepeatVector(max_sentences)(q)
    xq = keras.layers.Concatenate()([x, repeated])
    h = keras.layers.LSTM(dim, name="lstm")(xq)
    answer = keras.layers.Dense(vocab_size + 1, activation="softmax", name="answer")(h)
    return keras.Model([story, question], answer, name="lstm_babi")


def compile_model(model, learning_rate=0.003):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model
