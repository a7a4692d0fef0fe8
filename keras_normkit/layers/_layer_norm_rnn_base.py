"""The shared piece of the layer-normalized RNNs (Ba, Kiros & Hinton, 2016).

`_LayerNormCellBase` holds what the three cells (`LayerNormSimpleRNNCell` in
`layer_norm_simple_rnn`, `LayerNormLSTMCell` in `layer_norm_lstm`, `LayerNormGRUCell` in
`layer_norm_gru`) share: the constructor arguments of Keras's `SimpleRNNCell`, `LSTMCell`
and `GRUCell` plus the norm settings, the weights `kernel` (W) and `recurrent_kernel` (U)
of `_num_blocks * units` columns in Keras's gate order, the optional `bias`, the
`keras.layers.LayerNormalization` sublayers, the dropout masks and the config. Each cell
normalizes pre-activations with

    LN(a) = gamma * (a - mean(a)) / sqrt(var(a) + norm_epsilon) + beta,

mean and variance over the features of one example (never over the batch), computed by
`keras_normkit.ops.layer_norm` (the Keras layer's formula with a hand-derived gradient: far
fewer operations per time step) from each sublayer's own `gamma`, `beta` and `epsilon`, and
writes its own step (`_project_inputs`, the state-free part, then `_recurrent_step`).
`_LayerNormRNNBase` is the `keras.layers.RNN` around one such cell, built from the
constructor arguments, that `LayerNormSimpleRNN`, `LayerNormLSTM` and `LayerNormGRU`
specialize. On TensorFlow it reads the cell's weights once, before the time loop
(`read_weights()`), and its step function passes them to every step (`step(inputs, states,
weights)`), where a graph loop would read, cast and slice them again at every step.

Dropout: like Keras's fused implementation (`implementation=2`), each cell samples one
input mask and one recurrent mask per batch (Keras's `DropoutRNNCell` API, so the masks
are the same at every time step); Keras's cells switch to one mask per gate when
`recurrent_dropout > 0`, which would need one normalization per gate here.

Reference: Ba, Kiros, Hinton, "Layer Normalization", 2016, arXiv:1607.06450.
"""

import keras
from keras import activations, constraints, initializers, ops, regularizers

from keras_normkit._validation import check_int, check_number, check_seed

# Keras 3 exports no public base for dropout-aware cells; `keras.layers.RNN` recognises
# `DropoutRNNCell` to pre-sample the masks once per batch (needed for JAX and XLA).
from keras_normkit.backend.keras_compat import DropoutRNNCell, backend_rnn
from keras_normkit.layers._cell_args import activation_name, cell_arguments
from keras_normkit.ops.layer_norm import layer_norm, normalize


class _LayerNormCellBase(keras.layers.Layer, DropoutRNNCell):
    """Shared constructor, weights, normalization sublayers and config of the cells."""

    _num_blocks = 1  # gates per cell: 1 (SimpleRNN), 4 (LSTM), 3 (GRU)
    _norm_names = ()  # attributes holding the cell's norms

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

    def _norms(self):
        """The cell's `LayerNormalization` sublayers (`_norm_names` that it has)."""
        return [getattr(self, name) for name in self._norm_names if hasattr(self, name)]

    def _step_weights(self, read):
        """What a step reads, by name: `kernel`, `recurrent_kernel`, `bias` (or `None`).

        `read=False`: the variables themselves (each step reads them). `read=True`: tensors
        read now, plus each norm's `(gamma, beta)` under the norm's name; cells add what
        they derive from them (slices), so that a loop computes it once.
        """
        # `ops.copy` reads the value (TensorFlow's `convert_to_tensor` of a variable returns
        # the variable, which a loop body would read again at every step).
        get = ops.copy if read else (lambda weight: weight)
        weights = {
            "kernel": get(self.kernel),
            "recurrent_kernel": get(self.recurrent_kernel),
            "bias": get(self.bias) if self.use_bias else None,
        }
        if read:
            for norm in self._norms():
                weights[norm.name] = (get(norm.gamma), get(norm.beta))
        return weights

    def read_weights(self):
        """Every tensor a step reads, read now: for a time loop that reads them once.

        Returns a dict to pass to each `step`: the `kernel`, `recurrent_kernel` and `bias`
        (`None` without bias), each norm's `(gamma, beta)` under the norm's name, and what
        the cell derives from them (the GRU's bias rows and kernel columns).
        """
        return self._step_weights(read=True)

    @staticmethod
    def _norm(norm, x, weights):
        """`norm(x)` (`keras_normkit.ops.normalize`), with the gain and shift in `weights`
        if they were read before the loop."""
        if norm.name in weights:
            return layer_norm(x, *weights[norm.name], norm.epsilon)
        return normalize(norm, x)

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

    def _torch_loop_arguments(self, sequences, initial_state, training):
        """What every native PyTorch loop (`keras_normkit.backend.torch_rnn`) takes from the
        cell: its weights as tensors (read under the layer's autocast scope), its norms as
        `(gamma, beta, epsilon)` by name, the activations' names and the dropout masks."""
        tensor = ops.convert_to_tensor
        arguments = {
            "kernel": tensor(self.kernel),
            "recurrent_kernel": tensor(self.recurrent_kernel),
            "bias": tensor(self.bias) if self.use_bias else None,
            "activation": activation_name(self.activation),
            "input_mask": None,
            "recurrent_mask": None,
        }
        for norm in self._norms():
            arguments[norm.name] = (tensor(norm.gamma), tensor(norm.beta), norm.epsilon)
        if training and self.dropout > 0:
            arguments["input_mask"] = self.get_dropout_mask(sequences[:, 0, :])
        if training and self.recurrent_dropout > 0:
            arguments["recurrent_mask"] = self.get_recurrent_dropout_mask(initial_state[0])
        return arguments

    def torch_loop(self, sequences, initial_state, mask, training, **rnn_arguments):
        """The whole sequence on PyTorch's native loop (`keras_normkit.backend.torch_rnn`).

        Returns `(last_output, outputs, states)` as Keras's `backend.rnn`;
        `rnn_arguments`: `go_backwards`, `return_sequences`, `zero_output_for_mask`. Raises
        `NotImplementedError` where the native loop does not apply (an activation it does
        not know): the layer then runs Keras's loop.
        """
        raise NotImplementedError

    def _dropped_inputs(self, inputs, training):
        if training and self.dropout > 0:
            return inputs * self.get_dropout_mask(inputs)
        return inputs

    def _dropped_state(self, h_tm1, training):
        if training and self.recurrent_dropout > 0:
            return h_tm1 * self.get_recurrent_dropout_mask(h_tm1)
        return h_tm1

    def _project_inputs(self, inputs, w, training):
        """The part of a step that does not depend on the state; `w`: the weights by name."""
        raise NotImplementedError

    def _recurrent_step(self, projected, states, w, training):
        raise NotImplementedError

    def step(self, inputs, states, weights, training=False):
        """One time step, as `call`, from `weights` (`read_weights()`) instead of the variables.

        Returns `(output, new states)`.
        """
        projected = self._project_inputs(inputs, weights, training)
        return self._recurrent_step(projected, states, weights, training)

    def call(self, inputs, states, training=False):
        return self.step(inputs, states, self._step_weights(read=False), training=training)

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


# --------------------------------------------------------------------------------------
# Convenience layers: `keras.layers.RNN` around one cell, like `keras.layers.LSTM`.
# --------------------------------------------------------------------------------------


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
        cell_kwargs = cell_arguments(self._cell_class, kwargs)
        kwargs = {key: value for key, value in kwargs.items() if key not in cell_kwargs}
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
        # The output mask (`compute_mask`: the input's, with `return_sequences`) reaches the
        # layers after this one. Set here: keras-nightly's `RNN` (3.16.0.dev2026102704) sets
        # `supports_masking = False`, which drops it and warns on every masked call.
        self.supports_masking = True

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, mask=mask, training=training, initial_state=initial_state)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        backend = keras.backend.backend()
        if backend == "torch":
            # PyTorch: the cell's native loop, one autograd node for the whole sequence,
            # as Keras's LSTM tries `backend.lstm`, and Keras's loop where it does not apply.
            try:
                return self.cell.torch_loop(
                    sequences,
                    initial_state,
                    mask[0] if keras.tree.is_nested(mask) else mask,
                    training,
                    go_backwards=self.go_backwards,
                    return_sequences=self.return_sequences,
                    zero_output_for_mask=self.zero_output_for_mask,
                )
            except NotImplementedError:
                pass
        if backend != "tensorflow":
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # TensorFlow's time loop is a graph `while` whose body would read (and cast, under
        # mixed precision) every weight of the cell at every step, slice the GRU's weights
        # at every step (and scatter each slice's gradient back at every step), and keep
        # the norm gains read there for back-propagation: all of it happens once, here, and
        # the step function passes the tensors read to every step.
        cell = self.cell
        weights = cell.read_weights()

        def step(inputs, states):
            output, new_states = cell.step(inputs, states, weights, training=training)
            return output, (new_states if keras.tree.is_nested(new_states) else [new_states])

        return backend_rnn(
            step,
            sequences,
            initial_state if keras.tree.is_nested(initial_state) else [initial_state],
            go_backwards=self.go_backwards,
            mask=mask,
            unroll=self.unroll,
            input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences,
        )

    @property
    def units(self):
        return self.cell.units

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        config["activity_regularizer"] = regularizers.serialize(self.activity_regularizer)
        config["units"] = self.units
        return {**config, **cell_arguments(self._cell_class, self.cell.get_config())}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
