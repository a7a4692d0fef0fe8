"""Layer-normalized GRU (Ba, Kiros & Hinton, 2016; Cho et al., 2014).

`LayerNormGRUCell`, a drop-in for `keras.layers.GRUCell`, and `LayerNormGRU`, the
`keras.layers.RNN` around it (a drop-in for `keras.layers.GRU`). In Keras's gate order
(update `z`, reset `r`, candidate `h~`), the input and the recurrent projections are
normalized separately; with `reset_after=True` (the default):

    [x_z, x_r, x_h] = LN_x(x_t W) + b_x,    [u_z, u_r, u_h] = LN_h(h_{t-1} U) + b_u,
    z = sigmoid(x_z + u_z),    r = sigmoid(x_r + u_r),    h~ = tanh(x_h + r * u_h),
    h_t = z * h_{t-1} + (1 - z) * h~,

and with `reset_after=False` the candidate's recurrent term `(r * h_{t-1}) U_h` has its
own norm `LN_c`. The shared constructor, weights, norms, dropout and config are in
`_layer_norm_rnn_base`.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450; Cho et al.,
2014, arXiv:1406.1078 (GRU).
"""

import keras
from keras import activations, ops

from keras_normkit.layers._cell_args import activation_name
from keras_normkit.layers._layer_norm_rnn_base import _LayerNormCellBase, _LayerNormRNNBase

__all__ = ["LayerNormGRUCell", "LayerNormGRU"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormGRUCell(_LayerNormCellBase):
    """Cell of a layer-normalized GRU, a drop-in for `keras.layers.GRUCell`.

    Gates in Keras's order (update `z`, reset `r`, candidate `h~`). The input projection
    and the recurrent projection are normalized separately, each by its own
    `keras.layers.LayerNormalization` over the features of one example. With
    `reset_after=True` (default, Keras's default; separate input and recurrent biases):
    `[x_z, x_r, x_h] = LN_x(x_t W) + b_x`, `[u_z, u_r, u_h] = LN_h(h_{t-1} U) + b_u`,
    `z = sigmoid(x_z + u_z)`, `r = sigmoid(x_r + u_r)`, `h~ = tanh(x_h + r * u_h)`.
    With `reset_after=False` the candidate's recurrent term needs `r` first, so it is
    normalized on its own: `[u_z, u_r] = LN_h(h_{t-1} U_zr)`,
    `h~ = tanh(x_h + LN_c((r * h_{t-1}) U_h))`, with one bias `b` added to `LN_x(x_t W)`.
    In both cases `h_t = z * h_{t-1} + (1 - z) * h~`.

    Args:
        units: Positive integer, dimensionality of the output space.
        activation: Activation of the candidate (`tanh` above).
        recurrent_activation: Activation of the gates (`sigmoid` above).
        use_bias: Boolean, whether to use biases. Default: `True`.
        reset_after: Whether to apply the reset gate after (True) or before (False) the
            recurrent matrix multiplication. Default: `True`.
        **kwargs: The keyword arguments below, and base layer keyword arguments, such as
            `name` and `dtype`.

    Keyword Args:
        kernel_initializer: Initializer of `kernel` (W), as in `keras.layers.GRUCell`.
        recurrent_initializer: Initializer of `recurrent_kernel` (U), as in
            `keras.layers.GRUCell`.
        bias_initializer: Initializer of `bias`, as in `keras.layers.GRUCell`.
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
        states: A list `[h_{t-1}]`, the previous output `(batch, units)`.
        training: Python boolean, whether to apply dropout.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormGRUCell
    >>> rnn = keras.layers.RNN(LayerNormGRUCell(4), return_sequences=True)
    >>> tuple(rnn(np.zeros((2, 5, 3), "float32")).shape)
    (2, 5, 4)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450; Cho et
    al., 2014, arXiv:1406.1078 (GRU).
    """

    _num_blocks = 3
    _norm_names = ("input_norm", "recurrent_norm", "candidate_norm")

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        reset_after=True,
        **kwargs,
    ):
        super().__init__(units, activation=activation, use_bias=use_bias, **kwargs)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.reset_after = bool(reset_after)
        self.input_norm = self._make_norm("input_norm")
        self.recurrent_norm = self._make_norm("recurrent_norm")
        if not self.reset_after:
            self.candidate_norm = self._make_norm("candidate_norm")

    def build(self, input_shape):
        n = self.units
        self._build_kernels(input_shape[-1])
        self.bias = self._add_bias((2, 3 * n) if self.reset_after else (3 * n,))
        self.input_norm.build((None, 3 * n))
        self.recurrent_norm.build((None, 3 * n if self.reset_after else 2 * n))
        if not self.reset_after:
            self.candidate_norm.build((None, n))
        self.built = True

    def _step_weights(self, read):
        weights = super()._step_weights(read)
        n, bias, kernel = self.units, weights["bias"], weights["recurrent_kernel"]
        if self.reset_after:
            if self.use_bias:
                weights["input_bias"], weights["recurrent_bias"] = bias[0], bias[1]
        else:
            weights["input_bias"] = bias
            weights["gate_kernel"], weights["candidate_kernel"] = (
                kernel[:, : 2 * n],
                kernel[:, 2 * n :],
            )
        return weights

    def _project_inputs(self, inputs, w, training):
        x = ops.matmul(self._dropped_inputs(inputs, training), w["kernel"])
        x = self._norm(self.input_norm, x, w)
        return x + w["input_bias"] if self.use_bias else x

    def _recurrent_step(self, x, states, w, training):
        nested = isinstance(states, (list, tuple))
        h_tm1 = states[0] if nested else states
        h_dropped = self._dropped_state(h_tm1, training)
        if self.reset_after:
            u = self._norm(self.recurrent_norm, ops.matmul(h_dropped, w["recurrent_kernel"]), w)
            if self.use_bias:
                u = u + w["recurrent_bias"]
            # One split each, not three slices: a slice's gradient scatters into a
            # full-size zero tensor, at every step of the loop.
            x_z, x_r, x_h = ops.split(x, 3, axis=-1)
            u_z, u_r, u_h = ops.split(u, 3, axis=-1)
            z = self.recurrent_activation(x_z + u_z)
            r = self.recurrent_activation(x_r + u_r)
            candidate = self.activation(x_h + r * u_h)
        else:
            u = self._norm(self.recurrent_norm, ops.matmul(h_dropped, w["gate_kernel"]), w)
            x_z, x_r, x_h = ops.split(x, 3, axis=-1)
            u_z, u_r = ops.split(u, 2, axis=-1)
            z = self.recurrent_activation(x_z + u_z)
            r = self.recurrent_activation(x_r + u_r)
            u_h = ops.matmul(r * h_dropped, w["candidate_kernel"])
            candidate = self.activation(x_h + self._norm(self.candidate_norm, u_h, w))
        h = z * h_tm1 + (1 - z) * candidate
        return h, ([h] if nested else h)

    def torch_loop(self, sequences, initial_state, mask, training, **rnn_arguments):
        from keras_normkit.backend import torch_rnn

        return torch_rnn.layer_norm_gru(
            sequences,
            initial_state,
            **self._torch_loop_arguments(sequences, initial_state, training),
            recurrent_activation=activation_name(self.recurrent_activation),
            reset_after=self.reset_after,
            mask=mask,
            **rnn_arguments,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "recurrent_activation": activations.serialize(self.recurrent_activation),
                "reset_after": self.reset_after,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormGRU(_LayerNormRNNBase):
    """Layer-normalized GRU, a drop-in for `keras.layers.GRU`.

    `keras.layers.RNN` around a `LayerNormGRUCell`: the input projection `x_t W` and the
    recurrent projection `h_{t-1} U` are layer-normalized separately before the update
    and reset gates and the candidate are formed in Keras's GRU order (see the cell for
    the formulas with `reset_after=True` and `False`).

    On PyTorch the layer runs a native loop with a hand-written backward pass
    (`keras_normkit.backend.torch_rnn`), elsewhere the generic RNN loop.

    Args:
        units: Positive integer, dimensionality of the output space.
        return_sequences: Boolean, return the full sequence (else the last output).
        return_state: Boolean, also return the last state.
        go_backwards: Boolean, process the sequence backwards.
        stateful: Boolean, carry the last state of each sample to the next batch.
        unroll: Boolean, unroll the time loop (short sequences only).
        **kwargs: Every argument of `LayerNormGRUCell` (activation, recurrent_activation,
            use_bias, initializers, regularizers, constraints, dropout, recurrent_dropout,
            reset_after, seed, norm_epsilon, norm_gamma_initializer,
            norm_beta_initializer) and of `keras.layers.RNN` (`zero_output_for_mask`,
            `activity_regularizer`, `name`, `dtype`, ...).

    Call arguments:
        sequences: A 3D tensor `(batch, timesteps, features)`.
        initial_state: Optional list `[h]` with the initial state.
        mask: Optional boolean tensor `(batch, timesteps)`; masked steps keep the state.
        training: Python boolean, whether to apply dropout.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormGRU
    >>> tuple(LayerNormGRU(4, return_sequences=True)(np.zeros((2, 5, 3), "float32")).shape)
    (2, 5, 4)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
    """

    _cell_class = LayerNormGRUCell
    _cell_name = "layer_norm_gru_cell"
