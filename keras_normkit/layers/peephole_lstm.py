"""`PeepholeLSTMCell`: an LSTM cell whose gates also see the cell state (Gers & Schmidhuber)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_normkit")
class PeepholeLSTMCell(keras.layers.LSTMCell):
    """LSTM cell with peephole connections, a drop-in for `keras.layers.LSTMCell`.

    With gates in Keras's order (input `i`, forget `f`, candidate `g`, output `o`) and
    `[z_i, z_f, z_g, z_o] = x_t W + h_{t-1} U + b`, the input and forget gates also see the
    previous cell state and the output gate the new one, each through a learned diagonal
    (one weight per unit):

    `i = sigmoid(z_i + p_i * c_{t-1})`, `f = sigmoid(z_f + p_f * c_{t-1})`,
    `c_t = f * c_{t-1} + i * tanh(z_g)`, `o = sigmoid(z_o + p_o * c_t)`,
    `h_t = o * tanh(c_t)`

    (`sigmoid` and `tanh` are `recurrent_activation` and `activation`). The peephole weights
    `p_i`, `p_f`, `p_o` (shape `(units,)`) are initialized with `kernel_initializer`. It is
    TF-Addons' `tfa.rnn.PeepholeLSTMCell` (same weights in the same order: `kernel`,
    `recurrent_kernel`, `bias`, then the input, forget and output gate peepholes);
    `keras_normkit.migration.load_tfa_model` translates it. Dropout draws one input mask
    (four, one per gate, with `recurrent_dropout`, as Keras's `LSTMCell`); `implementation`
    is not an argument.

    Args:
        units: Positive integer, dimensionality of the output space.
        **kwargs: Every other argument of `keras.layers.LSTMCell` (`activation`,
            `recurrent_activation`, `use_bias`, the initializers, regularizers and
            constraints, `unit_forget_bias`, `dropout`, `recurrent_dropout`, `seed`) and
            the base layer's.

    Call arguments:
        inputs: A 2D tensor `(batch, features)`.
        states: The list `[h_{t-1}, c_{t-1}]`.
        training: Python boolean, whether dropout applies.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import PeepholeLSTMCell
    >>> keras.utils.set_random_seed(0)
    >>> layer = keras.layers.RNN(PeepholeLSTMCell(4))
    >>> x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")
    >>> tuple(layer(x).shape)
    (2, 4)

    Reference: Gers & Schmidhuber, "Recurrent Nets that Time and Count", IJCNN 2000;
    Gers, Schraudolph & Schmidhuber, "Learning Precise Timing with LSTM Recurrent
    Networks", JMLR 3, 2002.
    """

    def __init__(self, units, **kwargs):
        if "implementation" in kwargs:
            raise TypeError(
                "PeepholeLSTMCell takes no `implementation` (Keras's choice of kernel, the "
                f"same function). Received: implementation={kwargs['implementation']!r}"
            )
        super().__init__(units, **kwargs)

    def build(self, input_shape):
        super().build(input_shape)
        self.peepholes = [
            self.add_weight(
                shape=(self.units,),
                name=f"{gate}_gate_peephole_weights",
                initializer=self.kernel_initializer,
            )
            for gate in ("input", "forget", "output")
        ]

    def _masked(self, tensor, use, get_mask):
        """Four copies of `tensor`, one per gate, each with its dropout mask when `use`
        (Keras's LSTMCell draws four masks, `dropout_mask_count`, when it has recurrent
        dropout, else one)."""
        if not use:
            return [tensor] * 4
        mask = get_mask(tensor)
        if getattr(self, "dropout_mask_count", None):
            return [tensor * mask[k] for k in range(4)]
        return [tensor * mask] * 4

    def call(self, inputs, states, training=False):
        h_tm1, c_tm1 = states[0], states[1]
        x = self._masked(inputs, training and 0.0 < self.dropout < 1.0, self.get_dropout_mask)
        h = self._masked(
            h_tm1,
            training and 0.0 < self.recurrent_dropout < 1.0,
            self.get_recurrent_dropout_mask,
        )
        kernels = ops.split(self.kernel, 4, axis=-1)
        recurrent = ops.split(self.recurrent_kernel, 4, axis=-1)
        z = [ops.matmul(x[k], kernels[k]) + ops.matmul(h[k], recurrent[k]) for k in range(4)]
        if self.use_bias:
            z = [z_k + b_k for z_k, b_k in zip(z, ops.split(self.bias, 4), strict=True)]
        z_i, z_f, z_g, z_o = z
        p_i, p_f, p_o = self.peepholes
        i = self.recurrent_activation(z_i + p_i * c_tm1)
        f = self.recurrent_activation(z_f + p_f * c_tm1)
        c = f * c_tm1 + i * self.activation(z_g)
        o = self.recurrent_activation(z_o + p_o * c)
        h_t = o * self.activation(c)
        return h_t, [h_t, c]
