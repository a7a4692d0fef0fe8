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

In this module: `fast_weights_loop` plans the chunks (`chunk_size`, `_pad_to_chunks`,
`_loop_inputs`, `memory_segments`) and runs the backend loop over them with `_chunk_step`,
one iteration: `_run_chunk` unrolls the chunk's steps (each calling the caller's step with
`_fast_apply_in_chunk`), then the form writes `A(t0)`'s next value (`_matrix_apply` /
`_matrix_write` for the matrix, `_history_*` for the memory form); the tail runs
`_run_chunk` once more, on the matrix. Nothing is stored between calls.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from keras import ops

from keras_normkit._validation import check_choice, check_number
from keras_normkit.backend.keras_compat import backend_rnn
from keras_normkit.ops._shapes import padding_to_multiple

__all__ = [
    "CHUNK",
    "chunk_size",
    "fast_weights_loop",
    "matvec",
    "memory_segments",
    "static_steps",
]

# Steps per iteration of the time loop (see `chunk_size`).
CHUNK = 8

# The memory form's consecutive loops (see `memory_segments`): at most this many, of at
# least `_CHUNKS_PER_LOOP` chunks each.
_MAX_LOOPS = 4
_CHUNKS_PER_LOOP = 3


def static_steps(x):
    """The length of the time axis (axis 1) of `x` as a Python int, or `None` if unknown.

    Unknown is `None` in a TensorFlow graph and in a Keras functional model, and a symbolic
    dimension when JAX exports with a polymorphic shape (`model.export` of a `None` time
    axis): both run the unknown-length path (no Python comparison on the length).
    """
    steps = x.shape[1]
    return steps if isinstance(steps, int) else None


def memory_segments(n_chunks):
    """The memory form's loops over `n_chunks` chunks: `[(first chunk, end chunk), ...]`.

    `min(4, n_chunks // 3)` consecutive loops of (nearly) equal length, one loop below 6
    chunks. Loop `i` attends over a history buffer of `end_i` chunks; with `k` equal loops
    the attention work (and the history back-propagation stores) is `(k + 1) / (2k)` of
    one loop over the full buffer. More loops cut that work further, but each loop
    compiles on its own under XLA, so the first step's compile time grows with their
    number: hence at most four (`benchmarks/DECISIONS.md#fast-weights-memory-loops`).
    """
    if n_chunks is None or n_chunks < 2 * _CHUNKS_PER_LOOP:
        return [(0, n_chunks)]
    loops = min(_MAX_LOOPS, n_chunks // _CHUNKS_PER_LOOP)
    edges = [round(i * n_chunks / loops) for i in range(loops + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def chunk_size(steps, xla):
    """Steps per loop iteration for a static length `steps`; `xla`: XLA compiles the loop.

    Sequences of up to 12 steps have no tail after the loop (one chunk trained faster
    than a chunk of 8 plus a short tail). Without XLA they run as one chunk; under XLA
    (`jit_compile`, JAX, the layer's XLA clusters) as one step per iteration: an unrolled
    chunk's intra-chunk products grow as the square of the chunk, and XLA compiles such a
    chunk and its gradient many times slower than the loop of single steps, whose train
    step is as fast (`benchmarks/DECISIONS.md#fast-weights-chunk`). That loop carries at
    most 12 `A` (or histories of 12 states) for back-propagation.
    """
    if steps > CHUNK * 3 // 2:
        return CHUNK
    return 1 if xla else max(1, steps)


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


def _matrix_apply(a):
    """`global_apply(v, d) = d·A·v` for the matrix `A` at the chunk's start."""
    return lambda v, d: _scaled(matvec(a, v), d)


def _matrix_write(a, chunk):
    """`A(t0 + c) = d·A(t0) + Σ_j w_j h_j h_jᵀ`, once per chunk."""
    decay = chunk.decay if isinstance(chunk.decay, float) else chunk.decay[:, :, None]
    weighted = ops.swapaxes(chunk.states * chunk.weights[:, :, None], 1, 2)
    return decay * a + ops.matmul(weighted, chunk.states)


def _empty_history(batch, n_slots, chunk, units, dtype):
    """The memory form's carry before any step: `[states, weights, position, scale]`.

    `states` `(B, slots, chunk, H)` and their weights `(B, slots, chunk)` in `A`, one slot
    per chunk, all zero; `position` (1 at the slot the next chunk writes); `scale`
    `(B, 1)`, the decay of `A(0)` so far.
    """
    return [
        ops.zeros((batch, n_slots, chunk, units), dtype),
        ops.zeros((batch, n_slots, chunk), dtype),
        ops.cast(ops.arange(n_slots) == 0, dtype)[None, :],
        ops.ones((batch, 1), dtype),
    ]


def _grown_history(history, start, stop, dtype):
    """The history carried into the loop over chunks `start:stop`: `stop` slots."""
    states, weights, _, scale = history
    grow = stop - start
    return [
        ops.pad(states, [[0, 0], [0, grow], [0, 0], [0, 0]]),
        ops.pad(weights, [[0, 0], [0, grow], [0, 0]]),
        ops.cast(ops.arange(stop) == start, dtype)[None, :],
        scale,
    ]


def _history_apply(history, a0, batch, units):
    """`global_apply(v, d) = d·A·v`, `A = Σ_τ w_τ h(τ) h(τ)ᵀ + scale·A(0)` (`a0=None`: 0)."""
    states, weights, _, scale = history
    flat_h = ops.reshape(states, (batch, -1, units))
    flat_w = ops.reshape(weights, (batch, -1))

    def global_apply(v, d):
        scores = ops.squeeze(ops.matmul(flat_h, v[:, :, None]), -1) * flat_w
        out = ops.squeeze(ops.matmul(scores[:, None, :], flat_h), 1)
        if a0 is not None:
            out = out + scale * matvec(a0, v)
        return _scaled(out, d)

    return global_apply


def _history_write(history, chunk):
    """The chunk's states and weights into the slot at `position`; older weights decayed."""
    states, weights, position, scale = history
    decay = chunk.decay if isinstance(chunk.decay, float) else chunk.decay[:, :, None]
    new = position[:, :, None] > 0
    weights = ops.where(new, chunk.weights[:, None, :], weights * decay)
    states = ops.where(new[..., None], chunk.states[:, None], states)
    position = ops.pad(position[:, :-1], [[0, 0], [1, 0]])
    return [states, weights, position, scale * chunk.decay]


def _history_matrix(history, a0, batch, units):
    """`A = Σ_τ w_τ h(τ) h(τ)ᵀ + scale·A(0)`, formed once, after the loop."""
    states, weights, _, scale = history
    flat_h = ops.reshape(states, (batch, -1, units))
    a = ops.einsum("bti,btj->bij", flat_h * ops.reshape(weights, (batch, -1, 1)), flat_h)
    if a0 is not None:
        a = a + scale[:, :, None] * a0
    return a


# -- the loop -------------------------------------------------------------------------------


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


def _chunk_step(recurrence, memory, a0, batch, units, features, masked, keep_output):
    """The step function of the backend loop: one chunk, `(inputs, states) -> (outputs,
    states)`.

    The loop's states are `[h, last output (if kept), *carry]`, the carry being `[A]` in
    the matrix form and the history (`_empty_history`) in the memory form.
    """

    def step(inputs, states):
        x, mask = inputs, None
        if masked:
            x, mask = inputs[..., :features], inputs[..., features]
        h, *carry = states
        last_output = carry.pop(0) if keep_output else None
        if memory:
            global_apply = _history_apply(carry, a0, batch, units)
        else:
            global_apply = _matrix_apply(carry[0])
        chunk = _run_chunk(recurrence, x, mask, h, last_output, global_apply)
        if memory:
            carry = _history_write(carry, chunk)
        else:
            carry = [_matrix_write(carry[0], chunk)]
        kept = [chunk.last_output] if keep_output else []
        return chunk.outputs, [chunk.h, *kept, *carry]

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
    `keras.layers.RNN`.

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
    check_choice("implementation", implementation, ("matrix", "memory"))
    recurrence = _Recurrence(
        step_function,
        check_number("decay", decay, 0.0, 1.0),
        check_number("learning_rate", learning_rate, 0.0),
        bool(zero_output_for_mask),
    )
    memory = implementation == "memory"
    batch, features, units = ops.shape(inputs)[0], inputs.shape[-1], h0.shape[-1]
    dtype = inputs.dtype
    steps = static_steps(inputs)
    if steps is None:  # unknown length: whole chunks of masked steps
        inputs, mask, unpadded_steps = _pad_to_chunks(inputs, mask, batch)
        chunk, n_chunks, tail = CHUNK, None, 0
    else:
        chunk = chunk_size(steps, xla)
        n_chunks, tail = divmod(steps, chunk)
    float_mask = None if mask is None else ops.cast(mask, dtype)
    keep_output = float_mask is not None and not zero_output_for_mask
    body = _loop_inputs(inputs, float_mask, batch, chunk, n_chunks)
    # Loops over consecutive ranges of chunks: the memory form's history fills up as
    # the sequence runs, so a long sequence runs several loops over growing buffers
    # (`memory_segments`). Not for the loops of single steps of short sequences
    # (`chunk_size`), never for the matrix form.
    segments = memory_segments(n_chunks) if memory and chunk == CHUNK else [(0, n_chunks)]
    kept = [ops.zeros((batch, units), dtype)] if keep_output else []  # the last output
    if memory:
        n_slots = segments[0][1] if n_chunks is not None else ops.shape(body)[1]
        carry = _empty_history(batch, n_slots, chunk, units, dtype)
    else:
        carry = [ops.zeros((batch, units, units), dtype) if a0 is None else a0]
    states = [h0, *kept, *carry]
    step = _chunk_step(
        recurrence, memory, a0, batch, units, features, float_mask is not None, keep_output
    )
    all_outputs = return_sequences or steps is None
    segment_outputs = []
    for start, stop in segments:
        if start > 0:  # the memory form's next loop: a buffer of `stop` slots
            states = [*states[:-4], *_grown_history(states[-4:], start, stop, dtype)]
        last, outputs, states = backend_rnn(
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
    last_output = states[1] if keep_output else None
    a = _history_matrix(states[-4:], a0, batch, units) if memory else states[-1]
    last = last[:, -1]
    if all_outputs:
        length = -1 if n_chunks is None else n_chunks * chunk
        outputs = ops.reshape(outputs, (batch, length, units))
    if tail:
        # The last `tail < chunk` steps, outside the loop, on the matrix.
        main = n_chunks * chunk
        chunk_out = _run_chunk(
            recurrence,
            inputs[:, main:],
            None if float_mask is None else float_mask[:, main:],
            h,
            last_output,
            _matrix_apply(a),
        )
        h, a = chunk_out.h, _matrix_write(a, chunk_out)
        last = chunk_out.outputs[:, -1]
        if return_sequences:
            outputs = ops.concatenate([outputs, chunk_out.outputs], axis=1)
    if steps is None:
        outputs = outputs[:, :unpadded_steps]  # drop the padding
        last = outputs[:, -1]
    return last, (outputs if return_sequences else None), h, a
