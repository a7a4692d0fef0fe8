"""Benchmark `FastWeightsRNN`: train-step time vs LSTM, matrix vs memory form, peak memory.

    .venv/bin/python benchmarks/bench_fast_weights.py            # everything (~15 min)
    .venv/bin/python benchmarks/bench_fast_weights.py --section speed --jit 1 [--json PATH]
    .venv/bin/python benchmarks/bench_fast_weights.py --section compile --repeats 3 [--jit 0]
    .venv/bin/python benchmarks/bench_fast_weights.py --report PATH [--write-block]  # tables

Sections (one run prints markdown tables):

* `speed`: one training step (forward + backward + Adam) of `FastWeightsRNN` (S = 1,
  `"auto"`, `"matrix"`, `"memory"`) vs `keras.layers.LSTM` of the same units, and vs the
  straightforward form every public implementation uses: a matrix-form cell carrying `A`
  inside `keras.layers.RNN` (`keras.layers.RNN(FastWeightsRNNCell(units))`). B = 64, input 32,
  (T, units) in (50, 128), (200, 64), (200, 256).
* `grid`: `"matrix"` vs `"memory"` on a (T, units) grid at B = 32, and whether `"auto"`
  is within 1.1x of the faster one.
* `memory`: peak resident memory of a training step (each in a fresh subprocess) at
  T = 400, units = 256, B = 32.
* `profile`: where the time of one XLA-compiled training step goes at T = 200, 64 units,
  B = 64 (the matrix form; issue 28, decision 3): the Keras `train_on_batch` step against
  the layer's forward + backward alone (no optimizer, no trainer), its forward alone, and
  the engine (`fast_weights_loop`) run with parts of the step removed (no layer norm; no
  `A·h`: fast weights written but never read), and for scale a layer-normalized `tanh` RNN
  without fast weights in Keras's RNN loop, one step per iteration; the same for an LSTM
  where it applies (`train_on_batch`, forward + backward, forward). Not part of `all`.
* `compile`: the one-time part of the first training step (tracing and compiling: the
  first `train_on_batch` minus the second) and the steady step, each model in fresh
  processes, the minimum over `--repeats` of them: `FastWeightsRNN` (`"auto"`) vs
  `keras.layers.LSTM`, T = 200, 256 units, input 32, B = 32 (`--configs TxU` for another
  size), against the bound of `COMPILE_BOUND_S` seconds (issue 49,
  `benchmarks/DECISIONS.md#recurrent-speed-bounds`). `--max-loops N` runs the memory form
  with at most N consecutive loops instead of `_MAX_LOOPS` (an experiment). Not part of
  `all`.
* `first`: the first `fit` epoch (tracing and compiling included) and the second one, each
  model in a fresh subprocess: `FastWeightsRNN(32)` vs `keras.layers.LSTM(32)`, input
  (T = 12, 8), a `Dense(1)` head, Adam, 256 sequences, batch 32 (issue 17). Not part of
  `all`.

The models of one configuration are timed in interleaved rounds (one step each per round),
so that load from other processes on this shared machine hits all of them; times are the
minimum over rounds and ratios are ratios of those minima (the noise is still large).
TensorFlow's default oneDNN setting is kept (on for x86 CPUs), as users get it. `--json`
records the run, `--report` prints the tables of recorded runs (`benchmarks/_results.py`).
"""

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _results import Recorder, add_arguments, reported
from _timing import interleaved, minimum, quartiles

from keras_normkit.layers import FastWeightsRNN, FastWeightsRNNCell


def make_model(kind, steps, features, units, jit):
    if kind == "lstm":
        layer = keras.layers.LSTM(units)
    elif kind == "naive cell":
        layer = keras.layers.RNN(FastWeightsRNNCell(units))
    else:
        layer = FastWeightsRNN(units, implementation=kind)
    model = keras.Sequential([keras.Input((steps, features)), layer])
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=jit)
    return model


def time_models(kinds, batch, steps, features, units, jit, rounds):
    """Minimum seconds per train step of each model, measured in interleaved rounds."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, steps, features)).astype("float32")
    y = rng.normal(size=(batch, units)).astype("float32")
    models = {}
    for kind in kinds:
        keras.backend.clear_session()
        models[kind] = make_model(kind, steps, features, units, jit)
        for _ in range(2):  # trace / compile and warm up
            models[kind].train_on_batch(x, y)
    steps_of = {kind: (lambda m=model: m.train_on_batch(x, y)) for kind, model in models.items()}
    return interleaved(steps_of, rounds, warmup=0)  # warmed up above, each in its session


def ratio(numerator, denominator):
    """Ratio of the minimum times. (A median of per-round ratios was tried and rejected: a
    step right after a memory-hungry fast-weights step is often slowed several-fold, which
    biases the per-round ratios towards 1 when the two models differ a lot.)"""
    return minimum(numerator) / minimum(denominator)


SCRIPT = "benchmarks/bench_fast_weights.py"
SPEED_CONFIGS = [(50, 128), (200, 64), (200, 256)]
GRID_UNITS = (32, 64, 128, 256)
GRID_STEPS = (8, 16, 32, 64, 128)


def training_auto(units, steps, jit):
    """What `implementation="auto"` runs in these training steps.

    With `jit_compile=True` (and always on JAX) the whole step is XLA-compiled; without it,
    TensorFlow runs the layer's loop as XLA clusters inside the graph; torch runs plain ops.
    """
    backend = keras.backend.backend()
    mode = {"tensorflow": "xla_clusters", "jax": "xla"}.get(backend, "plain")
    return FastWeightsRNN(units).resolve_implementation(steps, "xla" if jit else mode)


def speed(recorder, jit, rounds, configs=SPEED_CONFIGS):
    name = f"speed_jit{int(jit)}"
    recorder.table(
        name,
        f"Train-step time vs LSTM (B = 64, input 32, S = 1, jit_compile={jit}; minimum of "
        f"{rounds} interleaved rounds)",
        [
            ("T", ""),
            ("units", ""),
            ("LSTM ms", ".1f"),
            ("naive cell ms", ".1f"),
            ("matrix ms", ".1f"),
            ("memory ms", ".1f"),
            ("auto", ""),
            ("auto / LSTM", ".2f"),
            ("naive cell / auto", ".2f"),
        ],
    )
    kinds = ["lstm", "naive cell", "matrix", "memory"]
    for steps, units in configs:
        r = time_models(kinds, 64, steps, 32, units, jit, rounds)
        t = {kind: 1e3 * minimum(v) for kind, v in r.items()}
        auto = training_auto(units, steps, jit)
        recorder.row(
            name,
            steps,
            units,
            t["lstm"],
            t["naive cell"],
            t["matrix"],
            t["memory"],
            auto,
            ratio(r[auto], r["lstm"]),
            ratio(r["naive cell"], r[auto]),
        )


def grid(recorder, jit, rounds, units_list=GRID_UNITS, steps_list=GRID_STEPS):
    name = f"grid_jit{int(jit)}"
    recorder.table(
        name,
        f"matrix vs memory, B = 32, input 32 (jit_compile={jit}; minimum of {rounds} "
        "interleaved rounds)",
        [
            ("T", ""),
            ("units", ""),
            ("matrix ms", ".1f"),
            ("memory ms", ".1f"),
            ("memory / matrix", ".2f"),
            ("auto", ""),
            ("auto / best", ".2f"),
        ],
    )
    worst = 1.0
    for units in units_list:
        for steps in steps_list:
            r = time_models(["matrix", "memory"], 32, steps, 32, units, jit, rounds)
            t = {kind: 1e3 * minimum(v) for kind, v in r.items()}
            auto = training_auto(units, steps, jit)
            mem_over_matrix = ratio(r["memory"], r["matrix"])
            auto_over_best = max(1.0, mem_over_matrix if auto == "memory" else 1 / mem_over_matrix)
            worst = max(worst, auto_over_best)
            recorder.row(
                name, steps, units, t["matrix"], t["memory"], mem_over_matrix, auto, auto_over_best
            )
    recorder.note(f"jit_compile={jit}: worst auto / best on the grid {worst:.2f} (target <= 1.10)")


def peak_memory_child(implementation, jit):
    """Run in a subprocess: peak RSS (MB) of one training step."""
    import resource

    batch, steps, units = 32, 400, 256
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    x = np.random.default_rng(0).normal(size=(batch, steps, 32)).astype("float32")
    y = np.zeros((batch, units), "float32")
    model = make_model(implementation, steps, 32, units, jit)
    step = {"step": lambda: model.train_on_batch(x, y)}
    first, second = interleaved(step, 2, warmup=0)["step"][:, 0]  # compiling, then compiled
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mb": peak, "base_mb": base, "first_s": first, "step_s": second}))


def memory(recorder, jit):
    name = f"memory_jit{int(jit)}"
    recorder.table(
        name,
        f"Peak memory of a training step, T = 400, units = 256, B = 32 (jit_compile={jit}; a "
        "fresh process each)",
        [
            ("model", ""),
            ("peak RSS MB", ".0f"),
            ("RSS before building MB", ".0f"),
            ("step s", ".2f"),
        ],
    )
    for kind in ("lstm", "matrix", "memory"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind, "--jit", str(int(jit))],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if not lines:
            recorder.note(
                f"{kind} (jit_compile={jit}) failed: {out.stderr.strip().splitlines()[-1:]}"
            )
            continue
        r = json.loads(lines[-1])
        recorder.row(name, kind, r["peak_mb"], r["base_mb"], r["step_s"])


FIRST_KINDS = ("lstm", "auto")


def first_epoch_child(kind, jit, steps, units):
    """Run in a subprocess: seconds of the first and the second `fit` epoch."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, steps, 8)).astype("float32")
    y = rng.normal(size=(256, 1)).astype("float32")
    layer = (
        keras.layers.LSTM(units) if kind == "lstm" else FastWeightsRNN(units, implementation=kind)
    )
    model = keras.Sequential([keras.Input((steps, 8)), layer, keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=True if jit else "auto")
    epoch = {"epoch": lambda: model.fit(x, y, batch_size=32, epochs=1, verbose=0)}
    first, second = interleaved(epoch, 2, warmup=0)["epoch"][:, 0]  # compiling, then compiled
    print(json.dumps({"first_s": first, "second_s": second}))


def first_epoch(recorder, jit, repeats, steps=12, units=32):
    label = "True" if jit else '"auto"'
    name = f"first_jit{int(jit)}"
    recorder.table(
        name,
        f"First `fit` epoch, T = {steps}, {units} units, input 8, 256 sequences, batch 32 "
        f"(jit_compile={label}, fresh processes, the minimum of {repeats} each)",
        [
            ("model", ""),
            ("first epoch s", ".2f"),
            ("second epoch s", ".3f"),
            ("first / LSTM first", ".2f"),
        ],
    )
    results = {}
    for kind in FIRST_KINDS:
        runs = []
        for _ in range(repeats):
            args = ["--child-first", kind, "--jit", str(int(jit)), "--configs", f"{steps}x{units}"]
            out = subprocess.run(
                [sys.executable, __file__, *args], capture_output=True, text=True, check=False
            )
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if not lines:
                recorder.note(f"{kind} failed: {out.stderr.strip().splitlines()[-1:]}")
                break
            runs.append(json.loads(lines[-1]))
        if not runs:
            continue
        results[kind] = {k: min(r[k] for r in runs) for k in ("first_s", "second_s")}
    for kind, r in results.items():
        rel = r["first_s"] / results["lstm"]["first_s"] if "lstm" in results else None
        model = "LSTM" if kind == "lstm" else f"FastWeightsRNN ({kind})"
        recorder.row(name, model, r["first_s"], r["second_s"], rel)


COMPILE_KINDS = ("lstm", "auto")
# The bound on the one-time part of the first training step at T <= 200, units <= 256,
# with and without XLA, on two CPU cores (issue 49; DECISIONS.md#recurrent-speed-bounds).
COMPILE_BOUND_S = 30.0
COMPILE_STEPS = 6  # steady steps timed after the second one


def compile_child(kind, jit, steps, units, max_loops=None):
    """Run in a subprocess: seconds of the first two `train_on_batch` calls and the fastest
    of `COMPILE_STEPS` more (B = 32, input 32)."""
    if max_loops:
        import keras_normkit.ops.fast_weights_plan as plan_module

        plan_module._MAX_LOOPS = max_loops
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, steps, 32)).astype("float32")
    y = rng.normal(size=(32, units)).astype("float32")
    model = make_model(kind, steps, 32, units, jit)
    step = {"step": lambda: model.train_on_batch(x, y)}
    times = interleaved(step, 2 + COMPILE_STEPS, warmup=0)["step"][:, 0]
    print(
        json.dumps({"first_s": times[0], "second_s": times[1], "step_s": float(np.min(times[2:]))})
    )


def _planned_form(units, steps, jit, max_loops=None):
    """`"auto"`'s form in a training step, with the memory form's number of loops."""
    import keras_normkit.ops.fast_weights_plan as plan_module

    form = training_auto(units, steps, jit)
    if form != "memory":
        return form
    default, plan_module._MAX_LOOPS = plan_module._MAX_LOOPS, max_loops or plan_module._MAX_LOOPS
    try:
        loops = len(plan_module.plan(steps, units, form, xla=True).segments)
    finally:
        plan_module._MAX_LOOPS = default
    return f"memory, {loops} loops"


def compile_time(recorder, jit, repeats, steps=200, units=256, max_loops=None):
    """The one-time part of the first step (first minus second `train_on_batch`), the
    minimum over `repeats` fresh processes per model (alternating models), and the steady
    step; against `COMPILE_BOUND_S`."""
    name = f"compile_jit{int(jit)}"
    loops = f", at most {max_loops} memory-form loops" if max_loops else ""
    recorder.table(
        name,
        f"First training step's one-time part (first minus second `train_on_batch`), T = "
        f"{steps}, {units} units, input 32, B = 32 (jit_compile={jit}{loops}; fresh processes, "
        f"the minimum of {repeats} each; step: the fastest of {COMPILE_STEPS} steps after the "
        "second, the minimum over processes)",
        [
            ("model", ""),
            ("form", ""),
            ("one-time s", ".1f"),
            ("one-time s (each process)", ""),
            ("step ms", ".1f"),
            ("step / LSTM step", ".2f"),
            ("bound s", ".0f"),
            ("met", ""),
        ],
    )
    runs = {kind: [] for kind in COMPILE_KINDS}
    for _ in range(repeats):
        for kind in COMPILE_KINDS:
            args = ["--child-compile", kind, "--jit", str(int(jit)), "--configs"]
            args += [f"{steps}x{units}"] + (["--max-loops", str(max_loops)] if max_loops else [])
            out = subprocess.run(
                [sys.executable, __file__, *args], capture_output=True, text=True, check=False
            )
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if not lines:
                recorder.note(f"{kind} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            runs[kind].append(json.loads(lines[-1]))
    lstm_step = min((r["step_s"] for r in runs["lstm"]), default=None)
    for kind, results in runs.items():
        if not results:
            continue
        once = [r["first_s"] - r["second_s"] for r in results]
        step = min(r["step_s"] for r in results)
        is_lstm = kind == "lstm"
        form = "" if is_lstm else _planned_form(units, steps, jit, max_loops)
        recorder.row(
            name,
            "LSTM" if is_lstm else f"FastWeightsRNN ({kind})",
            form,
            min(once),
            " / ".join(f"{t:.1f}" for t in once),
            1e3 * step,
            step / lstm_step if lstm_step else None,
            None if is_lstm else COMPILE_BOUND_S,
            "" if is_lstm else ("pass" if min(once) <= COMPILE_BOUND_S else "FAIL"),
        )


PROFILE_PARTS = {
    "full": "the layer's step: b = W h + x, h0 = tanh(b), h1 = tanh(LN(b + A h0))",
    "no_layer_norm": "h1 = tanh(b + A h0)",
    "no_fast_read": "h1 = tanh(LN(b)): A written every chunk, never read",
    "no_fast_weights": "h = tanh(LN(W h + x)) in keras.layers.RNN's loop, one step per iteration (no A)",
}


def profile(recorder, rounds, steps=200, units=64, batch=64, features=32):
    """Times (ms: minimum and quartiles of `rounds` interleaved calls) of the pieces of one
    XLA step."""
    import tensorflow as tf

    from keras_normkit.backend.keras_compat import backend_rnn
    from keras_normkit.ops import layer_norm
    from keras_normkit.ops.fast_weights_loop import fast_weights_loop

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch, steps, features)), tf.float32)
    y = tf.constant(rng.normal(size=(batch, units)), tf.float32)
    models = {kind: make_model(kind, steps, features, units, True) for kind in ("lstm", "matrix")}
    calls = {
        f"train_on_batch {kind}": (lambda m=m: m.train_on_batch(x, y)) for kind, m in models.items()
    }
    for kind in ("lstm", "matrix"):
        layer = models[kind].layers[-1]

        @tf.function(jit_compile=True)
        def forward_backward(layer=layer):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((layer(x, training=True) - y) ** 2)
            return tape.gradient(loss, layer.trainable_variables)

        @tf.function(jit_compile=True)
        def forward(layer=layer):
            return layer(x)

        calls[f"forward+backward {kind}"] = forward_backward
        calls[f"forward {kind}"] = forward
    init = keras.initializers.GlorotUniform(seed=0)
    kernel = tf.Variable(init((features, units)))
    recurrent = tf.Variable(keras.initializers.Orthogonal(seed=0)((units, units)))
    gamma, beta = tf.Variable(tf.ones((units,))), tf.Variable(tf.zeros((units,)))
    variables = [kernel, recurrent, gamma, beta]

    def ln(z):
        return layer_norm(z, gamma, beta, 1e-3, derived_gradient=False)

    def engine(part):
        def step(projected, h, fast_apply):
            b = projected + h @ recurrent
            if part == "no_fast_read":
                return tf.tanh(ln(b))
            read = fast_apply(tf.tanh(b))
            return tf.tanh(b + read if part == "no_layer_norm" else ln(b + read))

        @tf.function(jit_compile=True)
        def run():
            with tf.GradientTape() as tape:
                if part == "no_fast_weights":

                    def rnn_step(x_t, states):
                        h = tf.tanh(ln(x_t + states[0] @ recurrent))
                        return h, [h]

                    _, _, (h,) = backend_rnn(
                        rnn_step, x @ kernel, [tf.zeros((batch, units))], unroll=False
                    )
                else:
                    h = fast_weights_loop(
                        step,
                        x @ kernel,
                        tf.zeros((batch, units)),
                        decay=0.95,
                        learning_rate=0.5,
                        xla=True,
                    )[0]
                loss = tf.reduce_mean((h - y) ** 2)
            return tape.gradient(loss, variables)

        return run

    for part in PROFILE_PARTS:
        calls[f"engine: {part}"] = engine(part)

    def materialize(out):
        if isinstance(out, (list, tuple)):
            [np.asarray(v) for v in out]

    times = interleaved(calls, rounds, warmup=2, after=materialize)
    recorder.table(
        "profile",
        f"One XLA training step, T = {steps}, {units} units, B = {batch}, matrix form "
        f"({rounds} interleaved rounds)",
        [
            ("piece", ""),
            ("ms (min)", ".1f"),
            ("ms (q25)", ".1f"),
            ("ms (median)", ".1f"),
            ("ms (q75)", ".1f"),
        ],
    )
    for name, t in times.items():
        label = f"{name} ({PROFILE_PARTS[name[8:]]})" if name.startswith("engine: ") else name
        q25, q50, q75 = (1e3 * q for q in quartiles(t))
        recorder.row("profile", label, 1e3 * minimum(t), q25, q50, q75)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--section",
        choices=["all", "speed", "grid", "memory", "first", "compile", "profile"],
        default="all",
    )
    parser.add_argument("--jit", type=int, choices=[0, 1], default=None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--configs", default=None, help="speed: (T, units) pairs, e.g. '50x128,200x64'"
    )
    parser.add_argument("--grid-units", default=None, help="grid: units, e.g. '64,128'")
    parser.add_argument("--grid-steps", default=None, help="grid: T values, e.g. '32,64'")
    parser.add_argument(
        "--repeats", type=int, default=2, help="first, compile: processes per model"
    )
    parser.add_argument(
        "--max-loops", type=int, default=None, help="compile: at most N memory-form loops"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-first", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-compile", default=None, help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.child:
        peak_memory_child(args.child, bool(args.jit))
        return
    if args.child_first:
        steps, units = (int(v) for v in (args.configs or "12x32").split("x"))
        first_epoch_child(args.child_first, bool(args.jit), steps, units)
        return
    if args.child_compile:
        steps, units = (int(v) for v in (args.configs or "200x256").split("x"))
        compile_child(args.child_compile, bool(args.jit), steps, units, args.max_loops)
        return
    if reported(args, SCRIPT):
        return
    recorder = Recorder(SCRIPT, sys.argv[1:] if argv is None else argv, args.json)
    if args.section == "profile":
        profile(recorder, args.rounds)
        return
    jits = [False, True] if args.jit is None else [bool(args.jit)]
    configs = SPEED_CONFIGS
    if args.configs:
        configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    units_list = GRID_UNITS if not args.grid_units else [int(v) for v in args.grid_units.split(",")]
    steps_list = GRID_STEPS if not args.grid_steps else [int(v) for v in args.grid_steps.split(",")]
    for jit in jits:
        if args.section in ("all", "speed"):
            speed(recorder, jit, args.rounds, configs)
        if args.section in ("all", "grid"):
            grid(recorder, jit, max(3, args.rounds // 2), units_list, steps_list)
        if args.section in ("all", "memory"):
            memory(recorder, jit)
        if args.section == "first":
            steps, units = (int(v) for v in (args.configs or "12x32").split(",")[0].split("x"))
            first_epoch(recorder, jit, args.repeats, steps, units)
        if args.section == "compile":
            steps, units = (int(v) for v in (args.configs or "200x256").split(",")[0].split("x"))
            compile_time(recorder, jit, args.repeats, steps, units, args.max_loops)


if __name__ == "__main__":
    main()
