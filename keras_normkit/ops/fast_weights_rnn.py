"""The engine of `keras_normkit.layers.FastWeightsRNN`: how a whole sequence runs.

`keras_normkit.ops.fast_weights_loop` is the time loop and
`keras_normkit.ops.fast_weights_plan.plan` the rules that shape it; this module runs it for
a sequence, given tensors and a step function (never a layer). The layer makes one call,
`run_fast_weights`, which

1. reads the static length `T` once (`static_steps`) and asks the backend twice: whether XLA
   compiles the whole computation (`jit_compile=True`, JAX) and whether the loop could run
   as XLA clusters (a TensorFlow graph that XLA does not compile, outside `tf.distribute`);
2. plans the call (`plan`: the mode, the form `implementation="auto"` runs, the chunk, the
   memory form's loops; every rule and why in `keras_normkit.ops.fast_weights_plan`).
   `"xla_clusters"`: a TensorFlow training call with a static `T` in a graph that XLA does
   not compile (`fit` with the CPU default `jit_compile="auto"`): without XLA the loop is
   hundreds of small kernels per step, so it runs as one XLA cluster, and its gradient as a
   second one that recomputes the forward pass
   (`keras_normkit.backend.tensorflow_xla.xla_compiled`). Never for an unknown `T`, eager
   calls, inference or `tf.distribute`, so exported SavedModels never need XLA
   (`benchmarks/DECISIONS.md#tensorflow-xla-clusters`);
3. projects the inputs (`project_inputs`: `C·x + bias` of every step in one matmul, in
   processing order) and runs the planned loop (`run_planned_loop`), as XLA clusters in the
   `"xla_clusters"` mode.

`loop_mode` and `choose_implementation` answer one column of the plan each, for callers
that ask one question. `fast_weights_rnn` is the engine's name before 0.2 (the layer's name
in lower case), a deprecated alias of `run_fast_weights` told the form and the mode.

The step's weights travel as named tensors (`step_tensors`) and reach the step function as
keyword arguments, so that the loop can run as an XLA cluster, which reads no variable: the
caller reads its weights (e.g. under a layer's autocast scope) and passes their values.
"""

import warnings

from keras import ops

from keras_normkit._validation import check_choice
from keras_normkit.backend.tensorflow_xla import can_compile_cluster, xla_compiled, xla_compiling
from keras_normkit.ops.fast_weights_loop import run_planned_loop, static_steps
from keras_normkit.ops.fast_weights_plan import (
    FORMS,
    IMPLEMENTATIONS,
    MODES,
    LoopPlan,
    mode_flags,
    plan,
)

__all__ = [
    "IMPLEMENTATIONS",
    "MODES",
    "LoopPlan",
    "choose_implementation",
    "fast_weights_rnn",
    "loop_mode",
    "plan",
    "project_inputs",
    "run_fast_weights",
]

# The names under which the engine passes its own tensors to the loop.
_LOOP_TENSORS = ("inputs", "h0", "a0", "mask")


def _backend_flags():
    """What `plan` asks the backend: `xla` (XLA compiles everything) and `clusters`."""
    return {"xla": xla_compiling(), "clusters": can_compile_cluster()}


def loop_mode(sequences, training=False):
    """How the loop over `sequences` `(B, T, F)` runs now: one of `MODES` (`plan`'s `mode`).

    `"xla"` while the backend compiles with XLA (`jit_compile=True`, JAX);
    `"xla_clusters"` for a TensorFlow training call with a static `T` in a graph that XLA
    does not compile; else `"plain"`. Ask it while tracing, where the loop is built.

    Args:
        sequences: `(B, T, F)` tensor (only its static `T` is read).
        training: Whether the call trains.
    """
    steps = static_steps(sequences)
    return plan(steps, 1, "matrix", training=training, **_backend_flags()).mode


def choose_implementation(implementation, units, timesteps, mode=None, stateful=False):
    """The form, `"matrix"` or `"memory"`, run for `implementation` (`plan`'s `form`).

    Args:
        implementation: `"auto"`, `"matrix"` or `"memory"`; the last two are returned as is.
        units: The state's size `H`.
        timesteps: `T` as a Python int, or `None` if unknown.
        mode: One of `MODES`; `None`: `"xla"` if the backend is compiling with XLA while
            tracing, else `"plain"`.
        stateful: Whether the state carries over between calls (then the matrix form).
    """
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    if mode is None:
        mode = "xla" if xla_compiling() else "plain"
    flags = mode_flags(mode)
    return plan(timesteps, units, implementation, stateful=stateful, **flags).form


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


def run_fast_weights(
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
    implementation="auto",
    stateful=False,
    training=False,
    go_backwards=False,
    zero_output_for_mask=False,
    return_sequences=False,
):
    """A fast-weights recurrence over a sequence: plan, projection, then the planned loop.

    At every step `t` (in processing order),
    `h(t+1) = step_function(x_t, h(t), fast_apply, **step_tensors)` with `x_t = C·x(t) +
    bias` and `fast_apply(v) = A(t)·v`, then `A(t+1) = decay·A(t) +
    learning_rate·h(t+1) h(t+1)ᵀ` (`keras_normkit.ops.fast_weights_loop`). How it runs
    (mode, form, chunk, loops) is `plan`'s answer for this call, with the backend asked
    once.

    Args:
        step_function: `(x_t, h, fast_apply, **step_tensors) -> new h`; called while the
            loop is traced. It must read no variable (its weights come in `step_tensors`).
        sequences: `(B, T, F)` tensor; `T` may be unknown.
        kernel: `(F, H)` input kernel `C`.
        h0: `(B, H)` initial state.
        a0: `(B, H, H)` initial fast weights, or `None` for zeros (the memory form then
            skips the `A(0)·v` term).
        decay: Float `λ` in [0, 1].
        learning_rate: Float `η >= 0`.
        bias: Optional `(H,)` bias of the projection.
        step_tensors: Optional dict `{name: tensor or None}` passed to `step_function` by
            keyword; `None` values are left out (the step's defaults apply).
        mask: Optional boolean `(B, T)`, `False` for the steps to skip.
        implementation: `"auto"`, `"matrix"` or `"memory"` (see `plan`).
        stateful: Whether the state carries over between calls (`"auto"`: the matrix form).
        training: Whether the call trains (a TensorFlow training graph may run the loop as
            XLA clusters).
        go_backwards: Whether to process the sequence backwards (outputs in that order).
        zero_output_for_mask: Whether masked steps output zeros.
        return_sequences: Whether to return the outputs of every step.

    Returns:
        `(last_output, outputs, h, A)`: `(B, H)`, `(B, T, H)` or `None` without
        `return_sequences`, `(B, H)` and `(B, H, H)`.
    """
    loop_plan = plan(
        static_steps(sequences),
        h0.shape[-1],
        implementation,
        stateful=stateful,
        training=training,
        **_backend_flags(),
    )
    return _run_plan(
        loop_plan,
        step_function,
        sequences,
        kernel,
        h0,
        a0,
        decay=decay,
        learning_rate=learning_rate,
        bias=bias,
        step_tensors=step_tensors,
        mask=mask,
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
        return_sequences=return_sequences,
    )


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
    """Deprecated alias of `run_fast_weights`, told the form and the mode.

    The engine's name up to keras_normkit 0.1 (it shared its name with
    `keras_normkit.layers.FastWeightsRNN`); it runs as it ran, with a `DeprecationWarning`.
    Call `run_fast_weights`, which plans the form and the mode itself.

    Args:
        step_function: As in `run_fast_weights`.
        sequences: As in `run_fast_weights`.
        kernel: As in `run_fast_weights`.
        h0: As in `run_fast_weights`.
        a0: As in `run_fast_weights`.
        decay: As in `run_fast_weights`.
        learning_rate: As in `run_fast_weights`.
        bias: As in `run_fast_weights`.
        step_tensors: As in `run_fast_weights`.
        mask: As in `run_fast_weights`.
        implementation: `"matrix"` or `"memory"` (not `"auto"`).
        mode: One of `MODES`: `"xla_clusters"` runs the loop as XLA clusters; `"xla"` and
            `"xla_clusters"` tell the loop that XLA compiles it.
        go_backwards: As in `run_fast_weights`.
        zero_output_for_mask: As in `run_fast_weights`.
        return_sequences: As in `run_fast_weights`.

    Returns:
        As `run_fast_weights`.
    """
    warnings.warn(
        "`keras_normkit.ops.fast_weights_rnn.fast_weights_rnn` is deprecated: call "
        "`keras_normkit.ops.fast_weights_rnn.run_fast_weights`, which plans the form and the "
        "mode itself.",
        DeprecationWarning,
        stacklevel=2,
    )
    check_choice("mode", mode, MODES)
    check_choice("implementation", implementation, FORMS)
    steps = static_steps(sequences)
    # The mode as told, even where `plan` would not choose it (XLA clusters for an unknown T).
    told = plan(steps, h0.shape[-1], implementation, **mode_flags(mode))
    loop_plan = LoopPlan(told.steps, mode, told.form, told.chunk, told.segments)
    return _run_plan(
        loop_plan,
        step_function,
        sequences,
        kernel,
        h0,
        a0,
        decay=decay,
        learning_rate=learning_rate,
        bias=bias,
        step_tensors=step_tensors,
        mask=mask,
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
        return_sequences=return_sequences,
    )


def _run_plan(
    loop_plan,
    step_function,
    sequences,
    kernel,
    h0,
    a0,
    *,
    decay,
    learning_rate,
    bias,
    step_tensors,
    mask,
    go_backwards,
    zero_output_for_mask,
    return_sequences,
):
    """Projection, then `run_planned_loop` with the caller's step, as XLA clusters in the
    `"xla_clusters"` mode (arguments as in `run_fast_weights`)."""
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

        last, outputs, h, a = run_planned_loop(
            step,
            loop["inputs"],
            loop["h0"],
            loop["a0"],
            loop_plan,
            decay=decay,
            learning_rate=learning_rate,
            mask=loop["mask"],
            zero_output_for_mask=zero_output_for_mask,
            return_sequences=return_sequences,
        )
        return (last, h, a) if outputs is None else (last, h, a, outputs)

    if loop_plan.mode == "xla_clusters":
        run = xla_compiled(run)
    last, h, a, *outputs = run(*(tensors[name] for name in names))
    return last, (outputs[0] if outputs else None), h, a
