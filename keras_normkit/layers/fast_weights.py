"""Fast weights: a recurrent layer with a Hebbian short-term associative memory."""

import keras
from keras import ops

from keras_normkit._validation import check_choice, check_int, check_number, check_seed
from keras_normkit.backend.keras_compat import DropoutRNNCell
from keras_normkit.layers._cell_args import activation_name, cell_arguments
from keras_normkit.ops.fast_weights_loop import matvec
from keras_normkit.ops.fast_weights_rnn import (
    IMPLEMENTATIONS,
    choose_implementation,
    run_fast_weights,
)
from keras_normkit.ops.layer_norm import layer_norm


def _saved_config(config):
    """`config` as saved, with the defaults of the release that saved it.

    keras_normkit 0.1 layer-normalized the preliminary vector (`h_0 = f(LN(b))`) and wrote
    no `preliminary_layer_norm` key: a config without the key keeps that form, so that a
    `.keras` file saved then predicts what it predicted.
    """
    if "preliminary_layer_norm" in config:
        return config
    return {**config, "preliminary_layer_norm": True}


@keras.saving.register_keras_serializable(package="keras_normkit")
class FastWeightsRNNCell(keras.layers.Layer, DropoutRNNCell):
    """Cell of a fast-weights RNN (Ba et al. 2016): a slow RNN plus a Hebbian memory `A`.

    Each step computes the boundary `b = W·h(t) + C·x(t) + bias` once, then settles the
    new state with `S = inner_steps` inner iterations over the fast weights `A(t)`, from the
    preliminary vector `h_0 = f(b)` (the paper's formula: no layer norm on `h_0`):
    `h_{s+1} = f(LN(b + A(t)·h_s))` for `s = 0 … S-1`, `h(t+1) = h_S`,
    and finally writes the new state into the memory:
    `A(t+1) = decay · A(t) + fast_learning_rate · h(t+1) h(t+1)ᵀ`. `A` is per example and
    starts at zero. `LN` is a per-example layer normalization over the feature axis with
    a learned gain and bias and an epsilon (so an all-zero ReLU state gives no NaN).
    With `0 <= decay < 1`, `A` stays bounded: `‖A‖ <= η·max‖h‖² / (1 - λ)`.
    `preliminary_layer_norm=True` gives `h_0 = f(LN(b))` instead, the form keras_normkit 0.1
    computed (and several public ports of the paper use). A `.keras` file saved by 0.1,
    whose config has no `preliminary_layer_norm`, loads with that form, so it predicts what
    it predicted.

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
        use_layer_norm: Whether to layer-normalize before `f` in the inner loop (strongly
            recommended).
        preliminary_layer_norm: Whether the preliminary vector is layer-normalized too,
            `h_0 = f(LN(b))` (keras_normkit 0.1's form), instead of the paper's
            `h_0 = f(b)` (default). Ignored without `use_layer_norm`.
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
        preliminary_layer_norm=False,
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
        self.preliminary_layer_norm = bool(preliminary_layer_norm)
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
        """Per-example layer norm over the feature axis (`keras_normkit.ops.layer_norm`).

        `gamma`, `beta`: the gain and bias as tensors (default: this cell's weights).
        """
        if not self.use_layer_norm:
            return z
        gamma = self.gamma if gamma is None else gamma
        beta = self.beta if beta is None else beta
        # Automatic differentiation of the shared formula, not its hand-derived gradient,
        # inside this layer's XLA-compiled loop (benchmarks/DECISIONS.md#layer-norm-gradient).
        return layer_norm(z, gamma, beta, self.layer_norm_epsilon, derived_gradient=False)

    def settle(self, boundary, fast_apply, gamma=None, beta=None):
        """`h_0 = f(b)`, then `S` times `h <- f(LN(b + A·h))`; `fast_apply(h) = A·h`.

        With `preliminary_layer_norm`, `h_0 = f(LN(b))`.
        """
        h0 = self.layer_norm(boundary, gamma, beta) if self.preliminary_layer_norm else boundary
        h = self.activation(h0)
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
        h = self.settle(boundary, lambda v: matvec(a, v))
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
                "preliminary_layer_norm": self.preliminary_layer_norm,
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

    @classmethod
    def from_config(cls, config):
        return super().from_config(_saved_config(config))


def _recurrent_step(cell):
    """The step `run_fast_weights` runs: `b = C·x + bias + W·h`, then `cell.settle`.

    `projected` is `C·x + bias` (projected before the loop); `recurrent_mask` the dropout
    mask of `h` in `W·h`.
    """

    def step(
        projected, h, fast_apply, recurrent_kernel, recurrent_mask=None, gamma=None, beta=None
    ):
        h_rec = h if recurrent_mask is None else h * recurrent_mask
        boundary = projected + ops.matmul(h_rec, recurrent_kernel)
        return cell.settle(boundary, fast_apply, gamma, beta)

    return step


@keras.saving.register_keras_serializable(package="keras_normkit")
class FastWeightsRNN(keras.layers.RNN):
    """Fast-weights recurrent layer (Ba et al. 2016), fast and with two exact algorithms.

    Runs the step of `FastWeightsRNNCell` over a sequence: `b = W·h(t) + C·x(t) + bias`,
    `h_0 = f(b)`, `h_{s+1} = f(LN(b + A(t)·h_s))` for `s < S`, `h(t+1) = h_S`,
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
    `B·T·H`). Sequences of up to 12 steps run as one chunk, or, when XLA compiles the loop, one
    step per iteration (XLA compiles an unrolled chunk slowly). With 48 steps or more
    (6 chunks) the memory form runs up to four consecutive loops over growing history
    buffers (`keras_normkit.ops.fast_weights_plan.memory_segments`), so that no step attends
    over the empty end of the buffer.

    Without XLA the loop is hundreds of small kernels per step, so on TensorFlow a training
    call (`training=True`) with a static number of steps inside a graph that is not
    XLA-compiled — `fit` with the CPU default `jit_compile="auto"` — runs the loop as an
    XLA cluster, and its gradient as a second one that recomputes the forward pass. Eager
    calls, inference and `tf.distribute` runs keep the plain graph, so exported SavedModels
    never need XLA (`keras_normkit.ops.fast_weights_rnn`, the layer's engine, plans this;
    why: `benchmarks/DECISIONS.md#tensorflow-xla-clusters`). On PyTorch the layer runs a
    native loop with a hand-written backward pass (`keras_normkit.backend.torch_rnn`, the
    matrix form, whatever `implementation` says), except to train on a CPU with a large
    `batch · units²`, where the chunked loop is faster
    (`benchmarks/DECISIONS.md#torch-fast-weights-cpu`).

    `"auto"` picks `"memory"` when the time axis is static and `T` is short relative to
    `units`, below a crossover measured for each way the loop runs (with XLA, as XLA
    clusters, with plain ops: the rule and its measurement are in
    `benchmarks/DECISIONS.md#fast-weights-auto-form`); else `"matrix"`, and always
    `"matrix"` for `stateful=True`. Masked (padded) steps leave `h` and `A` unchanged. States are `[h, A]`
    with `A` flattened to `(batch, units * units)`, as for the cell.

    Args:
        units: Positive integer, dimensionality of the state `h`.
        inner_steps: As in `FastWeightsRNNCell` (default `S = 1`).
        decay: As in `FastWeightsRNNCell` (default `λ = 0.95`).
        fast_learning_rate: As in `FastWeightsRNNCell` (default `η = 0.5`).
        activation: As in `FastWeightsRNNCell` (default ReLU).
        use_layer_norm: As in `FastWeightsRNNCell` (default: layer norm on).
        preliminary_layer_norm: As in `FastWeightsRNNCell` (default: the paper's
            `h_0 = f(b)`; `True` gives keras_normkit 0.1's `h_0 = f(LN(b))`).
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
        preliminary_layer_norm=False,
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
            **cell_arguments(FastWeightsRNNCell, locals()),
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
        # The output mask (`compute_mask`: the input's, with `return_sequences`) reaches the
        # layers after this one. Set here: keras-nightly's `RNN` (3.16.0.dev2026102704) sets
        # `supports_masking = False`, which drops it and warns on every masked call.
        self.supports_masking = True
        self.implementation = implementation

    @property
    def units(self):
        return self.cell.units

    def resolve_implementation(self, timesteps, mode=None):
        """The implementation used for sequences of `timesteps` steps (`None`: unknown).

        `mode`: how the loop runs, `"plain"` (graph ops), `"xla_clusters"` or `"xla"`;
        `None`: `"xla"` if the backend is compiling with XLA while tracing (inside
        `model.compile(jit_compile=True)`, on JAX), else `"plain"`
        (`keras_normkit.ops.fast_weights_rnn.choose_implementation`, the `form` column of
        `keras_normkit.ops.fast_weights_plan.plan`). The layer's own calls do not ask this:
        the engine plans each call itself.

        Args:
            timesteps: `T` as a Python int, or `None` if unknown.
            mode: One of `"plain"`, `"xla_clusters"`, `"xla"`, or `None` (see above).
        """
        return choose_implementation(
            self.implementation, self.units, timesteps, mode, stateful=self.stateful
        )

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if initial_state is None and not self.stateful:
            # A(0) is zero: `inner_loop` is given `[h0]` alone and passes `a0=None` down (the
            # memory form then skips `A(0)·v`), where Keras's RNN would make a zero
            # `(batch, units²)` state.
            batch = ops.shape(sequences)[0]
            initial_state = [ops.zeros((batch, self.units), self.cell.compute_dtype)]
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        """The loop over `sequences`: one call into the engine.

        Args:
            sequences: `(B, T, F)` tensor.
            initial_state: `[h0, A0]`, `A0` flattened to `(B, units²)`, or `[h0]` alone when
                `A(0)` is zero (what `call` passes without a given or stateful state).
            mask: Optional boolean `(B, T)` mask (or a nested one, its first).
            training: Whether dropout applies and the loop may run as XLA clusters.
        """
        cell, units = self.cell, self.units
        if keras.tree.is_nested(mask):
            mask = mask[0]
        h0, *given = initial_state
        a0 = ops.reshape(given[0], (-1, units, units)) if given else None
        if keras.backend.backend() == "torch":
            # PyTorch: the native loop (one autograd node for the sequence), as Keras's LSTM
            # tries `backend.lstm`; Keras-ops loop below where it does not apply.
            try:
                return self._torch_loop(sequences, h0, a0, mask, training)
            except NotImplementedError:
                pass
        # The coefficients: dropout masks, and the weights read as tensors under the layer's
        # autocast scope (the engine may run the loop as an XLA cluster, which reads no
        # variable).
        if training and cell.dropout > 0:
            sequences = sequences * cell.get_dropout_mask(sequences[:, 0, :])[:, None, :]
        recurrent_mask = None
        if training and cell.recurrent_dropout > 0:
            recurrent_mask = cell.get_recurrent_dropout_mask(h0)
        tensor = ops.convert_to_tensor
        step_tensors = {
            "recurrent_kernel": tensor(cell.recurrent_kernel),
            "recurrent_mask": recurrent_mask,
            "gamma": tensor(cell.gamma) if cell.use_layer_norm else None,
            "beta": tensor(cell.beta) if cell.use_layer_norm else None,
        }
        # Then the engine: it plans (how the loop runs, which form) and runs the loop.
        last, outputs, h, a = run_fast_weights(
            _recurrent_step(cell),
            sequences,
            tensor(cell.kernel),
            h0,
            a0,
            decay=cell.decay,
            learning_rate=cell.fast_learning_rate,
            bias=tensor(cell.bias) if cell.use_bias else None,
            step_tensors=step_tensors,
            mask=mask,
            implementation=self.implementation,
            stateful=self.stateful,
            training=training,
            go_backwards=self.go_backwards,
            zero_output_for_mask=self.zero_output_for_mask,
            return_sequences=self.return_sequences,
        )
        # keras.layers.RNN casts `outputs` even when it returns only the last output.
        outputs = last[:, None] if outputs is None else outputs
        return last, outputs, [h, ops.reshape(a, (-1, units * units))]

    def _torch_loop(self, sequences, h0, a0, mask, training):
        """`inner_loop` on PyTorch's native loop (`keras_normkit.backend.torch_rnn`);
        `a0`: `(B, units, units)`, or `None` for zeros."""
        from keras_normkit.backend import torch_rnn

        cell, units, tensor = self.cell, self.units, ops.convert_to_tensor
        last, outputs, (h, a) = torch_rnn.fast_weights_rnn(
            sequences,
            [h0, a0],
            kernel=tensor(cell.kernel),
            recurrent_kernel=tensor(cell.recurrent_kernel),
            bias=tensor(cell.bias) if cell.use_bias else None,
            norm=(
                (tensor(cell.gamma), tensor(cell.beta), cell.layer_norm_epsilon)
                if cell.use_layer_norm
                else None
            ),
            inner_steps=cell.inner_steps,
            decay=cell.decay,
            fast_learning_rate=cell.fast_learning_rate,
            activation=activation_name(cell.activation),
            preliminary_layer_norm=cell.preliminary_layer_norm,
            mask=mask,
            input_mask=(
                cell.get_dropout_mask(sequences[:, 0, :]) if training and cell.dropout > 0 else None
            ),
            recurrent_mask=(
                cell.get_recurrent_dropout_mask(h0)
                if training and cell.recurrent_dropout > 0
                else None
            ),
            go_backwards=self.go_backwards,
            return_sequences=self.return_sequences,
            zero_output_for_mask=self.zero_output_for_mask,
        )
        return last, outputs, [h, ops.reshape(a, (-1, units * units))]

    def get_config(self):
        config = super().get_config()
        for key in ("cell", "unroll", "zero_output_for_mask"):
            config.pop(key, None)
        config.update(cell_arguments(FastWeightsRNNCell, self.cell.get_config()))
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
        return cls(**_saved_config(config))
