"""How `keras_normkit.layers.FastWeightsRNN` runs a sequence: every rule in one pure function.

`plan(steps, units, implementation, stateful=, training=, xla=, clusters=)` answers, from
Python values alone (no tensor, no backend query), everything the engine
(`keras_normkit.ops.fast_weights_rnn.run_fast_weights`) and its time loop
(`keras_normkit.ops.fast_weights_loop`) decide before they trace anything, as a `LoopPlan`:

| decision | rule, first match wins | why |
|---|---|---|
| `mode` | `"xla"` if XLA compiles the whole computation (`xla`) | |
| | `"xla_clusters"` if `training`, `steps` is known and `clusters` | [tensorflow-xla-clusters] |
| | else `"plain"` | |
| `form` | `implementation` itself if it is `"matrix"` or `"memory"` | |
| | `"matrix"` if `stateful` | the state carries `A` |
| | `"matrix"` if `steps` is unknown | |
| | `"memory"` if `units >= min_units` and `steps <= ratio·units`, `(min_units, ratio)` per `mode` in `AUTO_MEMORY_RULE` | [fast-weights-auto-form] |
| | else `"matrix"` | |
| `chunk` | `CHUNK` (8) if `steps` is unknown or `steps > 12` | [fast-weights-chunk] |
| | `1` if `mode != "plain"` (XLA compiles the loop) | [fast-weights-chunk] |
| | else `steps` (one chunk, no tail) | |
| `segments` | `memory_segments(steps // chunk)` for the memory form with `chunk == CHUNK` | [fast-weights-memory-loops] |
| | else one loop over every chunk, `((0, steps // chunk),)` (`(0, None)`: unknown) | |

([name]: the entry `name` of `benchmarks/DECISIONS.md`, where each rule was measured.) The last
`steps mod chunk` steps (`LoopPlan.tail`) run after the loop, on the matrix.

`plan` is the only place these rules live: `loop_mode`, `choose_implementation` (in
`keras_normkit.ops.fast_weights_rnn`), `chunk_size` and `memory_segments` answer one
column of it each, for the callers that ask one question.
"""

from typing import NamedTuple

from keras_normkit._validation import check_choice

__all__ = [
    "AUTO_MEMORY_RULE",
    "CHUNK",
    "FORMS",
    "IMPLEMENTATIONS",
    "MODES",
    "LoopPlan",
    "chunk_size",
    "memory_segments",
    "mode_flags",
    "plan",
]

IMPLEMENTATIONS = ("auto", "matrix", "memory")
FORMS = ("matrix", "memory")
MODES = ("plain", "xla_clusters", "xla")

# Steps per iteration of the time loop (see `chunk_size`).
CHUNK = 8

# `implementation="auto"`: the memory form iff the time axis is static and
# units >= min_units and T <= ratio * units, with (min_units, ratio) per mode
# (benchmarks/DECISIONS.md#fast-weights-auto-form).
AUTO_MEMORY_RULE = {"plain": (64, 0.8), "xla_clusters": (48, 1.2), "xla": (48, 1.3)}

# The memory form's consecutive loops (see `memory_segments`): at most this many, of at
# least `_CHUNKS_PER_LOOP` chunks each.
_MAX_LOOPS = 4
_CHUNKS_PER_LOOP = 3


class LoopPlan(NamedTuple):
    """How one call runs its sequence (see the module docstring for the rules).

    Fields:
        steps: `T` as a Python int, or `None` if unknown.
        mode: One of `MODES`: `"xla_clusters"` runs the loop as XLA clusters inside a plain
            TensorFlow graph, `"xla"` when XLA compiles everything, else `"plain"`.
        form: `"matrix"` (carries `A`) or `"memory"` (carries the history of states).
        chunk: Steps per loop iteration.
        segments: The consecutive loops, `((first chunk, end chunk), ...)`; the end of the
            last is `None` for an unknown `T`.
    """

    steps: int | None
    mode: str
    form: str
    chunk: int
    segments: tuple

    @property
    def n_chunks(self):
        """The chunks the loops run (`None`: unknown `T`)."""
        return self.segments[-1][1]

    @property
    def tail(self):
        """The steps after the loop (`T mod chunk`; 0 for an unknown `T`, padded instead)."""
        return 0 if self.steps is None else self.steps - self.n_chunks * self.chunk


def plan(
    steps,
    units,
    implementation="auto",
    *,
    stateful=False,
    training=False,
    xla=False,
    clusters=False,
):
    """The `LoopPlan` of a call: mode, form, chunk and loops, by the table of the module.

    A pure function of Python values: it reads no tensor and asks no backend, so that
    every rule is tested on its own (`tests/ops/test_fast_weights_plan.py`); the engine asks
    the backend once and passes the answers in `xla` and `clusters`.

    Args:
        steps: `T` as a Python int, or `None` if unknown.
        units: The state's size `H`.
        implementation: One of `IMPLEMENTATIONS`; `"matrix"` and `"memory"` are kept as is.
        stateful: Whether the state carries over between calls (then the matrix form).
        training: Whether the call trains (only a training call runs as XLA clusters).
        xla: Whether XLA compiles the whole computation (`jit_compile=True`, JAX).
        clusters: Whether the backend can run the loop as XLA clusters here (a TensorFlow
            graph that XLA does not compile, outside `tf.distribute`).

    Returns:
        A `LoopPlan`.
    """
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    if xla:
        mode = "xla"
    elif training and steps is not None and clusters:
        mode = "xla_clusters"
    else:
        mode = "plain"
    form = _form(implementation, units, steps, mode, stateful)
    chunk = CHUNK if steps is None else chunk_size(steps, mode != "plain")
    n_chunks = None if steps is None else steps // chunk
    if form == "memory" and chunk == CHUNK:
        segments = memory_segments(n_chunks)
    else:
        segments = [(0, n_chunks)]
    return LoopPlan(steps, mode, form, chunk, tuple(segments))


def _form(implementation, units, steps, mode, stateful):
    """The `form` column of the table: `"matrix"` or `"memory"`."""
    if implementation != "auto":
        return implementation
    if stateful or steps is None:
        return "matrix"
    min_units, ratio = AUTO_MEMORY_RULE[mode]
    if units >= min_units and steps <= ratio * units:
        return "memory"
    return "matrix"


def memory_segments(n_chunks):
    """The memory form's loops over `n_chunks` chunks: `[(first chunk, end chunk), ...]`.

    `min(4, n_chunks // 3)` consecutive loops of (nearly) equal length, one loop below 6
    chunks. Loop `i` attends over a history buffer of `end_i` chunks; with `k` equal loops
    the attention work (and the history back-propagation stores) is `(k + 1) / (2k)` of
    one loop over the full buffer. More loops cut that work further, but each loop
    compiles on its own under XLA, so the first step's compile time grows with their
    number: hence at most four (`benchmarks/DECISIONS.md#fast-weights-memory-loops`).

    Args:
        n_chunks: The number of chunks, or `None` if unknown (then one loop).
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

    Args:
        steps: `T`, a positive Python int.
        xla: Whether XLA compiles the loop (`mode != "plain"`).
    """
    if steps > CHUNK * 3 // 2:
        return CHUNK
    return 1 if xla else max(1, steps)


def mode_flags(mode):
    """`plan`'s keyword arguments that give `mode` for a static `T` (one of `MODES`).

    For the callers that are told the mode rather than asked the backend
    (`choose_implementation`, `fast_weights_loop`).
    """
    check_choice("mode", mode, MODES)
    clusters = mode == "xla_clusters"
    return {"xla": mode == "xla", "training": clusters, "clusters": clusters}
