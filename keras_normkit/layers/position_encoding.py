"""`PositionEncoding`: the sentence encoder of end-to-end memory networks (and QRN)."""

import keras
from keras import ops

from keras_normkit._validation import check_bool


@keras.saving.register_keras_serializable(package="keras_normkit")
class PositionEncoding(keras.layers.Layer):
    """Position encoding: word vectors `(batch, sentences, words, d)` -> `(batch, sentences, d)`.

    Each sentence of word vectors `x_1, ..., x_J` (each of size `d`) becomes one vector
    `m = sum_j l_j * x_j` (element-wise product), with

        l_kj = (1 - j/J) - (k/d)(1 - 2j/J)

    where `j = 1, ..., J` is the (1-based) position of the word in the sentence, `k = 1, ...,
    d` the (1-based) embedding dimension and `J` the number of words of the sentence, as in
    Sukhbaatar et al. (2015), Section 4.1. Unlike a plain sum (bag of words), the weights
    depend on the word order.

    Masking: with a `(..., words)` boolean word mask (for example the one an
    `Embedding(mask_zero=True)` attaches to its output), masked words contribute 0 and, by
    default, `J` is each sentence's true length (its number of unmasked words) and `j`
    counts the unmasked words only, so a padded sentence is encoded exactly as the same
    sentence without the padding. With `use_padded_length=True`, `J` is the padded length
    (the size of the words axis, the same for every sentence) and `j` the index on that
    axis: the encoding of a sentence then depends on how much it was padded, which is what
    the common implementations of memory networks (and the bAbI example of this library)
    do. Without a mask both choices are the same. The output mask is true where a sentence
    has at least one unmasked word (`None` without an input mask); an empty sentence is
    encoded as zeros.

    The sum is computed in float32 (or float64 for float64 inputs) and cast to the compute
    dtype, so float16/bfloat16 policies give the float32 result rounded once.

    Any number of leading axes is accepted: `(batch, words, d)` (one sentence per example,
    e.g. a question) gives `(batch, d)`.

    Args:
        use_padded_length: Python bool. If `True`, `J` is the padded sentence length
            rather than each sentence's number of unmasked words (see above). Default:
            `False`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A float tensor `(batch, ..., words, d)` of rank >= 3, `d` known.
        mask: Optional boolean tensor `(batch, ..., words)`, true for real words.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import PositionEncoding
    >>> words = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], "float32")  # J = 2 words, d = 2
    >>> # l_1 = (0.5, 0.5), l_2 = (0.5, 1.0): m = (0.5*1 + 0.5*3, 0.5*2 + 1.0*4)
    >>> print(keras.ops.convert_to_numpy(PositionEncoding()(words)))
    [[[2. 5.]]]
    >>> mask = np.array([[[True, False]]])  # one true word: J = 1, l_1 = (k/d) = (0.5, 1.0)
    >>> print(keras.ops.convert_to_numpy(PositionEncoding()(words, mask=mask)))
    [[[0.5 2. ]]]

    Reference: Sukhbaatar, Szlam, Weston & Fergus, "End-To-End Memory Networks", NIPS 2015,
    arXiv:1503.08895, Section 4.1; used as the input module of Seo et al., "Query-Reduction
    Networks for Question Answering", ICLR 2017, arXiv:1606.04582.
    """

    def __init__(self, use_padded_length=False, **kwargs):
        super().__init__(**kwargs)
        self.use_padded_length = check_bool("use_padded_length", use_padded_length)
        self.supports_masking = True
        self.autocast = False

    @staticmethod
    def _check_shape(input_shape):
        if len(input_shape) < 3:
            raise ValueError(
                "`PositionEncoding` expects inputs of rank >= 3, `(batch, ..., words, d)`. "
                f"Received: input_shape={tuple(input_shape)} (rank {len(input_shape)})"
            )
        if input_shape[-1] is None:
            raise ValueError(
                "The last dimension `d` of the inputs of `PositionEncoding` must be known. "
                f"Received: input_shape={tuple(input_shape)}"
            )

    def build(self, input_shape):
        self._check_shape(input_shape)

    def call(self, inputs, mask=None):
        x = ops.convert_to_tensor(inputs)
        self._check_shape(x.shape)
        dtype = keras.backend.result_type(x.dtype, "float32")
        x = ops.cast(x, dtype)
        d = x.shape[-1]
        k = ops.cast(ops.arange(1, d + 1), dtype) / d  # (d,): k/d
        if mask is not None:
            if len(mask.shape) != len(x.shape) - 1:
                raise ValueError(
                    "The mask of `PositionEncoding` must have the shape of the inputs "
                    "without their last axis, `(batch, ..., words)`. Received: mask of "
                    f"shape {tuple(mask.shape)} for inputs of shape {tuple(x.shape)}"
                )
            weights = ops.cast(mask, dtype)  # (..., J)
        if mask is None or self.use_padded_length:
            length = ops.shape(x)[-2]
            j_over_length = ops.cast(ops.arange(1, length + 1), dtype) / ops.cast(length, dtype)
        else:
            # j: rank of each unmasked word among the unmasked words; J: their number.
            true_length = ops.sum(weights, axis=-1, keepdims=True)
            j_over_length = ops.cumsum(weights, axis=-1) / ops.maximum(true_length, 1.0)
        j_over_length = ops.expand_dims(j_over_length, -1)  # (..., J, 1)
        encoding = (1.0 - j_over_length) - k * (1.0 - 2.0 * j_over_length)  # (..., J, d)
        if mask is not None:
            x = x * ops.expand_dims(weights, -1)
        return ops.cast(ops.sum(encoding * x, axis=-2), self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None if mask is None else ops.any(mask, axis=-1)

    def compute_output_shape(self, input_shape):
        self._check_shape(input_shape)
        return tuple(input_shape[:-2]) + (input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update({"use_padded_length": self.use_padded_length})
        return config
