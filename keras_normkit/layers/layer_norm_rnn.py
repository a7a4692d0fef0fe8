"""Layer-normalized recurrent cells and layers (Ba, Kiros & Hinton, 2016).

Drop-in replacements for Keras's `SimpleRNNCell`, `LSTMCell` and `GRUCell` (same
constructor arguments, same weights `kernel`, `recurrent_kernel`, `bias`, same gate order,
same dropout-mask API) in which the pre-activations are layer-normalized with Keras's own
`keras.layers.LayerNormalization` sublayers, plus the `LayerNormSimpleRNN`,
`LayerNormLSTM` and `LayerNormGRU` layers that wrap them in `keras.layers.RNN`.

Dropout: like Keras's fused implementation (`implementation=2`), each cell samples one
input mask and one recurrent mask per batch (Keras's `DropoutRNNCell` API, so the masks
are the same at every time step); Keras's cells switch to one mask per gate when
`recurrent_dropout > 0`, which would need one normalization per gate here.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
"""

import inspect

import keras
from keras import activations, constraints, initializers, ops, regularizers

# Keras 3 exports no public base for dropout-aware cells; `keras.layers.RNN` recognises
# `DropoutRNNCell` to pre-sample the masks once per batch (needed for JAX and XLA).
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from keras_normkit._validation import check_int, check_number, check_seed

__all__ = [
    "LayerNormSimpleRNNCell",
    "LayerNormLSTMCell",
    "LayerNormGRUCell",
    "LayerNormSimpleRNN",
    "LayerNormLSTM",
    "LayerNormGRU",
]


class _LayerNormCellBase(keras.layers.Layer, DropoutRNNCell):
    """Shared constructor, weights, normalization sublayers and config of the cells."""

    _num_blocks = 1  # gates per cell: 1 (SimpleRNN), 4 (LSTM), 3 (GRU)

    def __init__(
        self,
        units,
        activation="tanh",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        norm_epsilon=1e-3,
        norm_gamma_initializer="ones",
        norm_beta_initializer="zeros",
        **kwargs,
    ):
        self.units = check_int("units", units, 1)
        super().__init__(**kwargs)
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout = check_number("dropout", dropout, 0.0, 1.0, strict_maximum=True)
        self.recurrent_dropout = check_number(
            "recurrent_dropout", recurrent_dropout, 0.0, 1.0, strict_maximum=True
        )
        self.seed = check_seed(seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.norm_epsilon = check_number("norm_epsilon", norm_epsilon, 0.0, strict_minimum=True)
        self.norm_gamma_initializer = initializers.get(norm_gamma_initializer)
        self.norm_beta_initializer = initializers.get(norm_beta_initializer)
        self.state_size = self.units
        self.output_size = self.units

    def _make_norm(self, name):
        """A Keras `LayerNormalization` over the last axis with the cell's norm settings."""
        return keras.layers.LayerNormalization(
            axis=-1,
            epsilon=self.norm_epsilon,
            gamma_initializer=self.norm_gamma_initializer,
            beta_initializer=self.norm_beta_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _build_kernels(self, input_dim):
        width = self._num_blocks * self.units
        self.kernel = self.add_weight(
            shape=(input_dim, width),
            name="kernel",
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, width),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )

    def _add_bias(self, shape, initializer=None):
        if not self.use_bias:
            return None
        return self.add_weight(
            shape=shape,
            name="bias",
            initializer=initializer or self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint,
        )

    def _dropped_inputs(self, inputs, training):
        if training and self.dropout > 0:
            return inputs * self.get_dropout_mask(inputs)
        return inputs

    def _dropped_state(self, h_tm1, training):
        if training and self.recurrent_dropout > 0:
            return h_tm1 * self.get_recurrent_dropout_mask(h_tm1)
        return h_tm1

    def _project_inputs(self, inputs, training):
        """The part of a step that does not depend on the state."""
        raise NotImplementedError

    def _recurrent_step(self, projected, states, training):
        raise NotImplementedError

    def call(self, inputs, states, training=False):
        return self._recurrent_step(self._project_inputs(inputs, training), states, training)

    def get_initial_state(self, batch_size=None):
        sizes = self.state_size if isinstance(self.state_size, list) else [self.state_size]
        return [ops.zeros((batch_size, d), dtype=self.compute_dtype) for d in sizes]

    def get_config(self):
        config = {
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
            "bias_initializer": initializers.serialize(self.bias_initializer),
            "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
            "recurrent_regularizer": regularizers.serialize(self.recurrent_regularizer),
            "bias_regularizer": regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": constraints.serialize(self.kernel_constraint),
            "recurrent_constraint": constraints.serialize(self.recurrent_constraint),
            "bias_constraint": constraints.serialize(self.bias_constraint),
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "seed": self.seed,
            "norm_epsilon": self.norm_epsilon,
            "norm_gamma_initializer": initializers.serialize(self.norm_gamma_initializer),
            "norm_beta_initializer": initializers.serialize(self.norm_beta_initializer),
        }
        return {**super().get_config(), **config}


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
        kernel_initializer: Initializer for `kernel` (W). Default: `"glorot_uniform"`.
        recurrent_initializer: Initializer for `recurrent_kernel` (U). Default:
            `"orthogonal"`.
        bias_initializer: Initializer for `bias`. Default: `"zeros"`.
        kernel_regularizer: Optional regularizer of `kernel`.
        recurrent_regularizer: Optional regularizer of `recurrent_kernel`.
        bias_regularizer: Optional regularizer of `bias`.
        kernel_constraint: Optional constraint of `kernel`.
        recurrent_constraint: Optional constraint of `recurrent_kernel`.
        bias_constraint: Optional constraint of `bias`.
        dropout: Float in [0, 1), fraction of the inputs to drop. Default: 0.
        recurrent_dropout: Float in [0, 1), fraction of the previous output to drop.
            Default: 0.
        seed: Optional integer seed for dropout.
        norm_epsilon: Float > 0 added to the variance in LN. Default: `1e-3` (Keras's
            `LayerNormalization` default; TF-Addons' `LayerNormSimpleRNNCell` used
            `1e-5`, pass `norm_epsilon=1e-5` to reproduce it).
        norm_gamma_initializer: Initializer for the LN gain. Default: `"ones"`.
        norm_beta_initializer: Initializer for the LN bias. Default: `"zeros"`.

    Call arguments:
        inputs: A 2D tensor `(batch, features)`.
        states: A list with one 2D tensor `(batch, units)`, the previous output.
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

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.norm = self._make_norm("norm")

    def build(self, input_shape):
        self._build_kernels(input_shape[-1])
        self.bias = self._add_bias((self.units,))
        self.norm.build((None, self.units))
        self.built = True

    def _project_inputs(self, inputs, training):
        return ops.matmul(self._dropped_inputs(inputs, training), self.kernel)

    def _recurrent_step(self, projected, states, training):
        h_tm1 = states[0] if isinstance(states, (list, tuple)) else states
        h_dropped = self._dropped_state(h_tm1, training)
        z = self.norm(projected + ops.matmul(h_dropped, self.recurrent_kernel))
        if self.use_bias:
            z = z + self.bias
        h = self.activation(z)
        return h, ([h] if isinstance(states, (list, tuple)) else h)


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
        norm_epsilon: Float > 0 added to the variance in every LN. Default: `1e-3`.
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

    def _project_inputs(self, inputs, training):
        x = self.input_norm(ops.matmul(self._dropped_inputs(inputs, training), self.kernel))
        return x + self.bias if self.use_bias else x

    def _recurrent_step(self, projected, states, training):
        h_tm1, c_tm1 = states[0], states[1]
        h_dropped = self._dropped_state(h_tm1, training)
        z = projected + self.recurrent_norm(ops.matmul(h_dropped, self.recurrent_kernel))
        z_i, z_f, z_g, z_o = ops.split(z, 4, axis=-1)
        i = self.recurrent_activation(z_i)
        f = self.recurrent_activation(z_f)
        o = self.recurrent_activation(z_o)
        c = f * c_tm1 + i * self.activation(z_g)
        c_normalized = self.state_norm(c)
        h = o * self.activation(c_normalized)
        return h, [h, c_normalized if self.carry_normalized_state else c]

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
        norm_epsilon: Float > 0 added to the variance in every LN. Default: `1e-3`.
        norm_gamma_initializer: Initializer for the LN gains. Default: `"ones"`.
        norm_beta_initializer: Initializer for the LN biases. Default: `"zeros"`.

    Call arguments:
        inputs: A 2D tensor `(batch, features)`.
        states: A list with one 2D tensor `(batch, units)`, the previous output.
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

    def _project_inputs(self, inputs, training):
        x = self.input_norm(ops.matmul(self._dropped_inputs(inputs, training), self.kernel))
        if self.use_bias:
            x = x + (self.bias[0] if self.reset_after else self.bias)
        return x

    def _recurrent_step(self, x, states, training):
        nested = isinstance(states, (list, tuple))
        h_tm1 = states[0] if nested else states
        h_dropped = self._dropped_state(h_tm1, training)
        n = self.units
        if self.reset_after:
            u = self.recurrent_norm(ops.matmul(h_dropped, self.recurrent_kernel))
            if self.use_bias:
                u = u + self.bias[1]
            z = self.recurrent_activation(x[:, :n] + u[:, :n])
            r = self.recurrent_activation(x[:, n : 2 * n] + u[:, n : 2 * n])
            candidate = self.activation(x[:, 2 * n :] + r * u[:, 2 * n :])
        else:
            u = self.recurrent_norm(ops.matmul(h_dropped, self.recurrent_kernel[:, : 2 * n]))
            z = self.recurrent_activation(x[:, :n] + u[:, :n])
            r = self.recurrent_activation(x[:, n : 2 * n] + u[:, n:])
            u_h = self.candidate_norm(ops.matmul(r * h_dropped, self.recurrent_kernel[:, 2 * n :]))
            candidate = self.activation(x[:, 2 * n :] + u_h)
        h = z * h_tm1 + (1 - z) * candidate
        return h, ([h] if nested else h)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "recurrent_activation": activations.serialize(self.recurrent_activation),
                "reset_after": self.reset_after,
            }
        )
        return config


# --------------------------------------------------------------------------------------
# Convenience layers: `keras.layers.RNN` around one cell, like `keras.layers.LSTM`.
# --------------------------------------------------------------------------------------

_BASE_LAYER_KEYS = ("name", "trainable", "dtype")


class _LayerNormRNNBase(keras.layers.RNN):
    """`keras.layers.RNN` over a layer-normalized cell built from the constructor args."""

    _cell_class = None
    _cell_name = None

    def __init__(
        self,
        units,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        **kwargs,
    ):
        cell_kwargs = {
            key: kwargs.pop(key)
            for key in list(kwargs)
            if key in self._cell_arguments() and key not in _BASE_LAYER_KEYS
        }
        cell = self._cell_class(
            units,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name=self._cell_name,
            **cell_kwargs,
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            **kwargs,
        )
        self.input_spec = keras.layers.InputSpec(ndim=3)

    @classmethod
    def _cell_arguments(cls):
        """Names of the cell's constructor arguments (its own and its base class's)."""
        names = set()
        for klass in cls._cell_class.__mro__:
            if issubclass(klass, _LayerNormCellBase):
                names.update(inspect.signature(klass.__init__).parameters)
        return names - {"self", "units", "kwargs"}

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, mask=mask, training=training, initial_state=initial_state)

    @property
    def units(self):
        return self.cell.units

    def get_config(self):
        cell_config = self.cell.get_config()
        for key in _BASE_LAYER_KEYS:
            cell_config.pop(key, None)
        config = super().get_config()
        del config["cell"]
        config["activity_regularizer"] = regularizers.serialize(self.activity_regularizer)
        return {**config, **cell_config}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormSimpleRNN(_LayerNormRNNBase):
    """Fully connected RNN with layer normalization, a drop-in for `keras.layers.SimpleRNN`.

    `h_t = activation(LN(x_t W + h_{t-1} U) + b)` over a sequence: `keras.layers.RNN`
    around a `LayerNormSimpleRNNCell` (see it for the formula and the cell arguments).

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
        initial_state: Optional list of initial state tensors.
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


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormLSTM(_LayerNormRNNBase):
    """Layer-normalized LSTM, a drop-in for `keras.layers.LSTM`.

    `[i, f, g, o] = LN_x(x_t W) + LN_h(h_{t-1} U) + b`,
    `c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)`, `h_t = sigmoid(o) tanh(LN_c(c_t))`
    over a sequence: `keras.layers.RNN` around a `LayerNormLSTMCell` (see it for the
    formula, the difference from TF-Addons and `carry_normalized_state`). There is no
    cuDNN kernel for it: the generic RNN loop runs (XLA-compilable).

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


@keras.saving.register_keras_serializable(package="keras_normkit")
class LayerNormGRU(_LayerNormRNNBase):
    """Layer-normalized GRU, a drop-in for `keras.layers.GRU`.

    `keras.layers.RNN` around a `LayerNormGRUCell`: the input projection `x_t W` and the
    recurrent projection `h_{t-1} U` are layer-normalized separately before the update
    and reset gates and the candidate are formed in Keras's GRU order (see the cell for
    the formulas with `reset_after=True` and `False`).

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
        initial_state: Optional list with the initial state.
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
