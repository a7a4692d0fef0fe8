"""Layer-normalized LSTM (Ba, Kiros & Hinton, 2016, section 3.1).

`LayerNormLSTMCell`, a drop-in for `keras.layers.LSTMCell`, and `LayerNormLSTM`, the
`keras.layers.RNN` around it (a drop-in for `keras.layers.LSTM`). In Keras's gate order
(input, forget, candidate, output):

    [i, f, g, o] = LN_x(x_t W) + LN_h(h_{t-1} U) + b,
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g),
    h_t = sigmoid(o) * tanh(LN_c(c_t)),

each `LN` with its own gain and shift; the un-normalized `c_t` is carried to the next step
(`carry_normalized_state=True` carries `LN_c(c_t)`, as TF-Addons did). The shared
constructor, weights, norms, dropout and config are in `_layer_norm_rnn_base`.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450, §3.1.
"""

import keras
from keras import activations, initializers, ops

from keras_normkit.layers._cell_args import activation_name
from keras_normkit.layers._layer_norm_rnn_base import _LayerNormCellBase, _LayerNormRNNBase

__all__ = ["LayerNormLSTMCell", "LayerNormLSTM"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormLSTMCell(_LayerNormCellBase):
    """Cell of a layer-normalized LSTM (Ba et al., 2016), a drop-in for `LSTMCell`.

    With gates in Keras's order (input `i`, forget `f`, candidate `g`, output `o`):
    `[i, f, g, o] = LN_x(x_t W) + LN_h(h_{t-1} U) + b`,
    `c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)`,
    `h_t = sigmoid(o) * tanh(LN_c(c_t))`,
    where each `LN` is a separate `keras.layers.LayerNormalization` (own gain and bias)
    over the features of one example: `LN_x` and `LN_h` over all `4 * units` gate
    pre-activations, `LN_c` over the `units` cell values. The cell carries the
    **un-normalized** `c_t` to the next step, as in the paper's equations.

    Difference from TF-Addons' `LayerNormLSTMCell`: TF-Addons replaced the carried state
    with `LN_c(c_t)` (so `c_{t+1} = f * LN_c(c_t) + ...`). Pass
    `carry_normalized_state=True` to get that behaviour. Everything else matches
    TF-Addons (norm over all four gates at once, bias added after both norms, same gate
    order, defaults `norm_epsilon=1e-3`, gain 1, shift 0).

    Migrating from TF-Addons: `LayerNormLSTMCell(units, carry_normalized_state=True)`
    (keeping `norm_epsilon=1e-3`, TF-Addons' default) reproduces `tfa.rnn.LayerNormLSTMCell`
    exactly once its weights are ported. Both cells list their weights in the same order,
    `[kernel, recurrent_kernel, bias, gamma, beta of the input (TF-Addons: "kernel_norm")
    norm, gamma, beta of the recurrent norm, gamma, beta of the state norm]`, so
    `cell.set_weights(tfa_cell.get_weights())` ports them.

    Args:
        units: Positive integer, dimensionality of the output space.
        activation: Activation of the candidate and of the output (`tanh` above).
        recurrent_activation: Activation of the gates (`sigmoid` above).
        use_bias: Boolean, whether to add the bias `b`. Default: `True`.
        kernel_initializer: Initializer of `kernel` (W), as in `keras.layers.LSTMCell`.
        recurrent_initializer: Initializer of `recurrent_kernel` (U), as in
            `keras.layers.LSTMCell`.
        bias_initializer: Initializer of `bias`, as in `keras.layers.LSTMCell`.
        unit_forget_bias: Boolean, whether to initialize the forget-gate bias to 1.
            Default: `True`.
        carry_normalized_state: Boolean, carry `LN_c(c_t)` instead of `c_t` (the
            TF-Addons behaviour). Default: `False`.
        **kwargs: The keyword arguments below, and base layer keyword arguments, such as
            `name` and `dtype`.

    Keyword Args:
        kernel_regularizer: Optional regularizer of `kernel`.
        recurrent_regularizer: Optional regularizer of `recurrent_kernel`.
        bias_regularizer: Optional regularizer of `bias`.
        kernel_constraint: Optional constraint of `kernel`.
        recurrent_constraint: Optional constraint of `recurrent_kernel`.
        bias_constraint: Optional constraint of `bias`.
        dropout: Float in [0, 1), fraction of the inputs to drop. Default: 0.
        recurrent_dropout: Float in [0, 1), fraction of `h_{t-1}` to drop. Default: 0.
        seed: Optional integer seed for dropout.
        norm_epsilon: Float > 0 added to the variance in each LN. Default: `1e-3` (Keras's
            `LayerNormalization` default).
        norm_gamma_initializer: Initializer for the LN gains. Default: `"ones"`.
        norm_beta_initializer: Initializer for the LN biases. Default: `"zeros"`.

    Call arguments:
        inputs: A 2D tensor `(batch, features)`.
        states: A list `[h_{t-1}, c_{t-1}]` of two `(batch, units)` tensors.
        training: Python boolean, whether to apply dropout.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormLSTMCell
    >>> rnn = keras.layers.RNN(LayerNormLSTMCell(4), return_state=True)
    >>> output, h, c = rnn(np.zeros((2, 5, 3), "float32"))
    >>> tuple(output.shape), tuple(c.shape)
    ((2, 4), (2, 4))

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450, §3.1.
    """

    _num_blocks = 4
    _norm_names = ("input_norm", "recurrent_norm", "state_norm")

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        carry_normalized_state=False,
        **kwargs,
    ):
        super().__init__(
            units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        self.recurrent_activation = activations.get(recurrent_activation)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.carry_normalized_state = bool(carry_normalized_state)
        self.state_size = [self.units, self.units]
        self.input_norm = self._make_norm("input_norm")
        self.recurrent_norm = self._make_norm("recurrent_norm")
        self.state_norm = self._make_norm("state_norm")

    def build(self, input_shape):
        self._build_kernels(input_shape[-1])
        n = self.units
        initializer = None
        if self.unit_forget_bias:

            def initializer(_, *args, **kwargs):
                return ops.concatenate(
                    [
                        self.bias_initializer((n,), *args, **kwargs),
                        initializers.get("ones")((n,), *args, **kwargs),
                        self.bias_initializer((2 * n,), *args, **kwargs),
                    ]
                )

        self.bias = self._add_bias((4 * n,), initializer)
        self.input_norm.build((None, 4 * n))
        self.recurrent_norm.build((None, 4 * n))
        self.state_norm.build((None, n))
        self.built = True

    def _project_inputs(self, inputs, w, training):
        x = self._dropped_inputs(inputs, training)
        x = self._norm(self.input_norm, ops.matmul(x, w["kernel"]), w)
        return x + w["bias"] if self.use_bias else x

    def _recurrent_step(self, projected, states, w, training):
        h_tm1, c_tm1 = states[0], states[1]
        h_dropped = self._dropped_state(h_tm1, training)
        u = ops.matmul(h_dropped, w["recurrent_kernel"])
        z = projected + self._norm(self.recurrent_norm, u, w)
        z_i, z_f, z_g, z_o = ops.split(z, 4, axis=-1)
        i = self.recurrent_activation(z_i)
        f = self.recurrent_activation(z_f)
        o = self.recurrent_activation(z_o)
        c = f * c_tm1 + i * self.activation(z_g)
        c_normalized = self._norm(self.state_norm, c, w)
        h = o * self.activation(c_normalized)
        return h, [h, c_normalized if self.carry_normalized_state else c]

    def torch_loop(self, sequences, initial_state, mask, training, **rnn_arguments):
        from keras_normkit.backend import torch_rnn

        return torch_rnn.layer_norm_lstm(
            sequences,
            initial_state,
            **self._torch_loop_arguments(sequences, initial_state, training),
            recurrent_activation=activation_name(self.recurrent_activation),
            carry_normalized_state=self.carry_normalized_state,
            mask=mask,
            **rnn_arguments,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "recurrent_activation": activations.serialize(self.recurrent_activation),
                "unit_forget_bias": self.unit_forget_bias,
                "carry_normalized_state": self.carry_normalized_state,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormLSTM(_LayerNormRNNBase):
    """Layer-normalized LSTM, a drop-in for `keras.layers.LSTM`.

    `[i, f, g, o] = LN_x(x_t W) + LN_h(h_{t-1} U) + b`,
    `c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)`, `h_t = sigmoid(o) tanh(LN_c(c_t))`
    over a sequence: `keras.layers.RNN` around a `LayerNormLSTMCell` (see it for the
    formula, the difference from TF-Addons and `carry_normalized_state`). There is no
    cuDNN kernel for it: on PyTorch it runs a native loop with a hand-written backward pass
    (`keras_normkit.backend.torch_rnn`), elsewhere the generic RNN loop (XLA-compilable).

    Args:
        units: Positive integer, dimensionality of the output space.
        return_sequences: Boolean, return the full sequence (else the last output).
        return_state: Boolean, also return the last states `h` and `c`.
        go_backwards: Boolean, process the sequence backwards.
        stateful: Boolean, carry the last state of each sample to the next batch.
        unroll: Boolean, unroll the time loop (short sequences only).
        **kwargs: Every argument of `LayerNormLSTMCell` (activation,
            recurrent_activation, use_bias, initializers, unit_forget_bias, regularizers,
            constraints, dropout, recurrent_dropout, seed, norm_epsilon,
            norm_gamma_initializer, norm_beta_initializer, carry_normalized_state) and of
            `keras.layers.RNN` (`zero_output_for_mask`, `activity_regularizer`, `name`,
            `dtype`, ...).

    Call arguments:
        sequences: A 3D tensor `(batch, timesteps, features)`.
        initial_state: Optional list `[h, c]` of initial states.
        mask: Optional boolean tensor `(batch, timesteps)`; masked steps keep the state.
        training: Python boolean, whether to apply dropout.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormLSTM
    >>> model = keras.Sequential([keras.Input((64, 1)), LayerNormLSTM(8), keras.layers.Dense(10)])
    >>> tuple(model(np.zeros((2, 64, 1), "float32")).shape)
    (2, 10)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450, §3.1.
    """

    _cell_class = LayerNormLSTMCell
    _cell_name = "layer_norm_lstm_cell"
