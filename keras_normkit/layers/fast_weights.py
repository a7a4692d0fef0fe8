"""Fast weights: a recurrent layer with a Hebbian short-term associative memory."""

import keras
from keras import ops
from keras.src import backend as keras_backend
from keras.src import tree
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from keras_normkit.backend.tensorflow_xla import can_compile_cluster, xla_compiled, xla_compiling
from keras_normkit._validation import check_choice, check_int, check_number, check_seed

IMPLEMENTATIONS = ("auto", "matrix", "memory")

# `implementation="auto"` uses the memory form when the time axis is static and
# units >= min_units and T <= ratio * units, with (min_units, ratio) per way the loop runs:
# "plain" graph ops (eager, inference without jit_compile, torch), "xla_clusters" (a
# TensorFlow training step without jit_compile, see `inner_loop`) or "xla" (jit_compile=True,
# JAX). Measured with benchmarks/bench_fast_weights.py (grid section): the crossover is near
# T = units / 2, 0.85 * units and units respectively.
_AUTO_MEMORY_RULE = {"plain": (64, 0.5), "xla_clusters": (48, 0.8), "xla": (48, 1.0)}

# Steps per iteration of the time loop (see `_ChunkedLoop`).
_CHUNK = 8


def _half(dtype):
    return keras_backend.standardize_dtype(dtype) in ("float16", "bfloat16")


@keras.saving.register_keras_serializable(package="keras_normkit")
class FastWeightsRNNCell(keras.layers.Layer, DropoutRNNCell):
    """Cell of a fast-weights RNN (Ba et al. 2016): a slow RNN plus a Hebbian memory `A`.

    Each step computes the boundary `b = W·h(t) + C·x(t) + bias` once, then settles the
    new state with `S = inner_steps` inner iterations over the fast weights `A(t)`:
    `h_0 = f(LN(b))`, `h_{s+1} = f(LN(b + A(t)·h_s))` for `s = 0 … S-1`, `h(t+1) = h_S`,
    and finally writes the new state into the memory:
    `A(t+1) = decay · A(t) + fast_learning_rate · h(t+1) h(t+1)ᵀ`. `A` is per example and
    starts at zero. `LN` is a per-example layer normalization over the feature axis with
    a learned gain and bias and an epsilon (so an all-zero ReLU state gives no NaN).
    With `0 <= decay < 1`, `A` stays bounded: `‖A‖ <= η·max‖h‖² / (1 - λ)`.

    The state is `[h, A]`; because `keras.layers.RNN` states are vectors, `A` is carried
    flattened, shape `(batch, units * units)` (`ops.reshape(A, (-1, units, units))`
    recovers the matrix). Use the cell inside `keras.layers.RNN` (or `Bidirectional`);
    for speed prefer the `FastWeightsRNN` layer, which runs the same step with the input
    projection of all time steps done in one matmul and 8 steps per loop iteration.

    Args:
        units: Positive integer, dimensionality of the state `h`.
        inner_steps: Integer `S >= 1`, number of inner iterations over `A` per step.
        decay: Float `λ` in [0, 1], the decay of the fast weights.
        fast_learning_rate: Float `η >= 0`, the Hebbian learning rate of `A`.
        activation: Activation `f` (default ReLU).
        use_layer_norm: Whether to layer-normalize before `f` (strongly recommended).
        layer_norm_epsilon: Float > 0 added to the variance in the layer norm.
        use_bias: Whether the boundary has a bias vector.
        kernel_initializer: Initializer of `C` (input kernel).
        recurrent_initializer: Initializer of `W`; `None` means
            `keras.initializers.Identity(gain=0.05)` (IRNN style, as in the paper).
        bias_initializer: Initializer of the bias.
        kernel_regularizer: Optional regularizer of `C`.
        recurrent_regularizer: Optional regularizer of `W`.
        bias_regularizer: Optional regularizer of the bias.
        kernel_constraint: Optional constraint of `C`.
        recurrent_constraint: Optional constraint of `W`.
        bias_constraint: Optional constraint of the bias.
        dropout: Float in [0, 1), dropout rate on the inputs `x`.
        recurrent_dropout: Float in [0, 1), dropout rate on `h` in `W·h`.
        seed: Optional integer seed of the dropout masks.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A 2D tensor `(batch, features)`, one time step.
        states: `[h, A]` with shapes `(batch, units)` and `(batch, units * units)`.
        training: Python boolean, whether dropout is applied.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import FastWeightsRNNCell
    >>> rnn = keras.layers.RNN(FastWeightsRNNCell(8), return_state=True)
    >>> y, h, a = rnn(np.ones((2, 5, 3), "float32"))
    >>> tuple(y.shape), tuple(h.shape), tuple(a.shape)
    ((2, 8), (2, 8), (2, 64))

    Reference: Ba, Hinton, Mnih, Leibo, Ionescu, "Using Fast Weights to Attend to the
    Recent Past", NeurIPS 2016, arXiv:1610.06258.
    """

    def __init__(
        self,
        units,
        inner_steps=1,
        decay=0.95,
        fast_learning_rate=0.5,
        activation="relu",
        use_layer_norm=True,
        layer_norm_epsilon=1e-5,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer=None,
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
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_int("units", units, 1)
        self.inner_steps = check_int("inner_steps", inner_steps, 1)
        self.decay = check_number("decay", decay, 0.0, 1.0)
        self.fast_learning_rate = check_number("fast_learning_rate", fast_learning_rate, 0.0)
        self.layer_norm_epsilon = check_number(
            "layer_norm_epsilon", layer_norm_epsilon, 0.0, strict_minimum=True
        )
        self.dropout = check_number("dropout", dropout, 0.0, 1.0, strict_maximum=True)
        self.recurrent_dropout = check_number(
            "recurrent_dropout", recurrent_dropout, 0.0, 1.0, strict_maximum=True
        )
        seed = check_seed(seed)
        self.activation = keras.activations.get(activation)
        self.use_layer_norm = bool(use_layer_norm)
        self.use_bias = bool(use_bias)
        if recurrent_initializer is None:
            recurrent_initializer = keras.initializers.Identity(gain=0.05)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = keras.regularizers.get(recurrent_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.recurrent_constraint = keras.constraints.get(recurrent_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.seed = None if seed is None else int(seed)
        self.seed_generator = keras.random.SeedGenerator(seed=self.seed)
        self.state_size = [self.units, self.units * self.units]
        self.output_size = self.units

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None:
            raise ValueError(
                "The last (feature) axis of the inputs of `FastWeightsRNNCell` must be "
                f"defined. Received: input_shape={input_shape}"
            )
        self.kernel = self.add_weight(
            shape=(dim, self.units),
            name="kernel",
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, self.units),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(self.units,),
                name="bias",
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.gamma = self.beta = None
        if self.use_layer_norm:
            self.gamma = self.add_weight(shape=(self.units,), name="gamma", initializer="ones")
            self.beta = self.add_weight(shape=(self.units,), name="beta", initializer="zeros")

    # -- the math shared by the cell and the FastWeightsRNN layer -------------------------

    def layer_norm(self, z, gamma=None, beta=None):
        """Per-example layer norm over the feature axis (in float32 for half dtypes).

        `gamma`, `beta`: the gain and bias as tensors (default: this cell's weights).
        """
        if not self.use_layer_norm:
            return z
        gamma = self.gamma if gamma is None else gamma
        beta = self.beta if beta is None else beta
        dtype = z.dtype
        if _half(dtype):
            z = ops.cast(z, "float32")
        mean = ops.mean(z, axis=-1, keepdims=True)
        centered = z - mean
        variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
        normed = centered * ops.rsqrt(variance + self.layer_norm_epsilon)
        normed = normed * ops.cast(gamma, normed.dtype) + ops.cast(beta, normed.dtype)
        return ops.cast(normed, dtype)

    def settle(self, boundary, fast_apply, gamma=None, beta=None):
        """`h_0 = f(LN(b))`, then `S` times `h <- f(LN(b + A·h))`; `fast_apply(h) = A·h`."""
        h = self.activation(self.layer_norm(boundary, gamma, beta))
        for _ in range(self.inner_steps):
            h = self.activation(self.layer_norm(boundary + fast_apply(h), gamma, beta))
        return h

    def hebbian_update(self, a, h):
        """`A <- λ·A + η·h hᵀ` for `A` of shape `(batch, units, units)`."""
        return self.decay * a + (self.fast_learning_rate * h)[:, :, None] * h[:, None, :]

    # -------------------------------------------------------------------------------------

    def call(self, inputs, states, training=False):
        h_prev, a_flat = states
        if training and self.dropout > 0:
            inputs = inputs * self.get_dropout_mask(inputs)
        h_rec = h_prev
        if training and self.recurrent_dropout > 0:
            h_rec = h_prev * self.get_recurrent_dropout_mask(h_prev)
        boundary = ops.matmul(inputs, self.kernel) + ops.matmul(h_rec, self.recurrent_kernel)
        if self.use_bias:
            boundary = boundary + self.bias
        a = ops.reshape(a_flat, (-1, self.units, self.units))
        h = self.settle(boundary, lambda v: _matvec(a, v))
        a = self.hebbian_update(a, h)
        return h, [h, ops.reshape(a, (-1, self.units * self.units))]

    def get_initial_state(self, batch_size=None):
        return [
            ops.zeros((batch_size, self.units), dtype=self.compute_dtype),
            ops.zeros((batch_size, self.units * self.units), dtype=self.compute_dtype),
        ]

    def compute_output_shape(self, input_shape, states_shape=None):
        return (input_shape[0], self.units)

    def get_config(self):
        config = super().get_config()
        ser = keras.saving.serialize_keras_object
        config.update(
            {
                "units": self.units,
                "inner_steps": self.inner_steps,
                "decay": self.decay,
                "fast_learning_rate": self.fast_learning_rate,
                "activation": keras.activations.serialize(self.activation),
                "use_layer_norm": self.use_layer_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_bias": self.use_bias,
                "kernel_initializer": ser(self.kernel_initializer),
                "recurrent_initializer": ser(self.recurrent_initializer),
                "bias_initializer": ser(self.bias_initializer),
                "kernel_regularizer": ser(self.kernel_regularizer),
                "recurrent_regularizer": ser(self.recurrent_regularizer),
                "bias_regularizer": ser(self.bias_regularizer),
                "kernel_constraint": ser(self.kernel_constraint),
                "recurrent_constraint": ser(self.recurrent_constraint),
                "bias_constraint": ser(self.bias_constraint),
                "dropout": self.dropout,
                "recurrent_dropout": self.recurrent_dropout,
                "seed": self.seed,
            }
        )
        return config


_CELL_ARGS = (
    "inner_steps",
    "decay",
    "fast_learning_rate",
    "activation",
    "use_layer_norm",
    "layer_norm_epsilon",
    "use_bias",
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
    "kernel_regularizer",
    "recurrent_regularizer",
    "bias_regularizer",
    "kernel_constraint",
    "recurrent_constraint",
    "bias_constraint",
    "dropout",
    "recurrent_dropout",
    "seed",
)


@keras.saving.register_keras_serializable(package="keras_normkit")
class FastWeightsRNN(keras.layers.RNN):
    """Fast-weights recurrent layer (Ba et al. 2016), fast and with two exact algorithms.

    Runs the step of `FastWeightsRNNCell` over a sequence: `b = W·h(t) + C·x(t) + bias`,
    `h_0 = f(LN(b))`, `h_{s+1} = f(LN(b + A(t)·h_s))` for `s < S`, `h(t+1) = h_S`,
    `A(t+1) = λ·A(t) + η·h(t+1) h(t+1)ᵀ`, with `A(0) = 0`. The input projection `C·x` of
    all time steps is computed in one matmul before the loop. Two algebraically equal
    implementations of `A(t)·h`:

    * `"matrix"` carries `A` (`(batch, units, units)`), `O(B·H²)` work per step;
    * `"memory"` never forms `A`: it keeps the history of states and uses
      `A(t)·h = η Σ_τ λ^{t-τ} h(τ)(h(τ)ᵀh)`, `O(B·T·H)` work per step; it is faster when the
      sequence is short relative to `units`.

    Both run 8 steps per iteration of the time loop: inside such a chunk the chunk's own new
    states are applied from a small stack,
    `A(t0+k)·v = λ^k·A(t0)·v + η Σ_{j<k} λ^{k-1-j} h_j (h_jᵀv)`, and `A` (or the history) is
    written once per chunk, so back-propagation stores it once per 8 steps (`B·H²` or
    `B·T·H`). Sequences of up to 12 steps run as one chunk. With 8 chunks or more the memory
    form runs two loops, the first over a half-size history buffer.

    Without XLA the loop is hundreds of small kernels per step, so on TensorFlow a training
    call (`training=True`) with a static number of steps inside a graph that is not
    XLA-compiled — `fit` with the CPU default `jit_compile="auto"` — runs the loop as an
    XLA cluster, and its gradient as a second one that recomputes the forward pass: 2-2.7x
    faster than the plain graph in `benchmarks/bench_fast_weights.py`. Eager calls,
    inference and `tf.distribute` runs keep the plain graph, so exported SavedModels never
    need XLA.

    `"auto"` picks `"memory"` when the time axis is static and `T <= units` with XLA
    (`jit_compile=True`, the JAX backend), `T <= 0.8 * units` as XLA clusters (both for
    `units >= 48`), `T <= units / 2` and `units >= 64` otherwise (the crossovers measured
    by `benchmarks/bench_fast_weights.py`); else `"matrix"`, and always `"matrix"` for
    `stateful=True`. Masked (padded) steps leave `h` and `A` unchanged. States are `[h, A]`
    with `A` flattened to `(batch, units * units)`, as for the cell.

    Args:
        units: Positive integer, dimensionality of the state `h`.
        inner_steps: As in `FastWeightsRNNCell` (default `S = 1`).
        decay: As in `FastWeightsRNNCell` (default `λ = 0.95`).
        fast_learning_rate: As in `FastWeightsRNNCell` (default `η = 0.5`).
        activation: As in `FastWeightsRNNCell` (default ReLU).
        use_layer_norm: As in `FastWeightsRNNCell` (default: layer norm on).
        layer_norm_epsilon: As in `FastWeightsRNNCell`.
        use_bias: As in `FastWeightsRNNCell`.
        kernel_initializer: As in `FastWeightsRNNCell`.
        recurrent_initializer: As in `FastWeightsRNNCell` (default `W = 0.05·I`).
        bias_initializer: As in `FastWeightsRNNCell`.
        kernel_regularizer: As in `FastWeightsRNNCell`.
        recurrent_regularizer: As in `FastWeightsRNNCell`.
        bias_regularizer: As in `FastWeightsRNNCell`.
        kernel_constraint: As in `FastWeightsRNNCell`.
        recurrent_constraint: As in `FastWeightsRNNCell`.
        bias_constraint: As in `FastWeightsRNNCell`.
        dropout: As in `FastWeightsRNNCell`.
        recurrent_dropout: As in `FastWeightsRNNCell`.
        seed: As in `FastWeightsRNNCell`.
        activity_regularizer: Optional regularizer of the output.
        return_sequences: Whether to return the whole sequence of states.
        return_state: Whether to also return the last state `[h, A]`.
        go_backwards: Whether to process the sequence backwards.
        stateful: Whether the last state of batch `i` is the initial state of batch `i`
            of the next call (requires a static batch size).
        implementation: `"auto"`, `"matrix"` or `"memory"` (same results, different speed).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        sequences: A 3D tensor `(batch, timesteps, features)`.
        initial_state: Optional list `[h, A]`, shapes `(batch, units)` and
            `(batch, units * units)`.
        mask: Optional boolean tensor `(batch, timesteps)`; `False` steps are skipped.
        training: Python boolean, whether dropout is applied.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import FastWeightsRNN
    >>> model = keras.Sequential([
    ...     keras.Input((11, 37)),
    ...     FastWeightsRNN(20, decay=0.9, fast_learning_rate=0.5),
    ...     keras.layers.Dense(37, activation="softmax"),
    ... ])
    >>> tuple(model(np.zeros((2, 11, 37), "float32")).shape)
    (2, 37)

    Reference: Ba, Hinton, Mnih, Leibo, Ionescu, "Using Fast Weights to Attend to the
    Recent Past", NeurIPS 2016, arXiv:1610.06258.
    """

    def __init__(
        self,
        units,
        inner_steps=1,
        decay=0.95,
        fast_learning_rate=0.5,
        activation="relu",
        use_layer_norm=True,
        layer_norm_epsilon=1e-5,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer=None,
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        implementation="auto",
        **kwargs,
    ):
        check_choice("implementation", implementation, IMPLEMENTATIONS)
        cell = FastWeightsRNNCell(
            units,
            inner_steps=inner_steps,
            decay=decay,
            fast_learning_rate=fast_learning_rate,
            activation=activation,
            use_layer_norm=use_layer_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="fast_weights_rnn_cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            activity_regularizer=activity_regularizer,
            **kwargs,
        )
        self.input_spec = keras.layers.InputSpec(ndim=3)
        self.implementation = implementation
        self._zero_initial_fast_weights = True

    @property
    def units(self):
        return self.cell.units

    def resolve_implementation(self, timesteps, mode=None):
        """The implementation used for sequences of `timesteps` steps (`None`: unknown).

        `mode`: how the loop runs, `"plain"` (graph ops), `"xla_clusters"` or `"xla"`;
        `None`: `"xla"` if the backend is compiling with XLA while tracing (inside
        `model.compile(jit_compile=True)`, on JAX), else `"plain"`.
        """
        if self.implementation != "auto":
            return self.implementation
        if self.stateful or timesteps is None:
            return "matrix"
        if mode is None:
            mode = "xla" if xla_compiling() else "plain"
        min_units, ratio = _AUTO_MEMORY_RULE[mode]
        if self.units >= min_units and timesteps <= ratio * self.units:
            return "memory"
        return "matrix"

    def call(self, sequences, initial_state=None, mask=None, training=False):
        # The memory form skips the `A(0)·h` term when A(0) is known to be zero.
        self._zero_initial_fast_weights = initial_state is None and not self.stateful
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        cell = self.cell
        if tree.is_nested(mask):
            mask = mask[0]
        h0, a0 = initial_state
        units = cell.units
        if training and cell.dropout > 0:
            sequences = sequences * cell.get_dropout_mask(sequences[:, 0, :])[:, None, :]
        rec_mask = None
        if training and cell.recurrent_dropout > 0:
            rec_mask = cell.get_recurrent_dropout_mask(h0)
        # C·x for all steps at once.
        projected = ops.matmul(sequences, cell.kernel)
        if cell.use_bias:
            projected = projected + cell.bias
        if self.go_backwards:
            projected = ops.flip(projected, axis=1)
            mask = None if mask is None else ops.flip(mask, axis=1)
        # Without XLA the loop is hundreds of tiny kernels per step: in a TensorFlow training
        # step that is not XLA-compiled, it runs as compiled clusters (forward; gradient).
        # Not for an unknown T: XLA would compile again for every new length.
        compile_loop = training and projected.shape[1] is not None and can_compile_cluster()
        implementation = self.resolve_implementation(
            projected.shape[1], "xla_clusters" if compile_loop else None
        )
        loop = _ChunkedLoop(
            cell,
            implementation,
            zero_output_for_mask=self.zero_output_for_mask,
            zero_initial_fast_weights=self._zero_initial_fast_weights,
        )
        # Everything the loop reads, as tensors (the weights read here, under the layer's
        # autocast scope), so that it can also run as one XLA cluster.
        tensors = {
            "projected": projected,
            "h0": h0,
            "a0": ops.reshape(a0, (-1, units, units)),
            "recurrent_kernel": ops.convert_to_tensor(cell.recurrent_kernel),
            "mask": mask,
            "rec_mask": rec_mask,
        }
        if cell.use_layer_norm:
            tensors["gamma"] = ops.convert_to_tensor(cell.gamma)
            tensors["beta"] = ops.convert_to_tensor(cell.beta)
        names = [name for name, value in tensors.items() if value is not None]

        def run(*values):
            last, outputs, h, a = loop(dict(zip(names, values, strict=True)), self.return_sequences)
            return (last, h, a) if outputs is None else (last, h, a, outputs)

        if compile_loop:
            run = xla_compiled(run)
        last, h_last, a_last, *outputs = run(*(tensors[name] for name in names))
        # keras.layers.RNN casts `outputs` even when it returns only the last output.
        outputs = outputs[0] if outputs else last[:, None]
        return last, outputs, [h_last, ops.reshape(a_last, (-1, units * units))]

    def get_config(self):
        config = super().get_config()
        for key in ("cell", "unroll", "zero_output_for_mask"):
            config.pop(key, None)
        cell_config = self.cell.get_config()
        config.update({key: cell_config[key] for key in _CELL_ARGS})
        config.update(
            {
                "units": self.units,
                "activity_regularizer": keras.saving.serialize_keras_object(
                    self.activity_regularizer
                ),
                "implementation": self.implementation,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _matvec(a, v):
    """`A·v` for a batch of matrices `(B, H, H)` and vectors `(B, H)`."""
    return ops.squeeze(ops.matmul(a, v[:, :, None]), -1)


def _scaled(x, d):
    """`d·x`, skipping the product for the Python float 1."""
    return x if isinstance(d, float) and d == 1.0 else x * d


class _ChunkedLoop:
    """The `FastWeightsRNN` recurrence, run `chunk` steps per iteration of the time loop.

    Inside a chunk that starts at step `t0`, the fast weights are
    `A(t0 + k) = λ^{n_k}·A(t0) + η Σ_{j<k} λ^{n_k - n_j - 1} h_j h_jᵀ` (`n_k`: unmasked steps
    of the chunk before step `k`; masked steps neither write nor decay), so the `k` states
    written so far in the chunk are applied directly from a small stack and `A` — or, in the
    memory form, the history of states — is updated once per chunk. The loop then carries
    (and back-propagation stores) the `(B, H, H)` matrix or the `(B, T, H)` history once per
    chunk instead of once per step, and the per-step write of `A` disappears.
    """

    def __init__(self, cell, implementation, zero_output_for_mask, zero_initial_fast_weights):
        self.cell = cell
        self.implementation = implementation
        self.zero_output_for_mask = zero_output_for_mask
        self.with_a0 = not zero_initial_fast_weights
        self.tensors = None  # set by `__call__`

    def boundary(self, cx_t, h):
        rec_mask = self.tensors.get("rec_mask")
        h_rec = h if rec_mask is None else h * rec_mask
        return cx_t + ops.matmul(h_rec, self.tensors["recurrent_kernel"])

    def run_chunk(self, cx, m, h, out_prev, global_apply):
        """`cx.shape[1]` steps from `h`; `global_apply(v, d)` = `d·A(t0)·v`.

        Returns the outputs `(B, c, H)`, the new `h` and previous output, the stacked new
        states `(B, c, H)`, their weights `w_j` in `A(t0 + c) = d·A(t0) + Σ_j w_j h_j h_jᵀ`,
        and `d` (a Python float without a mask, else `(B, 1)`).
        """
        cell = self.cell
        lam, eta = cell.decay, cell.fast_learning_rate
        dtype = cx.dtype
        length = cx.shape[1]
        states, outputs, counts = [], [], []
        count = None if m is None else ops.zeros_like(m[:, :1])

        def weights_at(n_now):
            """Weights of the chunk's states so far in `A` when `n_now` unmasked steps are done."""
            if m is None:
                w = [eta * lam ** (n_now - 1 - j) for j in range(len(states))]
                return ops.convert_to_tensor(w, dtype=dtype)[None, :]
            lam_t = ops.cast(lam, dtype)
            exponents = ops.maximum(n_now - ops.concatenate(counts, axis=1) - 1.0, 0.0)
            return eta * m[:, : len(states)] * ops.power(lam_t, exponents)

        # Unstacked once: slicing step by step costs a full-size StridedSliceGrad per step.
        cx_steps = ops.unstack(cx, axis=1)
        m_steps = None if m is None else ops.unstack(m[:, :, None], axis=1)
        for k in range(length):
            if m is None:
                decay_k = lam**k
            else:
                decay_k = ops.power(ops.cast(lam, dtype), count)
            stacked = weights = None
            if states:
                stacked = ops.stack(states, axis=1)
                weights = weights_at(k if m is None else count)

            def fast_apply(v, decay_k=decay_k, stacked=stacked, weights=weights):
                out = global_apply(v, decay_k)
                if stacked is not None:
                    # Products and sums, not einsum: TensorFlow's einsum kernels cost
                    # ~0.1-0.3 ms each on these small tensors without XLA.
                    scores = ops.sum(stacked * v[:, None, :], axis=-1) * weights
                    out = out + ops.sum(scores[:, :, None] * stacked, axis=1)
                return out

            h_new = cell.settle(
                self.boundary(cx_steps[k], h),
                fast_apply,
                self.tensors.get("gamma"),
                self.tensors.get("beta"),
            )
            if m is None:
                h = out = h_new
            else:
                keep = m_steps[k] > 0
                h = ops.where(keep, h_new, h)
                out = ops.where(
                    keep, h_new, ops.zeros_like(h_new) if self.zero_output_for_mask else out_prev
                )
                counts.append(count)
                count = count + m_steps[k]
            out_prev = out
            states.append(h)
            outputs.append(out)
        end_weights = weights_at(length if m is None else count)
        end_decay = lam**length if m is None else ops.power(ops.cast(lam, dtype), count)
        return (
            ops.stack(outputs, axis=1),
            h,
            out_prev,
            ops.stack(states, axis=1),
            end_weights,
            end_decay,
        )

    @staticmethod
    def matrix_apply(a):
        return lambda v, d: _scaled(_matvec(a, v), d)

    @staticmethod
    def write_matrix(a, stacked, end_weights, end_decay):
        if not isinstance(end_decay, float):
            end_decay = end_decay[:, :, None]
        weighted = ops.swapaxes(stacked * end_weights[:, :, None], 1, 2)
        return end_decay * a + ops.matmul(weighted, stacked)

    def __call__(self, tensors, return_sequences):
        """Run the whole sequence; returns `(last output, outputs or None, h, A)`.

        `tensors`: `projected` (`C·x + bias`, `(B, T, H)`), `h0`, `a0` (`(B, H, H)`),
        `recurrent_kernel` and, when used, `mask`, `rec_mask`, `gamma` and `beta`.
        """
        self.tensors = tensors
        projected, mask, h0, a0 = (tensors.get(k) for k in ("projected", "mask", "h0", "a0"))
        units = self.cell.units
        batch = ops.shape(projected)[0]
        dtype = projected.dtype
        steps = projected.shape[1]
        if steps is None:
            # Unknown length: pad to whole chunks with masked steps.
            chunk = _CHUNK
            steps_t = ops.shape(projected)[1]
            pad = (-steps_t) % chunk
            if mask is None:
                mask = ops.ones((batch, steps_t), dtype="bool")
            projected = ops.concatenate([projected, ops.zeros((batch, pad, units), dtype)], 1)
            mask = ops.concatenate([mask, ops.zeros((batch, pad), "bool")], 1)
            n_chunks, tail = None, 0
        else:
            # Short sequences run as one chunk (no tail after the loop): T = 11 trained
            # 1.6x faster that way than as a chunk of 8 plus a tail of 3 (XLA, CPU).
            chunk = max(1, steps if steps <= _CHUNK * 3 // 2 else _CHUNK)
            n_chunks, tail = divmod(steps, chunk)
        m = None if mask is None else ops.cast(mask, dtype)
        keep_out = m is not None and not self.zero_output_for_mask
        main = None if n_chunks is None else n_chunks * chunk
        body_x = ops.reshape(projected[:, :main], (batch, -1, chunk, units))
        body = body_x  # the mask travels as one more feature: keras' TF loop wants one tensor
        if m is not None:
            body = ops.concatenate([body_x, ops.reshape(m[:, :main], (batch, -1, chunk, 1))], -1)
        out_prev0 = ops.zeros((batch, units), dtype)
        memory = self.implementation == "memory"
        # Loops over consecutive ranges of chunks. The memory form's history fills up as the
        # sequence runs, so with a static T of 8 chunks or more it runs two loops: the first
        # attends over a half-size buffer (3/4 of the attention work of one loop over the
        # full buffer; at 4 chunks the second loop's overhead cost more than it saved).
        segments = [(0, n_chunks)]
        if memory and n_chunks is not None and n_chunks >= 8:
            segments = [(0, n_chunks // 2), (n_chunks // 2, n_chunks)]
        if memory:
            n_slots = segments[0][1] if n_chunks is not None else ops.shape(body_x)[1]
            history = ops.zeros((batch, n_slots, chunk, units), dtype)
            weight = ops.zeros((batch, n_slots, chunk), dtype)
            position = ops.cast(ops.arange(n_slots) == 0, dtype)[None, :]
            scale = ops.ones((batch, 1), dtype)
            states = [h0, out_prev0, history, weight, position, scale]
        else:
            states = [h0, out_prev0, a0]
        if not keep_out:
            del states[1]

        def step(inputs, states):
            cx, mk = inputs, None
            if m is not None:
                cx, mk = inputs[..., :units], inputs[..., units]
            states = list(states)
            h = states.pop(0)
            out_prev = states.pop(0) if keep_out else None
            if memory:
                history, weight, position, scale = states
                flat_h = ops.reshape(history, (batch, -1, units))
                flat_w = ops.reshape(weight, (batch, -1))

                def global_apply(v, d):
                    scores = ops.squeeze(ops.matmul(flat_h, v[:, :, None]), -1) * flat_w
                    out = ops.squeeze(ops.matmul(scores[:, None, :], flat_h), 1)
                    if self.with_a0:
                        out = out + scale * _matvec(a0, v)
                    return _scaled(out, d)

            else:
                (a,) = states
                global_apply = self.matrix_apply(a)
            outputs, h, out_prev, stacked, end_w, end_d = self.run_chunk(
                cx, mk, h, out_prev, global_apply
            )
            if memory:
                d = end_d if isinstance(end_d, float) else end_d[:, :, None]
                new = position[:, :, None] > 0
                weight = ops.where(new, end_w[:, None, :], weight * d)
                history = ops.where(new[..., None], stacked[:, None], history)
                position = ops.pad(position[:, :-1], [[0, 0], [1, 0]])
                new_states = [history, weight, position, scale * end_d]
            else:
                new_states = [self.write_matrix(a, stacked, end_w, end_d)]
            return outputs, [h] + ([out_prev] if keep_out else []) + new_states

        all_outputs = return_sequences or steps is None
        segment_outputs = []
        for start, stop in segments:
            if start > 0:  # the memory form's next loop: a buffer of `stop` slots
                history, weight, _, scale = states[-4:]
                grow = stop - start
                history = ops.pad(history, [[0, 0], [0, grow], [0, 0], [0, 0]])
                weight = ops.pad(weight, [[0, 0], [0, grow], [0, 0]])
                position = ops.cast(ops.arange(stop) == start, dtype)[None, :]
                states = list(states[:-4]) + [history, weight, position, scale]
            last, outputs, states = keras_backend.rnn(
                step,
                body if len(segments) == 1 else body[:, start:stop],
                states,
                mask=None,
                unroll=False,
                input_length=None if stop is None else stop - start,
                return_all_outputs=all_outputs,
            )
            segment_outputs.append(outputs)
        if len(segments) > 1 and all_outputs:
            outputs = ops.concatenate(segment_outputs, axis=1)
        h = states[0]
        out_prev = states[1] if keep_out else None
        if memory:
            history, weight, _, scale = states[-4:]
            flat_h = ops.reshape(history, (batch, -1, units))
            a = ops.einsum("bti,btj->bij", flat_h * ops.reshape(weight, (batch, -1, 1)), flat_h)
            if self.with_a0:
                a = a + scale[:, :, None] * a0
        else:
            a = states[-1]
        last = last[:, -1]
        if all_outputs:
            outputs = ops.reshape(outputs, (batch, -1, units))
        if tail:
            # The last `tail < chunk` steps, outside the loop, on the matrix.
            t_out, h, _, stacked, end_w, end_d = self.run_chunk(
                projected[:, main:],
                None if m is None else m[:, main:],
                h,
                out_prev,
                self.matrix_apply(a),
            )
            a = self.write_matrix(a, stacked, end_w, end_d)
            last = t_out[:, -1]
            if return_sequences:
                outputs = ops.concatenate([outputs, t_out], axis=1)
        if steps is None:
            outputs = outputs[:, : ops.shape(projected)[1] - pad]  # drop the padding
            last = outputs[:, -1]
        return last, (outputs if return_sequences else None), h, a
