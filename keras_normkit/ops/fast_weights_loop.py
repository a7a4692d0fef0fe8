"""The time loop of `keras_normkit.layers.FastWeightsRNN`: 8 steps per iteration, two forms.

The engine of the fast-weights recurrence of Ba et al. (2016): a state `h(t)` and a
per-example matrix of fast weights `A(t)`, written after every step,
`A(t+1) = lambda A(t) + eta h(t+1) h(t+1)^T`. Like the loop `keras.layers.RNN` runs
(`step_function(inputs, states)` over a tensor of inputs), `fast_weights_loop` is given a
step *function* and tensors, and never sees a layer: the caller's
`step_function(x_t, h, fast_apply)` computes the new state from the step's input, the
previous state and `fast_apply(v) = A(t)·v` (the layer's: the boundary `b = W h + x_t`, then
`h_0 = f(b)`, `h_{s+1} = f(LN(b + A h_s))`); the engine owns `A`: its decay, its Hebbian
writes, the masks, and the order of computation below.

Chunks. The loop runs `CHUNK` = 8 steps per iteration (a sequence of up to 12 steps is one
chunk, or one step per iteration when XLA compiles the loop, see `chunk_size`; with a static
`T` the last `T mod 8` steps run after the loop; an unknown `T` is padded with masked steps
to whole chunks). Inside a chunk starting at `t0`,
`A(t0 + k) v = lambda^{n_k} A(t0) v + eta sum_{j<k} lambda^{n_k - n_j - 1} h_j (h_j^T v)`
(`n_k`: unmasked steps of the chunk before step `k`; masked steps neither write nor decay),
so the chunk's own new states are applied from a small stack and `A` is written once per
chunk: the loop carries, and back-propagation stores, `A` once per 8 steps instead of once
per step, and the per-step rank-one write of `A` disappears
(`benchmarks/DECISIONS.md#fast-weights-chunk`).

Matrix vs memory forms (`implementation`), algebraically equal:

* `"matrix"` carries `A` (`(batch, units, units)`): `O(B H^2)` work per step;
* `"memory"` never forms `A` inside the loop: it keeps the history of states with their
  decayed weights and applies `A(t) v = eta sum_tau lambda^{t-tau} h(tau) (h(tau)^T v)`,
  `O(B T H)` work per step: faster when the sequence is short relative to `units`. `A` is
  formed once at the end (the returned state).

Several loops. The memory form's history fills up as the sequence runs, so with a static `T`
of 48 steps or more (6 chunks) it runs consecutive loops over growing history buffers
(`memory_segments`): two loops from 6 chunks, three from 9, four from 12 chunks
(96 steps). Each loop attends over a buffer just as long as the history at its end, where
one loop would attend over (and back-propagation would store, at every iteration) the
full-length buffer: with `k` equal loops the work is `(k + 1) / (2k)` of one loop's
(`benchmarks/DECISIONS.md#fast-weights-memory-loops`).

The loop itself is the backend's RNN loop (`keras_normkit.backend.keras_compat.backend_rnn`,
what `keras.layers.RNN` runs), so it compiles with XLA and exports like a Keras RNN.

The plan (form, chunk size, loops) is `keras_normkit.ops.fast_weights_plan.plan`'s, made
from Python values before anything is traced; `CHUNK`, `chunk_size` and `memory_segments`
live there and are re-exported here.

In this module: `fast_weights_loop` plans and runs; `run_planned_loop` runs a given
`LoopPlan`: it pads an unknown length (`_pad_to_chunks`), stacks the chunks
(`_loop_inputs`) and runs the backend loop over each of the plan's segments with
`_chunk_step`, one iteration: `_run_chunk` unrolls the chunk's steps (each calling the
caller's step with `_fast_apply_in_chunk`), then the form (`MatrixForm` or `MemoryForm`,
the same four methods `init`, `apply`, `write`, `finalize`) writes `A(t0)`'s next value.
The loop carries a `_Carry` by name (`h`, the last output, the form's carry); the tail runs
`_run_chunk` once more, on the matrix. Nothing is stored between calls.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from keras import ops

from keras_normkit._validation import check_choice, check_number
from keras_normkit.backend.keras_compat import backend_rnn
from keras_normkit.ops._shapes import padding_to_multiple
from keras_normkit.ops.fast_weights_plan import (
    CHUNK,
    FORMS,
    chunk_size,
    memory_segments,
    mode_flags,
    plan,
)

__all__ = [
    "CHUNK",
    "MatrixForm",
    "MemoryForm",
    "chunk_size",
    "fast_weights_loop",
    "matvec",
    "memory_segments",
    "run_planned_loop",
    "static_steps",
]


def static_steps(x):
    """The length of the time axis (axis 1) of `x` as a Python int, or `None` if unknown.

    Unknown is `None` in a TensorFlow graph and in a Keras functional model, and a symbolic
    dimension when JAX exports with a polymorphic shape (`model.export` of a `None` time
    axis): both run the unknown-length path (no Python comparison on the length).
    """
    steps = x.shape[1]
    return steps if isinstance(steps, int) else None


def matvec(a, v):
    """`A·v` for a batch of matrices `(B, H, H)` and vectors `(B, H)`."""
    return ops.squeeze(ops.matmul(a, v[:, :, None]), -1)


def _scaled(x, d):
    """`d·x`, skipping the product for the Python float 1."""
    return x if isinstance(d, float) and d == 1.0 else x * d


class _Recurrence(NamedTuple):
    """What every chunk runs: the caller's step and the constants of the Hebbian memory."""

    step_function: Callable  # (x_t, h, fast_apply) -> new h
    decay: float  # lambda
    learning_rate: float  # eta
    zero_output_for_mask: bool  # a masked step outputs zeros (else the previous output)


class _Chunk(NamedTuple):
    """What `_run_chunk` returns for a chunk of `c` steps that starts at `t0`."""

    outputs: Any  # (B, c, H)
    h: Any  # the state after the chunk, (B, H)
    last_output: Any  # the output of its last step, (B, H)
    states: Any  # its new states, stacked, (B, c, H)
    weights: Any  # w_j in A(t0 + c) = d·A(t0) + Σ_j w_j h_j h_jᵀ, (1 or B, c)
    decay: Any  # d: a Python float without a mask, else (B, 1)


# -- one chunk ------------------------------------------------------------------------------


def _decay_power(decay, n, dtype):
    """`λ^n`: a Python float for a Python int `n` (no mask), else a tensor like `n`."""
    if isinstance(n, int):
        return decay**n
    return ops.power(ops.cast(decay, dtype), n)


def _written_weights(recurrence, done, counts, mask, n_states, dtype):
    """The weights in `A` of the chunk's first `n_states` states, `done` unmasked steps in.

    `w_j = η·λ^{done - n_j - 1}` for an unmasked step `j` (`n_j`, in `counts`: the unmasked
    steps before it), 0 for a masked one: `(1, n_states)` without a mask (`done` a Python
    int), else `(B, n_states)`.
    """
    lam, eta = recurrence.decay, recurrence.learning_rate
    if mask is None:
        w = [eta * lam ** (done - 1 - j) for j in range(n_states)]
        return ops.convert_to_tensor(w, dtype=dtype)[None, :]
    lam_t = ops.cast(lam, dtype)
    exponents = ops.maximum(done - ops.concatenate(counts, axis=1) - 1.0, 0.0)
    return eta * mask[:, :n_states] * ops.power(lam_t, exponents)


def _fast_apply_in_chunk(global_apply, decay, stacked, weights):
    """`v -> A(t0 + k)·v = λ^{n_k}·A(t0)·v + Σ_j w_j h_j (h_jᵀ v)`.

    `global_apply(v, d) = d·A(t0)·v`, `decay = λ^{n_k}`, `stacked`: the chunk's states so far
    `(B, k, H)` (`None` at its first step), `weights`: their `w_j`.
    """

    def fast_apply(v):
        out = global_apply(v, decay)
        if stacked is not None:
            # Products and sums, not einsum: TensorFlow's einsum kernels are slow on these
            # small tensors without XLA (benchmarks/DECISIONS.md#fast-weights-chunk-products).
            scores = ops.sum(stacked * v[:, None, :], axis=-1) * weights
            out = out + ops.sum(scores[:, :, None] * stacked, axis=1)
        return out

    return fast_apply


def _run_chunk(recurrence, inputs, mask, h, last_output, global_apply):
    """`inputs.shape[1]` steps from `h`, unrolled; `global_apply(v, d) = d·A(t0)·v`.

    `mask`: `None` or the float mask of the steps `(B, c)`; `last_output`: the previous
    step's output (read when a masked step repeats it). Returns a `_Chunk`.
    """
    dtype = inputs.dtype
    length = inputs.shape[1]
    states, outputs, counts = [], [], []
    done = None if mask is None else ops.zeros_like(mask[:, :1])
    # Unstacked once: slicing step by step costs a full-size StridedSliceGrad per step.
    input_steps = ops.unstack(inputs, axis=1)
    mask_steps = None if mask is None else ops.unstack(mask[:, :, None], axis=1)
    for k in range(length):
        n_k = k if mask is None else done
        decay = _decay_power(recurrence.decay, n_k, dtype)
        stacked = weights = None
        if states:
            stacked = ops.stack(states, axis=1)
            weights = _written_weights(recurrence, n_k, counts, mask, len(states), dtype)
        fast_apply = _fast_apply_in_chunk(global_apply, decay, stacked, weights)
        h_new = recurrence.step_function(input_steps[k], h, fast_apply)
        if mask is None:
            h = out = h_new
        else:
            keep = mask_steps[k] > 0
            h = ops.where(keep, h_new, h)
            skipped = ops.zeros_like(h_new) if recurrence.zero_output_for_mask else last_output
            out = ops.where(keep, h_new, skipped)
            counts.append(done)
            done = done + mask_steps[k]
        last_output = out
        states.append(h)
        outputs.append(out)
    n_end = length if mask is None else done
    weights = _written_weights(recurrence, n_end, counts, mask, len(states), dtype)
    decay = _decay_power(recurrence.decay, n_end, dtype)
    return _Chunk(
        outputs=ops.stack(outputs, axis=1),
        h=h,
        last_output=last_output,
        states=ops.stack(states, axis=1),
        weights=weights,
        decay=decay,
    )


# -- the two forms of A(t0): the matrix, or the history of states ---------------------------


class _Matrix(NamedTuple):
    """The matrix form's carry."""

    a: Any  # A(t0), (B, H, H)


class _History(NamedTuple):
    """The memory form's carry: the states so far, one slot per chunk, and their weights."""

    states: Any  # (B, slots, chunk, H)
    weights: Any  # their weights w_τ in A, (B, slots, chunk)
    position: Any  # 1 at the slot the next chunk writes, (1, slots)
    scale: Any  # the decay of A(0) so far, (B, 1)


class MatrixForm:
    """`implementation="matrix"`: the loop carries `A` itself, `O(B·H²)` work per step.

    The forms share four methods, called by the loop in this order: `init` (the carry into
    each loop over a range of chunks), `apply` (`A(t0)·v` at a chunk's start), `write`
    (`A(t0 + c)` after the chunk) and `finalize` (`A` after the last loop).

    Args:
        a0: `(B, H, H)` initial fast weights, or `None` for zeros.
        batch: The batch size (an int or a tensor).
        units: The state's size `H`.
        dtype: The carry's dtype.
    """

    carry = _Matrix

    def __init__(self, a0, batch, units, dtype):
        self.a0, self.batch, self.units, self.dtype = a0, batch, units, dtype

    def init(self, start, stop, carry=None):
        """The carry into the loop over chunks `start:stop`: `A(0)`, then the last one's."""
        if carry is not None:
            return carry
        a = (
            ops.zeros((self.batch, self.units, self.units), self.dtype)
            if self.a0 is None
            else self.a0
        )
        return _Matrix(a)

    def apply(self, carry):
        """`global_apply(v, d) = d·A·v` for the matrix `A` at the chunk's start."""
        return lambda v, d: _scaled(matvec(carry.a, v), d)

    def write(self, carry, chunk):
        """`A(t0 + c) = d·A(t0) + Σ_j w_j h_j h_jᵀ`, once per chunk."""
        decay = chunk.decay if isinstance(chunk.decay, float) else chunk.decay[:, :, None]
        weighted = ops.swapaxes(chunk.states * chunk.weights[:, :, None], 1, 2)
        return _Matrix(decay * carry.a + ops.matmul(weighted, chunk.states))

    def finalize(self, carry):
        """`A` after the loop."""
        return carry.a


class MemoryForm:
    """`implementation="memory"`: the loop carries the history of states, never `A`.

    `A(t)·v = Σ_τ w_τ h(τ) (h(τ)ᵀ v) + scale·A(0)·v`, `O(B·T·H)` work per step; `A` is
    formed once, by `finalize`. Its history has one slot per chunk; each loop over chunks
    `start:stop` carries `stop` slots (`keras_normkit.ops.fast_weights_plan.memory_segments`).
    Same methods as `MatrixForm`.

    Args:
        a0: `(B, H, H)` initial fast weights, or `None` for zeros (then the `A(0)·v` term is
            skipped).
        batch: The batch size (an int or a tensor).
        units: The state's size `H`.
        dtype: The carry's dtype.
        chunk: Steps per chunk (slot).
    """

    carry = _History

    def __init__(self, a0, batch, units, dtype, chunk):
        self.a0, self.batch, self.units, self.dtype = a0, batch, units, dtype
        self.chunk = chunk

    def init(self, start, stop, carry=None):
        """The carry into the loop over chunks `start:stop`: `stop` slots, `start` of them
        filled by the loops before (`carry`, `None` for the first loop: all zero)."""
        dtype = self.dtype
        if carry is None:
            return _History(
                ops.zeros((self.batch, stop, self.chunk, self.units), dtype),
                ops.zeros((self.batch, stop, self.chunk), dtype),
                ops.cast(ops.arange(stop) == 0, dtype)[None, :],
                ops.ones((self.batch, 1), dtype),
            )
        grow = stop - start
        return _History(
            ops.pad(carry.states, [[0, 0], [0, grow], [0, 0], [0, 0]]),
            ops.pad(carry.weights, [[0, 0], [0, grow], [0, 0]]),
            ops.cast(ops.arange(stop) == start, dtype)[None, :],
            carry.scale,
        )

    def apply(self, carry):
        """`global_apply(v, d) = d·A·v`, `A = Σ_τ w_τ h(τ) h(τ)ᵀ + scale·A(0)`."""
        batch, units, a0 = self.batch, self.units, self.a0
        flat_h = ops.reshape(carry.states, (batch, -1, units))
        flat_w = ops.reshape(carry.weights, (batch, -1))

        def global_apply(v, d):
            scores = ops.squeeze(ops.matmul(flat_h, v[:, :, None]), -1) * flat_w
            out = ops.squeeze(ops.matmul(scores[:, None, :], flat_h), 1)
            if a0 is not None:
                out = out + carry.scale * matvec(a0, v)
            return _scaled(out, d)

        return global_apply

    def write(self, carry, chunk):
        """The chunk's states and weights into the slot at `position`; older weights decayed."""
        decay = chunk.decay if isinstance(chunk.decay, float) else chunk.decay[:, :, None]
        new = carry.position[:, :, None] > 0
        return _History(
            states=ops.where(new[..., None], chunk.states[:, None], carry.states),
            weights=ops.where(new, chunk.weights[:, None, :], carry.weights * decay),
            position=ops.pad(carry.position[:, :-1], [[0, 0], [1, 0]]),
            scale=carry.scale * chunk.decay,
        )

    def finalize(self, carry):
        """`A = Σ_τ w_τ h(τ) h(τ)ᵀ + scale·A(0)`, formed once, after the loop."""
        batch, units = self.batch, self.units
        flat_h = ops.reshape(carry.states, (batch, -1, units))
        weights = ops.reshape(carry.weights, (batch, -1, 1))
        a = ops.einsum("bti,btj->bij", flat_h * weights, flat_h)
        if self.a0 is not None:
            a = a + carry.scale[:, :, None] * self.a0
        return a


# -- the loop -------------------------------------------------------------------------------


class _Carry(NamedTuple):
    """What the backend loop carries, by name; it is given and returns a flat list."""

    h: Any  # the state, (B, H)
    last_output: Any  # the previous output (only with a mask that repeats it), else None
    fast: Any  # the form's carry: `_Matrix` or `_History`

    def flat(self):
        """`[h, last output (if kept), *the form's carry]`, the list the backend loop takes."""
        kept = [] if self.last_output is None else [self.last_output]
        return [self.h, *kept, *self.fast]

    @classmethod
    def unflat(cls, values, keep_output, form):
        """The `_Carry` of a list made by `flat`.

        Args:
            values: The flat list.
            keep_output: Whether it holds the last output (second).
            form: The `MatrixForm` or `MemoryForm` whose carry the rest is.
        """
        h, *rest = values
        last_output = rest.pop(0) if keep_output else None
        return cls(h, last_output, form.carry(*rest))


def _pad_to_chunks(inputs, mask, batch):
    """An unknown length: `(inputs, mask, steps)` padded with masked steps to whole chunks.

    `steps`: the length before padding (a tensor, or a symbolic dimension on JAX).
    """
    steps = ops.shape(inputs)[1]
    pad = padding_to_multiple(steps, CHUNK)
    if mask is None:
        mask = ops.ones((batch, steps), dtype="bool")
    padding = ops.zeros((batch, pad, inputs.shape[-1]), inputs.dtype)
    inputs = ops.concatenate([inputs, padding], 1)
    mask = ops.concatenate([mask, ops.zeros((batch, pad), "bool")], 1)
    return inputs, mask, steps


def _loop_inputs(inputs, mask, batch, chunk, n_chunks):
    """The first `n_chunks` chunks as one tensor `(B, n_chunks, chunk, F)` (`None`: all).

    The float mask travels as one more feature: Keras's TensorFlow loop wants one tensor.
    """
    features = inputs.shape[-1]
    main = None if n_chunks is None else n_chunks * chunk
    # A static chunk count where there is one (never -1: with an unknown batch size
    # TensorFlow would lose the static length).
    count = -1 if n_chunks is None else n_chunks
    body = ops.reshape(inputs[:, :main], (batch, count, chunk, features))
    if mask is None:
        return body
    return ops.concatenate([body, ops.reshape(mask[:, :main], (batch, count, chunk, 1))], -1)


def _chunk_step(recurrence, form, features, masked, keep_output):
    """The step function of the backend loop: one chunk, `(inputs, states) -> (outputs,
    states)`, the states being a flat `_Carry`."""

    def step(inputs, states):
        x, mask = inputs, None
        if masked:
            x, mask = inputs[..., :features], inputs[..., features]
        carry = _Carry.unflat(states, keep_output, form)
        chunk = _run_chunk(recurrence, x, mask, carry.h, carry.last_output, form.apply(carry.fast))
        kept = chunk.last_output if keep_output else None
        return chunk.outputs, _Carry(chunk.h, kept, form.write(carry.fast, chunk)).flat()

    return step


def fast_weights_loop(
    step_function,
    inputs,
    h0,
    a0=None,
    *,
    decay,
    learning_rate,
    mask=None,
    implementation="matrix",
    zero_output_for_mask=False,
    return_sequences=False,
    xla=False,
):
    """Runs a fast-weights recurrence over a sequence, `CHUNK` steps per loop iteration.

    At every step `t`, `h(t+1) = step_function(inputs[:, t], h(t), fast_apply)` with
    `fast_apply(v) = A(t)·v`, then `A(t+1) = decay·A(t) + learning_rate·h(t+1) h(t+1)ᵀ`.
    Masked steps neither change `h` nor write or decay `A`; they output the previous output
    (zeros with `zero_output_for_mask`, and before the first unmasked step), as in
    `keras.layers.RNN`. Plans the loop with `keras_normkit.ops.fast_weights_plan.plan`, then
    runs it (`run_planned_loop`).

    Args:
        step_function: `(x_t, h, fast_apply) -> new h`, with `x_t` `(B, F)`, `h` `(B, H)`
            and `fast_apply` a function `(B, H) -> (B, H)`; called once per step while the
            loop is traced. Anything else it reads (weights, dropout masks) comes from its
            closure, as tensors.
        inputs: `(B, T, F)` tensor, the step inputs; `T` may be unknown.
        h0: `(B, H)` initial state.
        a0: `(B, H, H)` initial fast weights, or `None` for zeros (the memory form then
            skips the `A(0)·v` term).
        decay: Float `λ` in [0, 1].
        learning_rate: Float `η >= 0`, the Hebbian learning rate.
        mask: Optional boolean `(B, T)`, `False` for the steps to skip.
        implementation: `"matrix"` (carries `A`) or `"memory"` (carries the history of
            states; see the module docstring), same results.
        zero_output_for_mask: Whether masked steps output zeros.
        return_sequences: Whether to return the outputs of every step.
        xla: Whether XLA compiles the loop (short sequences then run one step per
            iteration, see `chunk_size`).

    Returns:
        `(last_output, outputs, h, A)`: `(B, H)`, `(B, T, H)` or `None` without
        `return_sequences`, `(B, H)` and `(B, H, H)`.
    """
    check_choice("implementation", implementation, FORMS)
    loop_plan = plan(
        static_steps(inputs), h0.shape[-1], implementation, **mode_flags("xla" if xla else "plain")
    )
    return run_planned_loop(
        step_function,
        inputs,
        h0,
        a0,
        loop_plan,
        decay=decay,
        learning_rate=learning_rate,
        mask=mask,
        zero_output_for_mask=zero_output_for_mask,
        return_sequences=return_sequences,
    )


def run_planned_loop(
    step_function,
    inputs,
    h0,
    a0,
    loop_plan,
    *,
    decay,
    learning_rate,
    mask=None,
    zero_output_for_mask=False,
    return_sequences=False,
):
    """`fast_weights_loop` for a plan made by the caller (`fast_weights_plan.plan`).

    Args:
        step_function: As in `fast_weights_loop`.
        inputs: `(B, T, F)` tensor, `T` being `loop_plan.steps` (`None`: unknown).
        h0: `(B, H)` initial state.
        a0: `(B, H, H)` initial fast weights, or `None` for zeros.
        loop_plan: A `LoopPlan`: the form, the chunk and the loops to run.
        decay: As in `fast_weights_loop`.
        learning_rate: As in `fast_weights_loop`.
        mask: As in `fast_weights_loop`.
        zero_output_for_mask: As in `fast_weights_loop`.
        return_sequences: As in `fast_weights_loop`.

    Returns:
        As `fast_weights_loop`.
    """
    recurrence = _Recurrence(
        step_function,
        check_number("decay", decay, 0.0, 1.0),
        check_number("learning_rate", learning_rate, 0.0),
        bool(zero_output_for_mask),
    )
    batch, features, units = ops.shape(inputs)[0], inputs.shape[-1], h0.shape[-1]
    dtype = inputs.dtype
    steps, chunk, n_chunks, segments = (
        loop_plan.steps,
        loop_plan.chunk,
        loop_plan.n_chunks,
        loop_plan.segments,
    )
    if steps is None:  # unknown length: whole chunks of masked steps
        inputs, mask, unpadded_steps = _pad_to_chunks(inputs, mask, batch)
    float_mask = None if mask is None else ops.cast(mask, dtype)
    keep_output = float_mask is not None and not zero_output_for_mask
    body = _loop_inputs(inputs, float_mask, batch, chunk, n_chunks)
    if loop_plan.form == "memory":
        form = MemoryForm(a0, batch, units, dtype, chunk)
    else:
        form = MatrixForm(a0, batch, units, dtype)
    carry = _Carry(h0, ops.zeros((batch, units), dtype) if keep_output else None, None)
    step = _chunk_step(recurrence, form, features, float_mask is not None, keep_output)
    all_outputs = return_sequences or steps is None
    segment_outputs = []
    for start, stop in segments:
        # The form's carry into this loop (the memory form's: a buffer of `stop` slots).
        slots = ops.shape(body)[1] if stop is None else stop
        carry = _Carry(carry.h, carry.last_output, form.init(start, slots, carry.fast))
        last, outputs, states = backend_rnn(
            step,
            body if len(segments) == 1 else body[:, start:stop],
            carry.flat(),
            mask=None,
            unroll=False,
            input_length=None if stop is None else stop - start,
            return_all_outputs=all_outputs,
        )
        carry = _Carry.unflat(states, keep_output, form)
        segment_outputs.append(outputs)
    if len(segments) > 1 and all_outputs:
        outputs = ops.concatenate(segment_outputs, axis=1)
    h, a = carry.h, form.finalize(carry.fast)
    last = last[:, -1]
    if all_outputs:
        length = -1 if n_chunks is None else n_chunks * chunk
        outputs = ops.reshape(outputs, (batch, length, units))
    if loop_plan.tail:
        # The last `tail < chunk` steps, outside the loop, on the matrix.
        main = n_chunks * chunk
        matrix = MatrixForm(a, batch, units, dtype)
        fast = matrix.init(0, None)
        chunk_out = _run_chunk(
            recurrence,
            inputs[:, main:],
            None if float_mask is None else float_mask[:, main:],
            h,
            carry.last_output,
            matrix.apply(fast),
        )
        h, a = chunk_out.h, matrix.finalize(matrix.write(fast, chunk_out))
        last = chunk_out.outputs[:, -1]
        if return_sequences:
            outputs = ops.concatenate([outputs, chunk_out.outputs], axis=1)
    if steps is None:
        outputs = outputs[:, :unpadded_steps]  # drop the padding
        last = outputs[:, -1]
    return last, (outputs if return_sequences else None), h, a
