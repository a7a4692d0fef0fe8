"""The networks of the benchmark: a deep averaging network (DAN) for 20 News and Reuters, a
bidirectional layer-normalized LSTM for SST (not the paper's Tree-LSTM, see README.md).

Both take `(batch, length)` int32 token ids (0 pads, 1 is out-of-vocabulary) and return
logits (no softmax), as the calibrators want. Embeddings are trained from scratch (no
pre-trained GloVe vectors offline).
"""

import keras
import numpy as np

from keras_normkit.layers import LayerNormLSTM


class WordDropout(keras.layers.Layer):
    """Drops each token (sets its id to the padding id 0) with probability `rate` during
    training, as the DAN's word dropout (Iyyer et al. 2015, Section 3.2)."""

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, ids, training=False):
        if not training or self.rate == 0:
            return ids
        keep = keras.random.uniform(keras.ops.shape(ids), seed=self.seed_generator) >= self.rate
        return keras.ops.where(keep, ids, keras.ops.zeros_like(ids))

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class MaskedMean(keras.layers.Layer):
    """The mean of the embeddings of the non-padding tokens (ids != 0) of each row; a row
    with none gives zeros."""

    def call(self, inputs):
        vectors, ids = inputs
        mask = keras.ops.cast(keras.ops.not_equal(ids, 0), vectors.dtype)[..., None]
        total = keras.ops.sum(vectors * mask, axis=1)
        return total / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)


def dan(
    vocab_size,
    num_classes,
    max_length,
    embedding_dim=100,
    hidden=300,
    depth=3,
    word_dropout=0.3,
    l2=1e-4,
    seed=0,
):
    """DAN (Iyyer et al. 2015): word dropout, the mean embedding, `depth` x [Dense, batch
    norm, ReLU], a linear softmax layer (logits out); L2 `l2` on every kernel (Keras's
    l * sum w^2)."""
    ids = keras.Input((max_length,), dtype="int32", name="ids")
    kept = WordDropout(word_dropout, seed=seed)(ids)
    regularizer = keras.regularizers.L2(l2) if l2 else None
    vectors = keras.layers.Embedding(vocab_size, embedding_dim)(kept)
    x = MaskedMean()([vectors, kept])
    for _ in range(depth):
        x = keras.layers.Dense(hidden, kernel_regularizer=regularizer, use_bias=False)(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Activation("relu")(x)
    logits = keras.layers.Dense(num_classes, kernel_regularizer=regularizer)(x)
    return keras.Model(ids, logits, name="dan")


def bilstm(vocab_size, num_classes, max_length, embedding_dim=100, units=64, dropout=0.5, seed=0):
    """Bidirectional `LayerNormLSTM` over the embedded sentence (padding masked), the two
    last states concatenated, dropout, a linear softmax layer (logits out). Any sentence
    length is accepted (`max_length` is the longest the caller pads to; trained on batches
    of similar lengths, see `LengthBuckets`)."""
    ids = keras.Input((None,), dtype="int32", name="ids")
    vectors = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True)(ids)
    vectors = keras.layers.Dropout(dropout, seed=seed)(vectors)
    x = keras.layers.Bidirectional(LayerNormLSTM(units))(vectors)
    x = keras.layers.Dropout(dropout, seed=seed + 1)(x)
    logits = keras.layers.Dense(num_classes)(x)
    return keras.Model(ids, logits, name="bilstm")


class LengthBuckets(keras.utils.PyDataset):
    """Batches of sentences of similar length, each cut to its longest sentence (rounded up
    to a multiple of `multiple`): the recurrent loop then runs ~20 steps for most batches
    instead of the longest sentence's 56. Each epoch the sentences are sorted by length
    with random tie-breaking, cut into batches and the batches shuffled (seeded)."""

    def __init__(self, ids, labels, batch_size, seed=0, multiple=8):
        super().__init__()
        self.ids, self.labels, self.batch_size, self.multiple = ids, labels, batch_size, multiple
        self.lengths = (ids != 0).sum(axis=1)
        self.rng = np.random.default_rng(seed)
        self.on_epoch_end()

    def on_epoch_end(self):
        order = np.lexsort((self.rng.random(len(self.lengths)), self.lengths))
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        self.batches = [batches[i] for i in self.rng.permutation(len(batches))]
        # Keras infers the input signature from the first two batches (TensorFlow): if
        # they had the same width, that width would be fixed and a batch of another one
        # would fail. A batch of another width is swapped into second place.
        widths = [self._width(rows) for rows in self.batches]
        other = next((i for i, w in enumerate(widths) if w != widths[0]), None)
        if other is not None and other > 1:
            self.batches[1], self.batches[other] = self.batches[other], self.batches[1]

    def _width(self, rows):
        longest = max(1, int(self.lengths[rows].max()))
        return min(self.ids.shape[1], -(-longest // self.multiple) * self.multiple)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        rows = self.batches[index]
        return self.ids[rows, : self._width(rows)], self.labels[rows]
