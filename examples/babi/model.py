"""The QRN model of Seo et al. (2017) for bAbI, and an LSTM baseline with the same inputs.

Input module (as in the paper and MemN2N): a shared word embedding and a position
encoding per sentence, `x_t = sum_j l_j * A w_tj` with
`l_kj = (1 - j/J) - (k/d)(1 - 2j/J)` (`keras_normkit.layers.PositionEncoding`, with `J` the
padded sentence length); the question is encoded the same way into `q`. Padding words
contribute nothing and empty (padding) sentences are masked. Reduction ("2rb", as in the
reference implementation seominjoon/qrn): a bidirectional `QRN` layer with a reset gate per
direction (the paper's and the reference's; `share_reset_gate=True` gives both directions one)
whose output `q2_t = h_fwd_t + h_bwd_t` is the query of a last, forward `QRN` layer (its
reset gate is unused in the reference code) returning the state at the last sentence;
answer = softmax(W_y h) without bias.

Initialization, `init="reference"` (the reference code's, default): embeddings and gate
kernels uniform in [-sqrt(3), sqrt(3)] (unit variance; Keras's default +-0.05 embeddings make
`x * q` tiny and every gate equal at the start; it matters on task 2 with 1k examples);
`init="paper"` (the paper's text): the input and output weights (embedding, answer) normal
with standard deviation 1/sqrt(d), Glorot inside the QRN unit. Both: update-gate bias -2.5,
L2 weight decay on every weight matrix; see README.md.
"""

import keras
from keras import ops

from keras_normkit.layers import QRN, PositionEncoding
from keras_normkit.ops import linear_scan

INIT_SCALE = 3**0.5  # uniform [-sqrt(3), sqrt(3)]: unit variance, as in the reference code


def _l2(weight_decay):
    # The reference adds weight_decay * sum(w**2) / 2 to the loss.
    return keras.regularizers.L2(weight_decay / 2) if weight_decay else None


def _paper_init(dim):
    """The paper's input and output weights: N(0, 1/sqrt(d)) (standard deviation)."""
    return keras.initializers.RandomNormal(stddev=dim**-0.5)


def _inputs(
    max_sentences, sentence_length, vocab_size, dim, init_scale=None, weight_decay=0.0, init=None
):
    story = keras.Input((max_sentences, sentence_length), dtype="int32", name="story")
    question = keras.Input((sentence_length,), dtype="int32", name="question")
    if init is None:
        init = (
            "uniform"
            if init_scale is None
            else keras.initializers.RandomUniform(-init_scale, init_scale)
        )
    embed = keras.layers.Embedding(
        vocab_size + 1,
        dim,
        mask_zero=True,
        embeddings_initializer=init,
        embeddings_regularizer=_l2(weight_decay),
        name="embedding",
    )
    # J = the padded sentence length (as this example always did, so its published numbers
    # are unchanged); padding words are masked out and empty sentences masked.
    encode = PositionEncoding(use_padded_length=True, name="position_encoding")
    return story, question, encode(embed(story)), encode(embed(question))


class TiedLastQRN(keras.layers.Layer):
    """The last layer of a QRN stack with tied weights: forward, no reset gate, and the
    weights of the stack's first `QRN` layer (its update gate and candidate), as the
    reference code runs its layers (one set of variables, `reuse_variables()`).

    `h_t = (1 - z_t) h_{t-1} + z_t h~_t` with the first layer's `z` and `h~`; returns the
    state at the last step (masked steps keep the state). It holds another layer, so a
    model with it saves its weights (`save_weights`), not a `.keras` file.
    """

    def __init__(self, shared, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(shared, QRN):
            raise TypeError(f"`shared` must be a `QRN` layer. Received: {shared!r}")
        self.shared = shared
        self.supports_masking = True

    def call(self, inputs, mask=None):
        x, q = inputs
        step_mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        cell = self.shared.cell
        u_z, _ = cell.gate_logits(x, q)  # the first layer's update gate; no reset gate
        a, b = ops.sigmoid(-u_z), ops.sigmoid(u_z) * cell.candidate(x, q)
        if step_mask is not None:  # masked steps keep the state
            keep = ops.expand_dims(ops.cast(step_mask, "bool"), -1)
            a, b = ops.where(keep, a, ops.ones_like(a)), ops.where(keep, b, ops.zeros_like(b))
        a, b = ops.cast(a, "float32"), ops.cast(b, "float32")
        return ops.cast(linear_scan(a, b)[:, -1], self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], self.shared.units)


def build_qrn(
    max_sentences,
    sentence_length,
    vocab_size,
    dim=50,
    layers=2,
    vector_gates=False,
    last_bidirectional=False,
    update_gate_bias=-2.5,
    init_scale=INIT_SCALE,
    weight_decay=0.001,
    tie_layers=False,
    share_reset_gate=False,
    init="reference",
):
    """The "2rb" QRN: `layers - 1` bidirectional QRN layers with reset gates, then a last one.

    The last layer is forward-only without reset gate, as in the reference code, unless
    `last_bidirectional` (then it is bidirectional with a reset gate, like the others).
    `update_gate_bias` initializes `b_z` (negative: gates start mostly closed, the
    reference's "forget bias" 2.5); `init_scale` bounds the uniform initialization of the
    embeddings and gate kernels; `weight_decay` is the L2 coefficient of all weight matrices.
    `tie_layers`: every layer uses the first layer's weights, as the reference code does
    (the last one through `TiedLastQRN`); not with `last_bidirectional`.
    `share_reset_gate`: the bidirectional layers' directions share one reset gate
    (keras_normkit 0.1's form) instead of one each. `init`: `"reference"` (the reference
    code's uniform, bounded by `init_scale`) or `"paper"` (normal 1/sqrt(d) input and output
    weights, Glorot in the QRN; `init_scale` unused).
    """
    if tie_layers and last_bidirectional:
        raise ValueError(
            "`tie_layers=True` needs the reference's last layer: `last_bidirectional=False`."
        )
    if init not in ("reference", "paper"):
        raise ValueError(f'`init` must be "reference" or "paper". Received: init={init!r}')
    if init == "paper":
        init_scale = None
    story, question, x, q = _inputs(
        max_sentences,
        sentence_length,
        vocab_size,
        dim,
        init_scale,
        weight_decay,
        _paper_init(dim) if init == "paper" else None,
    )
    h = q
    qrn_layers = []
    for i in range(layers):
        last = i == layers - 1
        if tie_layers and i > 0:
            h = (TiedLastQRN(qrn_layers[0], name=f"qrn_{i + 1}") if last else qrn_layers[0])([x, h])
            continue
        qrn_layers.append(
            QRN(
                dim,
                use_reset_gate=last_bidirectional or not last,
                bidirectional=last_bidirectional or not last,
                share_reset_gate=share_reset_gate,
                vector_gates=vector_gates,
                return_sequences=not last,
                kernel_regularizer=_l2(weight_decay),
                name=f"qrn_{i + 1}",
            )
        )
        h = qrn_layers[-1]([x, h])
    answer = keras.layers.Dense(
        vocab_size + 1,
        activation="softmax",
        use_bias=False,
        kernel_initializer=_paper_init(dim) if init == "paper" else "glorot_uniform",
        kernel_regularizer=_l2(weight_decay),
        name="answer",
    )(h)
    model = keras.Model([story, question], answer, name="qrn_babi")
    for layer in qrn_layers:
        cell = layer.cell
        if init_scale is not None:
            init = keras.initializers.RandomUniform(-init_scale, init_scale)
            cell.gate_kernel.assign(init(cell.gate_kernel.shape))
        bias = ops.convert_to_numpy(cell.gate_bias)
        bias[: cell.gate_size] = update_gate_bias
        cell.gate_bias.assign(bias)
    return model


def build_lstm(max_sentences, sentence_length, vocab_size, dim=50):
    """Baseline: an LSTM reads the sentence vectors, each concatenated with the question.

    The padding sentences are masked (the LSTM stops at each story's last sentence).
    """
    story, question, x, q = _inputs(max_sentences, sentence_length, vocab_size, dim)
    sentence_mask = ops.any(ops.not_equal(story, 0), axis=-1)
    repeated = ops.repeat(ops.expand_dims(q, 1), max_sentences, axis=1)
    xq = ops.concatenate([x, repeated], axis=-1)
    h = keras.layers.LSTM(dim, name="lstm")(xq, mask=sentence_mask)
    answer = keras.layers.Dense(vocab_size + 1, activation="softmax", name="answer")(h)
    return keras.Model([story, question], answer, name="lstm_babi")


def compile_model(model, optimizer="adagrad", learning_rate=None):
    """Adagrad (lr 0.5, the reference code's default; the paper states 0.1 for bAbI) or
    Adam (lr 0.003), sparse cross-entropy, accuracy."""
    if optimizer == "adagrad":
        optimizer = keras.optimizers.Adagrad(learning_rate or 0.5)
    elif optimizer == "adam":
        optimizer = keras.optimizers.Adam(learning_rate or 0.003)
    else:
        raise ValueError(f'`optimizer` must be "adagrad" or "adam". Received: {optimizer!r}')
    model.compile(
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model
