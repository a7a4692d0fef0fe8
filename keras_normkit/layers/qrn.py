"""Query-reduction networks: the `QRNCell` step and the `QRN` layer, parallel over time."""

import operator

import keras
from keras import ops

from keras_normkit._validation import check_bool, check_choice, check_int
from keras_normkit.layers._cell_args import cell_arguments
from keras_normkit.ops.linear_scan import MAX_DYNAMIC_STEPS, linear_scan

# `linear_scan` (the engine of `QRN`) and its length limit stay importable from here.
__all__ = ["MAX_DYNAMIC_STEPS", "QRN", "QRNCell", "linear_scan"]


def _static_dim(value):
    """`value` as an int, `None` if unknown (`None`, or a symbolic dimension in a JAX export)."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def _scan_dtype(dtype):
    """The scan runs in float32 (float64 stays float64) even under mixed precision."""
    return "float64" if keras.backend.standardize_dtype(dtype) == "float64" else "float32"


@keras.saving.register_keras_serializable(package="keras_normkit")
class QRNCell(keras.layers.Layer):
    """One step of a query-reduction network (QRN), for `keras.layers.RNN`.

    With sentence vector `x_t` and query `q_t` (both of size `d`), the cell computes the
    update gate `z_t = sigmoid(W_z (x_t * q_t) + b_z)`, the reset gate
    `r_t = sigmoid(W_r (x_t * q_t) + b_r)`, the candidate reduced query
    `h~_t = tanh(W_h [x_t; q_t] + b_h)` and the state
    `h_t = z_t * r_t * h~_t + (1 - z_t) * h_{t-1}`. The gates are scalars per step
    (`W_z`, `W_r` of shape `(d, 1)`) or, with `vector_gates=True`, one value per unit.
    Without a reset gate `r_t = 1`. The state is linear in `h_{t-1}`, which is what lets
    `QRN` compute a whole sequence in parallel; the cell is the step-by-step form, for
    streaming (`keras.layers.RNN(..., stateful=True)`) and as a reference.

    Feeding: `keras.layers.RNN` passes one tensor per step, so the cell's input is the
    concatenation `[x_t, q_t]` of size `2 * d` along the features: the first half is `x_t`,
    the second half `q_t` (repeat a fixed query over time first).

    Args:
        units: Positive integer, dimensionality of the state (the reduced query).
        use_reset_gate: Whether to use the reset gate `r_t`.
        vector_gates: Whether the gates are vectors of `units` values instead of scalars.
        activation: Activation of the candidate `h~_t` (default `"tanh"`).
        kernel_initializer: Initializer of `W_z`, `W_r` and `W_h`.
        bias_initializer: Initializer of `b_z`, `b_r` and `b_h`.
        kernel_regularizer: Optional regularizer of the kernels.
        bias_regularizer: Optional regularizer of the biases.
        kernel_constraint: Optional constraint of the kernels.
        bias_constraint: Optional constraint of the biases.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A 2D tensor `(batch, 2 * d)`, the concatenation `[x_t, q_t]`.
        states: A list with one tensor `(batch, units)`, the previous state `h_{t-1}`.
        training: Unused; accepted for `keras.layers.RNN`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import QRNCell
    >>> x = np.random.rand(2, 5, 8).astype("float32")    # 5 sentences of size 8
    >>> q = np.random.rand(2, 8).astype("float32")       # one query of size 8
    >>> xq = np.concatenate([x, np.repeat(q[:, None], 5, axis=1)], axis=-1)
    >>> tuple(keras.layers.RNN(QRNCell(8))(xq).shape)
    (2, 8)

    Reference: Seo, Min, Farhadi, Hajishirzi, "Query-Reduction Networks for Question
    Answering", ICLR 2017, arXiv:1606.04582.
    """

    def __init__(
        self,
        units,
        use_reset_gate=True,
        vector_gates=False,
        activation="tanh",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_int("units", units, 1)
        self.use_reset_gate = check_bool("use_reset_gate", use_reset_gate)
        self.vector_gates = check_bool("vector_gates", vector_gates)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.state_size = units
        self.output_size = units

    @property
    def gate_size(self):
        """Number of values per gate: `units` for vector gates, else 1."""
        return self.units if self.vector_gates else 1

    def build(self, input_shape):
        features = _static_dim(input_shape[-1])
        if features is None or features % 2:
            raise ValueError(
                "`QRNCell` expects the concatenation [x_t, q_t] of two equal-size vectors, "
                f"so an even, known number of features. Received: input_shape={input_shape}"
            )
        self.build_weights(features // 2)

    def build_weights(self, dim, reset_gates=1):
        """Creates `W_z`/`W_r` (`gate_kernel`), `W_h` (`kernel`) and biases for size `dim`.

        `reset_gates`: how many reset gates `gate_kernel` holds after the update gate's
        columns (if `use_reset_gate`): 1, or 2 for a bidirectional `QRN` whose directions
        each have their own (columns `[z | r_forward | r_backward]`).
        """
        self.reset_gates = check_int("reset_gates", reset_gates, 1, 2) if self.use_reset_gate else 0
        n_gates = 1 + self.reset_gates
        self.gate_kernel = self.add_weight(
            name="gate_kernel",
            shape=(dim, n_gates * self.gate_size),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.gate_bias = self.add_weight(
            name="gate_bias",
            shape=(n_gates * self.gate_size,),
            initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint,
        )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(2 * dim, self.units),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(self.units,),
            initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint,
        )
        self.built = True

    def _reset_columns(self, backward):
        """The slice of `gate_kernel`'s columns of the forward (or backward) reset gate."""
        start = self.gate_size * (2 if backward and self.reset_gates == 2 else 1)
        return slice(start, start + self.gate_size)

    def gate_logits(self, x, q, backward=False):
        """`(u_z, u_r)`: pre-sigmoid update and reset gates (`u_r` is None without reset).

        `backward`: `u_r` is the backward direction's reset gate where the weights hold one
        per direction (`build_weights(dim, reset_gates=2)`); else the (only) forward one.
        """
        logits = ops.matmul(x * q, self.gate_kernel) + self.gate_bias
        u_z = logits[..., : self.gate_size]
        if not self.use_reset_gate:
            return u_z, None
        return u_z, logits[..., self._reset_columns(backward)]

    def candidate(self, x, q):
        """`h~ = activation(W_h [x; q] + b_h)`; `q` may lack the time axis of `x`."""
        dim = ops.shape(self.kernel)[0] // 2
        xw = ops.matmul(x, self.kernel[:dim])
        qw = ops.matmul(q, self.kernel[dim:])
        if len(q.shape) < len(x.shape):
            qw = ops.expand_dims(qw, -2)
        return self.activation(xw + qw + self.bias)

    def recurrence_coefficients(self, x, q, mask=None, backward=False):
        """`(a, b)` with `h_t = a_t * h_{t-1} + b_t`: `a = 1 - z`, `b = z * r * h~`.

        `a` is computed as `sigmoid(-u_z)`, exact even where `z` rounds to 1.

        Args:
            x: Sentence vectors, `(batch, T, dim)` (or `(batch, dim)` for one step).
            q: Queries, the shape of `x` or without its time axis (then broadcast over time).
            mask: Optional `(batch, T)` boolean mask of the steps: a masked step gets
                `a = 1`, `b = 0`, so it keeps the state.
            backward: Whether `r` is the backward direction's reset gate (where the weights
                hold one per direction, as a bidirectional `QRN` builds them).
        """
        a, (b,) = self.directional_coefficients(x, q, mask, (backward,))
        return a, b

    def directional_coefficients(self, x, q, mask=None, directions=(False, True)):
        """`(a, [b, ...])`: `recurrence_coefficients` for several directions at once.

        `a` (the update gate) and `z * h~` are shared by the directions and computed once;
        each `b` multiplies `z * h~` by the reset gate of its direction (`directions`: one
        bool per `b`, True for the backward direction). Arguments as in
        `recurrence_coefficients`.
        """
        q_full = q if len(q.shape) == len(x.shape) else ops.expand_dims(q, -2)
        logits = ops.matmul(x * q_full, self.gate_kernel) + self.gate_bias
        u_z = logits[..., : self.gate_size]
        a = ops.sigmoid(-u_z)
        zh = ops.sigmoid(u_z) * self.candidate(x, q)
        bs = []
        for backward in directions:
            if self.use_reset_gate:
                bs.append(zh * ops.sigmoid(logits[..., self._reset_columns(backward)]))
            else:
                bs.append(zh)
        if mask is not None:
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)
            a = ops.where(keep, a, ops.ones_like(a))
            bs = [ops.where(keep, b, ops.zeros_like(b)) for b in bs]
        return a, bs

    def call(self, inputs, states, training=False):
        h_prev = states[0] if isinstance(states, (list, tuple)) else states
        x, q = ops.split(inputs, 2, axis=-1)
        a, b = self.recurrence_coefficients(x, q)
        h = a * h_prev + b
        return h, [h] if isinstance(states, (list, tuple)) else h

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype)]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "use_reset_gate": self.use_reset_gate,
                "vector_gates": self.vector_gates,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
                "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
                "bias_constraint": keras.constraints.serialize(self.bias_constraint),
            }
        )
        return config


class _BidirectionalStep(keras.layers.Layer):
    """One step of both directions of a bidirectional `QRN` whose directions have their own
    reset gates, for `keras.layers.RNN` (`implementation="sequential"`): the input is
    `[x_t, q_t, backward]`, the last feature 1 on the rows of the backward pass (which then
    use the backward reset gate of `cell`), 0 on those of the forward pass."""

    def __init__(self, cell, **kwargs):
        super().__init__(dtype=cell.dtype_policy, name="bidirectional_step", **kwargs)
        self.cell = cell
        self.state_size = cell.units
        self.output_size = cell.units

    def build(self, input_shape):
        self.built = True  # the weights are the cell's, built by the `QRN` layer

    def call(self, inputs, states, training=False):
        dim = (inputs.shape[-1] - 1) // 2
        x, q, backward = inputs[..., :dim], inputs[..., dim:-1], inputs[..., -1:]
        a, (b_forward, b_backward) = self.cell.directional_coefficients(x, q)
        h = a * states[0] + ops.where(backward > 0.5, b_backward, b_forward)
        return h, [h]

    def get_initial_state(self, batch_size=None):
        return self.cell.get_initial_state(batch_size)


@keras.saving.register_keras_serializable(package="keras_normkit")
class QRN(keras.layers.Layer):
    """Query-reduction network layer: reduces a query against a sequence, parallel over time.

    Called on `[x, q]`, with sentence vectors `x` of shape `(batch, T, d)` and a query `q`
    of shape `(batch, d)` (the same query at every step) or `(batch, T, d)` (e.g. the
    output of a previous `QRN`). Each step computes the gates of `QRNCell`,
    `z_t = sigmoid(W_z (x_t * q_t) + b_z)`, `r_t = sigmoid(W_r (x_t * q_t) + b_r)`,
    `h~_t = tanh(W_h [x_t; q_t] + b_h)`, and the state
    `h_t = z_t * r_t * h~_t + (1 - z_t) * h_{t-1}` (`h_0 = 0`), i.e.
    `h_t = sum_{i <= t} (prod_{i < k <= t} (1 - z_k)) z_i r_i h~_i`.

    The recurrence is linear in the state, so `implementation="parallel"` (default) computes
    all steps at once with `keras_normkit.ops.linear_scan`: a blocked scan (log-depth
    doubling inside blocks of 32 steps, the same scan one level up over the block ends,
    matrix products over chunks of 8 steps for the default scalar gates) that only multiplies
    numbers in [0, 1] and adds, so it stays exact and finite on long sequences whatever the
    gates are (no T x T matrix, no cumulative product to divide by, no overflowing `exp`),
    in O(B * T * units) memory, with no loop (it compiles with XLA) and the time axis
    possibly unknown (`None`) in functional models and exported SavedModels (then up to
    2**26 steps). `implementation="sequential"` steps the same `QRNCell` with
    `keras.layers.RNN` (the reference).

    With `bidirectional=True` a backward pass runs over the reversed steps and the output is
    `h_fwd_t + h_bwd_t`; stacking such layers (each next `q` being the previous output) gives
    the paper's bidirectional model. As in the paper (Eq. 4 shares only `W_z, b_z, W_h, b_h`)
    and its reference code, each direction has its own reset gate: `gate_kernel` holds the
    columns `[z | r_fwd | r_bwd]` (shape `(d, 3 * g)`, `g` = 1 or `units`; `gate_bias`
    likewise), with `r_bwd_t = sigmoid(W_r_bwd (x_t * q_t) + b_r_bwd)` in
    `h_bwd_t = z_t * r_bwd_t * h~_t + (1 - z_t) * h_bwd_{t+1}`. With
    `share_reset_gate=True` both directions use one reset gate (`(d, 2 * g)`, the form of
    keras_normkit 0.1, which a saved config without the key loads as). Masked steps have
    `z_t = 0` (the state is carried unchanged) in both directions, so the backward pass
    starts at each sequence's real end. With `return_sequences=False` the output is the
    state at each sequence's last unmasked step.

    Args:
        units: Positive integer, dimensionality of the state; must equal `d` when stacking
            (the next layer's query is this layer's output).
        use_reset_gate: Whether to use the reset gate `r_t`.
        vector_gates: Whether the gates are vectors of `units` values instead of scalars.
        bidirectional: Whether to add a backward pass (the update gate and candidate
            weights shared, a reset gate of its own), output summed.
        share_reset_gate: With `bidirectional=True` and `use_reset_gate=True`, whether the
            backward pass uses the forward pass's reset gate instead of its own (default
            False); no effect otherwise.
        return_sequences: Whether to return all states `(batch, T, units)` or only the last
            one `(batch, units)`.
        implementation: `"parallel"` (scan over time) or `"sequential"` (step loop).
        activation: Activation of the candidate `h~_t` (default `"tanh"`).
        kernel_initializer: Initializer of `W_z`, `W_r` and `W_h`.
        bias_initializer: Initializer of `b_z`, `b_r` and `b_h`.
        kernel_regularizer: Optional regularizer of the kernels.
        bias_regularizer: Optional regularizer of the biases.
        kernel_constraint: Optional constraint of the kernels.
        bias_constraint: Optional constraint of the biases.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A list `[x, q]`: `x` of shape `(batch, T, d)`, `q` of shape `(batch, d)` or
            `(batch, T, d)`.
        mask: Optional boolean mask `(batch, T)` of the steps of `x` (usually propagated,
            e.g. from an `Embedding(mask_zero=True)` or `Masking` layer).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import QRN
    >>> x = keras.Input((None, 16))   # story: any number of sentence vectors
    >>> q = keras.Input((16,))        # question vector
    >>> h = QRN(16, bidirectional=True)([x, q])
    >>> answer = QRN(16, return_sequences=False)([x, h])
    >>> model = keras.Model([x, q], keras.layers.Dense(5, activation="softmax")(answer))
    >>> rng = np.random.default_rng(0)
    >>> tuple(model([rng.normal(size=(2, 7, 16)), rng.normal(size=(2, 16))]).shape)
    (2, 5)
    >>> gates = model.get_layer(index=2).cell.gate_kernel   # the bidirectional layer's
    >>> tuple(gates.shape)                                  # columns [z | r_fwd | r_bwd]
    (16, 3)

    Reference: Seo, Min, Farhadi, Hajishirzi, "Query-Reduction Networks for Question
    Answering", ICLR 2017, arXiv:1606.04582.
    """

    def __init__(
        self,
        units,
        use_reset_gate=True,
        vector_gates=False,
        bidirectional=False,
        share_reset_gate=False,
        return_sequences=True,
        implementation="parallel",
        activation="tanh",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("implementation", implementation, ("parallel", "sequential"))
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.share_reset_gate = check_bool("share_reset_gate", share_reset_gate)
        self.return_sequences = check_bool("return_sequences", return_sequences)
        self.implementation = implementation
        self.cell = QRNCell(
            units, **cell_arguments(QRNCell, locals()), dtype=self.dtype_policy, name="cell"
        )
        self.units = units
        # "sequential" steps the same cell with Keras's own RNN loop (XLA- and export-ready).
        self._rnn = None
        if implementation == "sequential":
            step = _BidirectionalStep(self.cell) if self._reset_gates == 2 else self.cell
            self._rnn = keras.layers.RNN(
                step, return_sequences=True, dtype=self.dtype_policy, name="rnn"
            )
        self.supports_masking = True

    @property
    def _reset_gates(self):
        """How many reset gates the weights hold: 2 (one per direction) or 1 (or 0)."""
        if not self.cell.use_reset_gate:
            return 0
        return 2 if self.bidirectional and not self.share_reset_gate else 1

    def _check_shapes(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2:
            raise ValueError(
                "`QRN` must be called on a list [x, q] of two tensors. "
                f"Received inputs of shape {input_shape}"
            )
        x_shape, q_shape = (tuple(_static_dim(d) for d in s) for s in input_shape)
        if len(x_shape) != 3:
            raise ValueError(f"`x` must have rank 3 (batch, T, d). Received: x of shape {x_shape}")
        if len(q_shape) not in (2, 3):
            raise ValueError(
                "`q` must have rank 2 (batch, d) or 3 (batch, T, d). "
                f"Received: q of shape {q_shape}"
            )
        for axis, name in ((0, "batch size"), (-1, "feature size d")):
            if None not in (x_shape[axis], q_shape[axis]) and x_shape[axis] != q_shape[axis]:
                raise ValueError(
                    f"`x` and `q` must have the same {name}. "
                    f"Received: x of shape {x_shape}, q of shape {q_shape}"
                )
        if len(q_shape) == 3 and None not in (x_shape[1], q_shape[1]):
            if x_shape[1] != q_shape[1]:
                raise ValueError(
                    "`x` and a 3D `q` must have the same number of steps T. "
                    f"Received: x of shape {x_shape}, q of shape {q_shape}"
                )
        if x_shape[-1] is None:
            raise ValueError(f"The feature size d of `x` must be known. Received: {x_shape}")
        return x_shape, q_shape

    def build(self, input_shape):
        x_shape, _ = self._check_shapes(input_shape)
        self.cell.build_weights(x_shape[-1], reset_gates=max(self._reset_gates, 1))

    @staticmethod
    def _step_mask(mask, q_rank):
        """The (batch, T) step mask: the mask of `x`, and that of a 3D `q` if any."""
        if not isinstance(mask, (list, tuple)):
            mask = [mask, None]
        masks = [
            m for m, rank in zip(mask, (3, q_rank), strict=True) if m is not None and rank == 3
        ]
        if not masks:
            return None
        step_mask = ops.cast(masks[0], "bool")
        for m in masks[1:]:
            step_mask = ops.logical_and(step_mask, ops.cast(m, "bool"))
        return step_mask

    def _coefficients(self, x, q, step_mask, directions=(False,)):
        """`(a, [b, ...])` of `h_t = a_t h_{t-1} + b_t` in the scan dtype, one `b` per
        direction (True: backward); `a = 1`, `b = 0` at masked steps."""
        a, bs = self.cell.directional_coefficients(x, q, step_mask, directions)
        dtype = _scan_dtype(self.compute_dtype)
        return ops.cast(a, dtype), [ops.cast(b, dtype) for b in bs]

    def update_gate(self, inputs, mask=None):
        """The update gate `z_t`, shape `(batch, T, 1)` (or `units`), 0 at masked steps.

        Args:
            inputs: `[x, q]` as in `call`.
            mask: Optional `(batch, T)` boolean mask of the steps.
        """
        x, q = (ops.convert_to_tensor(t, dtype=self.compute_dtype) for t in inputs)
        if mask is not None:
            mask = ops.convert_to_tensor(mask, dtype="bool")
        self._check_shapes([x.shape, q.shape])
        a, _ = self._coefficients(x, q, self._step_mask(mask, len(q.shape)))
        return 1 - a

    def call(self, inputs, mask=None):
        x, q = inputs
        self._check_shapes([x.shape, q.shape])
        step_mask = self._step_mask(mask, len(q.shape))

        def with_reversed(t, backward=None):
            # The backward pass is the forward pass over the reversed steps, batched with it.
            if not self.bidirectional:
                return t
            return ops.concatenate([t, ops.flip(t if backward is None else backward, 1)], 0)

        per_direction = self._reset_gates == 2
        if self.implementation == "parallel":
            directions = (False, True) if per_direction else (False,)
            a, bs = self._coefficients(x, q, step_mask, directions)
            h = linear_scan(with_reversed(a), with_reversed(bs[0], bs[-1]))
        else:
            if len(q.shape) == 2:
                q = ops.expand_dims(q, 1) + ops.zeros_like(x)
            rnn_mask = None if step_mask is None else with_reversed(step_mask)
            xq = ops.concatenate([x, q], axis=-1)
            if per_direction:  # a last feature tells the step which direction a row runs
                flag = ops.zeros_like(x[..., :1])
                xq = ops.concatenate(
                    [with_reversed(xq), with_reversed(flag, ops.ones_like(flag))], axis=-1
                )
                h = self._rnn(xq, mask=rnn_mask)
            else:
                h = self._rnn(with_reversed(xq), mask=rnn_mask)
        if self.bidirectional:
            batch = ops.shape(x)[0]
            h_fwd, h_bwd = h[:batch], ops.flip(h[batch:], axis=1)
            if self.return_sequences:
                output = h_fwd + h_bwd
            else:
                output = h_fwd[:, -1] + self._at_last_step(h_bwd, step_mask)
        else:
            output = h if self.return_sequences else h[:, -1]
        return ops.cast(output, self.compute_dtype)

    @staticmethod
    def _at_last_step(h, step_mask):
        if step_mask is None:
            return h[:, -1]
        steps = ops.arange(ops.shape(h)[1], dtype="int32")
        last = ops.max(ops.where(step_mask, steps, ops.zeros_like(steps)), axis=1)
        return ops.take_along_axis(h, ops.reshape(last, (-1, 1, 1)), axis=1)[:, 0]

    def compute_mask(self, inputs, mask=None):
        if not self.return_sequences or mask is None:
            return None
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def compute_output_shape(self, input_shape):
        x_shape, _ = self._check_shapes(input_shape)
        if self.return_sequences:
            return (x_shape[0], x_shape[1], self.units)
        return (x_shape[0], self.units)

    @classmethod
    def from_config(cls, config):
        # A config without the key was saved before the directions had their own reset
        # gates (keras_normkit 0.1): its weights hold one, used by both directions.
        return super().from_config({"share_reset_gate": True, **config})

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                **cell_arguments(QRNCell, self.cell.get_config()),
                "bidirectional": self.bidirectional,
                "share_reset_gate": self.share_reset_gate,
                "return_sequences": self.return_sequences,
                "implementation": self.implementation,
            }
        )
        return config
