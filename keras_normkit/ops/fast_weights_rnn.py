"""The engine of `keras_normkit.layers.FastWeightsRNN`: how a whole sequence runs.

`keras_normkit.ops.fast_weights_loop` is the time loop; this module plans and runs it for a
sequence, given tensors and a step function (never a layer):

1. `project_inputs`: the input projection `C·x + bias` of every step in one matmul, before
   the loop, in processing order (reversed, with its mask, for `go_backwards`).
2. `loop_mode`: how the loop will run. `"xla_clusters"` in a TensorFlow training call with
   a static number of steps, traced into a graph that XLA does not compile (`fit` with the
   CPU default `jit_compile="auto"`): without XLA the loop is hundreds of small kernels per
   step, so it runs as one XLA cluster, and its gradient as a second one that recomputes
   the forward pass (`keras_normkit.backend.tensorflow_xla.xla_compiled`). Never for an
   unknown `T` (XLA would compile again for every new length), eager calls, inference or
   `tf.distribute`, so exported SavedModels never need XLA
   (`benchmarks/DECISIONS.md#tensorflow-xla-clusters`). `"xla"` when the whole
   computation is XLA-compiled (`jit_compile=True`, JAX); `"plain"` otherwise (eager,
   inference without `jit_compile`, PyTorch).
3. `choose_implementation`: what `implementation="auto"` runs: the memory form when the
   time axis is static, `units >= min_units` and `T <= ratio * units`, with
   `(min_units, ratio)` per mode (`_AUTO_MEMORY_RULE`), else the matrix form; always the
   matrix form for a stateful layer. The memory form's work grows with `T`, the matrix
   form's with `units`, and the crossover depends on how the loop runs; the rule follows
   the crossovers measured with `benchmarks/bench_fast_weights.py` (grid section), so that
   `"auto"` stays close to the faster form (`benchmarks/DECISIONS.md#fast-weights-auto-form`).
4. `fast_weights_rnn`: all of it, then `fast_weights_loop` with the caller's step, as XLA
   clusters in the `"xla_clusters"` mode.

The step's weights travel as named tensors (`step_tensors`) and reach the step function as
keyword arguments, so that the loop can run as an XLA cluster, which reads no variable: the
caller reads its weights (e.g. under a layer's autocast scope) and passes their values.
"""

from keras import ops

from keras_normkit._validation import check_choice
from keras_normkit.backend.tensorflow_xla import can_compile_cluster, xla_compiled, xla_compiling
from keras_normkit.ops.fast_weights_loop import fast_weights_loop, static_steps

__all__ = [
    "IMPLEMENTATIONS",
    "MODES",
    "choose_implementation",
    "fast_weights_rnn",
    "loop_mode",
    "project_inputs",
]

IMPLEMENTATIONS = ("auto", "matrix", "memory")
MODES = ("plain", "xla_clusters", "xla")

# `implementation="auto"`: the memory form iff the time axis is static and
# units >= min_units and T <= ratio * units, with (min_units, ratio) per mode (see the
# module docstring; the measurement: benchmarks/DECISIONS.md#fast-weights-auto-form).
_AUTO_MEMORY_RULE = {"plain": (64, 0.8), "xla_clusters": (48, 1.2), "xla": (48, 1.3)}

# The names under which `fast_weights_rnn` passes its own tensors to the loop.
_LOOP_TENSORS = ("inputs", "h0", "a0", "mask")


def loop_mode(sequences, training=False):
    """How the loop over `sequences` `(B, T, F)` runs now: one of `MODES`.

    `"xla_clusters"` for a TensorFlow training call with a static `T` in a graph that XLA
    does not compile; `"xla"` while the backend compiles with XLA (`jit_compile=True`, JAX);
    else `"plain"`. Ask it while tracing, where the loop is built.
    """
    if training and static_steps(sequences) is not None and can_compile_cluster():
        return "xla_clusters"
    return "xla" if xla_compiling() else "plain"


def choose_implementation(implementation, units, timesteps, mode=None, stateful=False):
    """The form, `"matrix"` or `"memory"`, run for `implementation` (one of `IMPLEMENTATIONS`).

    Args:
        implementation: `"auto"`, `"matrix"` or `"memory"`; the last two are returned as is.
        units: The state's size `H`.
        timesteps: `T` as a Python int, or `None` if unknown.
        mode: One of `MODES`; `None`: `"xla"` if the backend is compiling with XLA while
            tracing, else `"plain"`.
        stateful: Whether the state carries over between calls (then the matrix form).
    """
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    if implementation != "auto":
        return implementation
    if stateful or timesteps is None:
        return "matrix"
    if mode is None:
        mode = "xla" if xla_compiling() else "plain"
    check_choice("mode", mode, MODES)
    min_units, ratio = _AUTO_MEMORY_RULE[mode]
    if units >= min_units and timesteps <= ratio * units:
        return "memory"
    return "matrix"


def project_inputs(sequences, kernel, bias=None, mask=None, go_backwards=False):
    """`(C·x + bias, mask)` for every step at once, in processing order.

    Args:
        sequences: `(B, T, F)` tensor.
        kernel: `(F, H)` input kernel `C`.
        bias: Optional `(H,)` bias.
        mask: Optional `(B, T)` boolean mask.
        go_backwards: Whether the sequence is processed backwards: the projection and the
            mask are then reversed along the time axis.
    """
    projected = ops.matmul(sequences, kernel)
    if bias is not None:
        projected = projected + bias
    if go_backwards:
        projected = ops.flip(projected, axis=1)
        mask = None if mask is None else ops.flip(mask, axis=1)
    return projected, mask


def fast_weights_rnn(
    step_function,
    sequences,
    kernel,
    h0,
    a0=None,
    *,
    decay,
    learning_rate,
    bias=None,
    step_tensors=None,
    mask=None,
    implementation="matrix",
    mode="plain",
    go_backwards=False,
    zero_output_for_mask=False,
    return_sequences=False,
):
    """A fast-weights recurrence over a sequence: projection, then the loop in `mode`.

    At every step `t` (in processing order),
    `h(t+1) = step_function(x_t, h(t), fast_apply, **step_tensors)` with `x_t = C·x(t) +
    bias` and `fast_apply(v) = A(t)·v`, then `A(t+1) = decay·A(t) +
    learning_rate·h(t+1) h(t+1)ᵀ` (`keras_normkit.ops.fast_weights_loop`).

    Args:
        step_function: `(x_t, h, fast_apply, **step_tensors) -> new h`; called while the
            loop is traced. It must read no variable (its weights come in `step_tensors`).
        sequences: `(B, T, F)` tensor; `T` may be unknown.
        kernel: `(F, H)` input kernel `C`.
        h0: `(B, H)` initial state.
        a0: `(B, H, H)` initial fast weights, or `None` for zeros.
        decay: Float `λ` in [0, 1].
        learning_rate: Float `η >= 0`.
        bias: Optional `(H,)` bias of the projection.
        step_tensors: Optional dict `{name: tensor or None}` passed to `step_function` by
            keyword; `None` values are left out (the step's defaults apply).
        mask: Optional boolean `(B, T)`, `False` for the steps to skip.
        implementation: `"matrix"` or `"memory"` (see `choose_implementation`).
        mode: One of `MODES` (see `loop_mode`): `"xla_clusters"` runs the loop as XLA
            clusters; `"xla"` and `"xla_clusters"` tell the loop that XLA compiles it.
        go_backwards: Whether to process the sequence backwards (outputs in that order).
        zero_output_for_mask: Whether masked steps output zeros.
        return_sequences: Whether to return the outputs of every step.

    Returns:
        `(last_output, outputs, h, A)`: `(B, H)`, `(B, T, H)` or `None` without
        `return_sequences`, `(B, H)` and `(B, H, H)`.
    """
    check_choice("mode", mode, MODES)
    step_tensors = dict(step_tensors or {})
    clash = sorted(set(step_tensors) & set(_LOOP_TENSORS))
    if clash:
        raise ValueError(f"`step_tensors` may not use the names {_LOOP_TENSORS}. Received: {clash}")
    inputs, mask = project_inputs(sequences, kernel, bias, mask, go_backwards)
    tensors = {"inputs": inputs, "h0": h0, "a0": a0, "mask": mask, **step_tensors}
    names = [name for name, value in tensors.items() if value is not None]

    def run(*values):
        given = dict(zip(names, values, strict=True))
        loop = {name: given.pop(name, None) for name in _LOOP_TENSORS}

        def step(x_t, h, fast_apply):
            return step_function(x_t, h, fast_apply, **given)

        last, outputs, h, a = fast_weights_loop(
            step,
            loop["inputs"],
            loop["h0"],
            loop["a0"],
            decay=decay,
            learning_rate=learning_rate,
            mask=loop["mask"],
            implementation=implementation,
            zero_output_for_mask=zero_output_for_mask,
            return_sequences=return_sequences,
            xla=mode != "plain",
        )
        return (last, h, a) if outputs is None else (last, h, a, outputs)

    if mode == "xla_clusters":
        run = xla_compiled(run)
    last, h, a, *outputs = run(*(tensors[name] for name in names))
    return last, (outputs[0] if outputs else None), h, a
