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

from keras_normkit.layers import _layer_norm_rnn_base as shared
from keras_normkit.layers._layer_norm_rnn_base import _LayerNormCellBase, _LayerNormRNNBase

__all__ = ["LayerNormSimpleRNNCell", "LayerNormSimpleRNN"]


# The keyword arguments `LayerNormSimpleRNNCell` passes on to its base, for its docstring.
_OWN_KEYWORD_ARGS = f"""        activation: Activation function. Default: `"tanh"`.
        use_bias: Boolean, whether to add the bias vector `b`. Default: `True`.
{shared.initializer_args("SimpleRNNCell")}"""


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormSimpleRNNCell(_LayerNormCellBase):
    __doc__ = f"""Cell of a fully connected RNN whose summed input is layer-normalized.

    `h_t = activation(LN(x_t W + h_{{t-1}} U) + b)`, where
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
{shared.keyword_args(_OWN_KEYWORD_ARGS)}

{shared.cell_call_args("A list `[h_{t-1}]`, the previous output `(batch, units)`.")}

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


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormSimpleRNN(_LayerNormRNNBase):
    __doc__ = f"""Fully connected RNN with layer normalization, a drop-in for `keras.layers.SimpleRNN`.

    `h_t = activation(LN(x_t W + h_{{t-1}} U) + b)` over a sequence: `keras.layers.RNN`
    around a `LayerNormSimpleRNNCell` (see it for the formula and the cell arguments).

    Args:
{shared.layer_args("state")}
        **kwargs: Every argument of `LayerNormSimpleRNNCell` (activation, initializers,
            regularizers, constraints, dropout, recurrent_dropout, seed, norm_epsilon,
            norm_gamma_initializer, norm_beta_initializer) and of `keras.layers.RNN`
            (`zero_output_for_mask`, `activity_regularizer`, `name`, `dtype`, ...).

{shared.layer_call_args("Optional list `[h]` with the initial state.")}

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import LayerNormSimpleRNN
    >>> tuple(LayerNormSimpleRNN(4)(np.zeros((2, 5, 3), "float32")).shape)
    (2, 4)

    Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
    """

    _cell_class = LayerNormSimpleRNNCell
    _cell_name = "layer_norm_simple_rnn_cell"
