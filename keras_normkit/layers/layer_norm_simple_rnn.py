"""Layer-normalized fully connected RNN (Ba, Kiros & Hinton, 2016).

`LayerNormSimpleRNNCell`, a drop-in for `keras.layers.SimpleRNNCell`, and
`LayerNormSimpleRNN`, the `keras.layers.RNN` around it (a drop-in for
`keras.layers.SimpleRNN`). The summed input is layer-normalized (equation 4 of the paper)
and the bias added after the norm:

    h_t = activation(LN(x_t W + h_{t-1} U) + b).

The shared constructor, weights, norms, dropout and config are in `_layer_norm_rnn_base`.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
"""

import keras
from keras import ops

from keras_normkit.layers._layer_norm_rnn_base import _LayerNormCellBase, _LayerNormRNNBase

__all__ = ["LayerNormSimpleRNNCell", "LayerNormSimpleRNN"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormSimpleRNNCell(_LayerNormCellBase):
    """Cell of a fully connected RNN whose summed input is layer-normalized.

    `h_t = activation(LN(x_t W + h_{t-1} U) + b)`, where
    `LN(a) = gamma * (a - mean(a)) / sqrt(var(a) + norm_epsilon) + beta` with mean and
    variance over the `units` features of each example (equation 4 of Ba et al.: for a
    vanilla RNN the paper normalizes the sum). `b` is added after the normalization, so it
    is not cancelled by the centering. A drop-in for `keras.layers.SimpleRNNCell`.

    Migrating from TF-Addons: `tfa.rnn.LayerNormSimpleRNNCell` computes the same
    `f(LN(net) + b)` (bias after the norm), with an LN that has a gain but no shift
    (`center=False`) and `layernorm_epsilon=1e-5`. `LayerNormSimpleRNNCell(units,
    norm_epsilon=1e-5)` reproduces it exactly once its weights are ported: TF-Addons' cell
    weights are `[kernel, recurrent_kernel, bias, gamma]` and ours
    `[kernel, recurrent_kernel, bias, gamma, beta]`, so
    `cell.set_weights(tfa_cell.get_weights() + [np.zeros(units)])` (beta = 0, TF-Addons'
    missing shift; it is redundant with `bias`, both being added after the norm).

    Args:
        units: Positive integer, dimensionality of the output space.
        **kwargs: The keyword arguments below, and base layer keyword arguments, such as
            `name` and `dtype`.

    Keyword Args:
        activation: Activation function. Default: `"tanh"`.
        use_bias: Boolean, whether to add the bias vector `b`. Default: `True`.
        kernel_initializer: Initializer of `kernel` (W), as in `keras.layers.SimpleRNNCell`.
        recurrent_initializer: Initializer of `recurrent_kernel` (U), as in
            `keras.layers.SimpleRNNCell`.
        bias_initializer: Initializer of `bias`, as in `keras.layers.SimpleRNNCell`.
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
    >>> from keras_normkit.layers import LayerNormSimpleRNNCell
    >>> rnn = keras.layers.RNN(LayerNormSimpleRNNCell(4))
    >>> tuple(rnn(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
    """

    _num_blocks = 1
    _norm_names = ("norm",)

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.norm = self._make_norm("norm")

    def build(self, input_shape):
        self._build_kernels(input_shape[-1])
        self.bias = self._add_bias((self.units,))
        self.norm.build((None, self.units))
        self.built = True

    def _project_inputs(self, inputs, w, training):
        return ops.matmul(self._dropped_inputs(inputs, training), w["kernel"])

    def _recurrent_step(self, projected, states, w, training):
        h_tm1 = states[0] if isinstance(states, (list, tuple)) else states
        h_dropped = self._dropped_state(h_tm1, training)
        z = self._norm(self.norm, projected + ops.matmul(h_dropped, w["recurrent_kernel"]), w)
        if self.use_bias:
            z = z + w["bias"]
        h = self.activation(z)
        return h, ([h] if isinstance(states, (list, tuple)) else h)

    def torch_loop(self, sequences, initial_state, mask, training, **rnn_arguments):
        from keras_normkit.backend import torch_rnn

        return torch_rnn.layer_norm_simple_rnn(
            sequences,
            initial_state,
            **self._torch_loop_arguments(sequences, initial_state, training),
            mask=mask,
            **rnn_arguments,
        )


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormSimpleRNN(_LayerNormRNNBase):
    """Fully connected RNN with layer normalization, a drop-in for `keras.layers.SimpleRNN`.

    `h_t = activation(LN(x_t W + h_{t-1} U) + b)` over a sequence: `keras.layers.RNN`
    around a `LayerNormSimpleRNNCell` (see it for the formula and the cell arguments).

    On PyTorch the layer runs a native loop with a hand-written backward pass
    (`keras_normkit.backend.torch_rnn`), elsewhere the generic RNN loop.

    Args:
        units: Positive integer, dimensionality of the output space.
        return_sequences: Boolean, return the full sequence (else the last output).
        return_state: Boolean, also return the last state.
        go_backwards: Boolean, process the sequence backwards.
        stateful: Boolean, carry the last state of each sample to the next batch.
        unroll: Boolean, unroll the time loop (short sequences only).
        **kwargs: Every argument of `LayerNormSimpleRNNCell` (activation, initializers,
            regularizers, constraints, dropout, recurrent_dropout, seed, norm_epsilon,
            norm_gamma_initializer, norm_beta_initializer) and of `keras.layers.RNN`
            (`zero_output_for_mask`, `activity_regularizer`, `name`, `dtype`, ...).

    Call arguments:
        sequences: A 3D tensor `(batch, timesteps, features)`.
        initial_state: Optional list `[h]` with the initial state.
        mask: Optional boolean tensor `(batch, timesteps)`; masked steps keep the state.
        training: Python boolean, whether to apply dropout.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormSimpleRNN
    >>> tuple(LayerNormSimpleRNN(4)(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
    """

    _cell_class = LayerNormSimpleRNNCell
    _cell_name = "layer_norm_simple_rnn_cell"
