"""The time loop of `keras_normkit.layers.FastWeightsRNN`: 8 steps per iteration, two forms.

The layer (`keras_normkit/layers/fast_weights.py`) holds the formula of Ba et al. (2016),
`b = W h(t) + C x(t) + bias`, `h_0 = f(b)`, `h_{s+1} = f(LN(b + A(t) h_s))`,
`h(t+1) = h_S`, `A(t+1) = lambda A(t) + eta h(t+1) h(t+1)^T`, its weights and config, and
chooses the implementation; this module runs that recurrence over a sequence fast.

Chunks. The loop runs `CHUNK` = 8 steps per iteration (a sequence of up to 12 steps is one
chunk, or one step per iteration when XLA compiles the loop, see `ChunkedLoop.chunk_size`;
with a static `T` the last `T mod 8` steps run after the loop; an unknown `T` is padded with
masked steps to whole chunks). Inside a chunk starting at `t0`,
`A(t0 + k) v = lambda^{n_k} A(t0) v + eta sum_{j<k} lambda^{n_k - n_j - 1} h_j (h_j^T v)`
(`n_k`: unmasked steps of the chunk before step `k`; masked steps neither write nor decay),
so the chunk's own new states are applied from a small stack and `A` is written once per
chunk: the loop carries, and back-propagation stores, `A` once per 8 steps instead of once
per step, and the per-step rank-one write of `A` disappears.

Matrix vs memory forms (`ChunkedLoop(cell, implementation, ...)`), algebraically equal:

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
full-length buffer: with `k` equal loops the work is `(k + 1) / (2k)` of one loop's.

The loop itself is the backend's RNN loop (`keras_normkit.backend.keras_compat.backend_rnn`,
what `keras.layers.RNN` runs), so it compiles with XLA and exports like a Keras RNN.
"""

from keras import ops

from keras_normkit.backend.keras_compat import backend_rnn
from keras_normkit.ops._shapes import padding_to_multiple

__all__ = ["CHUNK", "ChunkedLoop", "matvec", "memory_segments", "static_steps"]

# Steps per iteration of the time loop (see `ChunkedLoop`).
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
    one loop over the full buffer. Measured (`benchmarks/bench_fast_weights.py` models,
    B 64, one process, interleaved, train step / an LSTM's, without / with jit_compile):
    T 200, 256 units: two loops 1.46-1.59x, four 1.26-1.33x, six 1.13-1.24x (without);
    T 50, 128 units: one loop 1.33x / 1.23x, two 1.25x / 1.13x, three 1.15x / 1.14x. Each
    loop compiles on its own under XLA (first step at T 200: 25 s with two loops, 54 s with
    four, 97 s with six), hence at most four.
    """
    if n_chunks is None or n_chunks < 2 * _CHUNKS_PER_LOOP:
        return [(0, n_chunks)]
    loops = min(_MAX_LOOPS, n_chunks // _CHUNKS_PER_LOOP)
    edges = [round(i * n_chunks / loops) for i in range(loops + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def matvec(a, v):
    """`A·v` for a batch of matrices `(B, H, H)` and vectors `(B, H)`."""
    return ops.squeeze(ops.matmul(a, v[:, :, None]), -1)


def _scaled(x, d):
    """`d·x`, skipping the product for the Python float 1."""
    return x if isinstance(d, float) and d == 1.0 else x * d


class ChunkedLoop:
    """The `FastWeightsRNN` recurrence, run `chunk` steps per iteration of the time loop.

    Inside a chunk that starts at step `t0`, the fast weights are
    `A(t0 + k) = λ^{n_k}·A(t0) + η Σ_{j<k} λ^{n_k - n_j - 1} h_j h_jᵀ` (`n_k`: unmasked steps
    of the chunk before step `k`; masked steps neither write nor decay), so the `k` states
    written so far in the chunk are applied directly from a small stack and `A` — or, in the
    memory form, the history of states — is updated once per chunk. The loop then carries
    (and back-propagation stores) the `(B, H, H)` matrix or the `(B, T, H)` history once per
    chunk instead of once per step, and the per-step write of `A` disappears.
    """

    def __init__(
        self, cell, implementation, zero_output_for_mask, zero_initial_fast_weights, xla=False
    ):
        self.cell = cell
        self.implementation = implementation
        self.xla = xla  # whether XLA compiles the loop (see `chunk_size`)
        self.zero_output_for_mask = zero_output_for_mask
        self.with_a0 = not zero_initial_fast_weights
        self.tensors = None  # set by `__call__`

    def chunk_size(self, steps):
        """Steps per loop iteration for a static length `steps`.

        Sequences of up to 12 steps have no tail after the loop (`T = 11` trained 1.6x
        faster as one chunk than as a chunk of 8 plus a tail of 3, XLA, CPU). Without XLA
        they run as one chunk; under XLA (`jit_compile`, JAX, the layer's XLA clusters) as
        one step per iteration: XLA took 20-28 s to compile an unrolled chunk of 12 steps
        (its intra-chunk products grow as the square of the chunk) and its gradient, and
        ~2 s for the loop of single steps, whose train step is as fast
        (`benchmarks/bench_fast_weights.py --section first`). That loop carries at most 12
        `A` (or histories of 12 states) for back-propagation.
        """
        if steps > CHUNK * 3 // 2:
            return CHUNK
        return 1 if self.xla else max(1, steps)

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
        return lambda v, d: _scaled(matvec(a, v), d)

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
        steps = static_steps(projected)
        if steps is None:
            # Unknown length: pad to whole chunks with masked steps.
            chunk = CHUNK
            steps_t = ops.shape(projected)[1]
            pad = padding_to_multiple(steps_t, chunk)
            if mask is None:
                mask = ops.ones((batch, steps_t), dtype="bool")
            projected = ops.concatenate([projected, ops.zeros((batch, pad, units), dtype)], 1)
            mask = ops.concatenate([mask, ops.zeros((batch, pad), "bool")], 1)
            n_chunks, tail = None, 0
        else:
            chunk = self.chunk_size(steps)
            n_chunks, tail = divmod(steps, chunk)
        m = None if mask is None else ops.cast(mask, dtype)
        keep_out = m is not None and not self.zero_output_for_mask
        main = None if n_chunks is None else n_chunks * chunk
        # A static chunk count where there is one (never -1: with an unknown batch size
        # TensorFlow would lose the static length).
        count = -1 if n_chunks is None else n_chunks
        body_x = ops.reshape(projected[:, :main], (batch, count, chunk, units))
        body = body_x  # the mask travels as one more feature: keras' TF loop wants one tensor
        if m is not None:
            body = ops.concatenate([body_x, ops.reshape(m[:, :main], (batch, count, chunk, 1))], -1)
        out_prev0 = ops.zeros((batch, units), dtype)
        memory = self.implementation == "memory"
        # Loops over consecutive ranges of chunks: the memory form's history fills up as
        # the sequence runs, so a long sequence runs several loops over growing buffers
        # (`memory_segments`). Not for the loops of single steps of short sequences
        # (`chunk_size`), never for the matrix form.
        segments = [(0, n_chunks)]
        if memory and chunk == CHUNK:
            segments = memory_segments(n_chunks)
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
                        out = out + scale * matvec(a0, v)
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
            outputs = ops.reshape(outputs, (batch, -1 if main is None else main, units))
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
