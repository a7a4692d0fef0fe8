"""The recurrent layers' speed bounds in the cases a user meets (issues 28 and 39).

    .venv/bin/python benchmarks/bench_recurrent_cases.py                  # every case
    .venv/bin/python benchmarks/bench_recurrent_cases.py --batches 64 --contexts layer \\
        --layers fast_weights --configs 200x64 --jit 1 --pairing single
    .venv/bin/python benchmarks/bench_recurrent_cases.py --json PATH   # records the run
    .venv/bin/python benchmarks/bench_recurrent_cases.py --report PATH [--write-block]

`LayerNormLSTM` and `FastWeightsRNN` (`implementation="auto"`) against `keras.layers.LSTM`
of the same units, input 32 features, for every combination of

* batch size B = 32 and B = 64;
* context: `layer`, the layer alone (`Sequential([Input((T, 32)), layer])`, MSE loss on its
  last state, the form of an outside harness that measured worse ratios than the section
  tables of `bench_fast_weights.py`), and `model`, the layer inside a small classifier
  (`Input -> Dense(32, relu) -> layer -> Dense(10)`, sparse cross-entropy);
* `jit_compile` False and True;

and two kinds of call: a training step (`train_on_batch`, Adam) and `predict_on_batch`
(`--calls train,predict`, the default).

Statistics. Each model is called in interleaved rounds. With `--pairing block` (the default,
the outside harness's protocol) a round calls each model `--repeats` times in a row, and
the reported time is the **best round's median** ("median"); the **minimum single call**
over all rounds ("min", the statistic of `bench_fast_weights.py`'s tables) is printed
beside it. With `--pairing single` the models alternate call by call (`bench_fast_weights.py`'s
protocol), same two statistics. Ratios are ours / LSTM of the same statistic.

A third kind of call, `--calls first` (not in the default run: fresh processes, XLA
compilation), times the first `fit` epoch (tracing and compiling included) of each model in
a fresh process, `--first-batches` batches of B sequences (`FIRST_EPOCH_BATCHES` by
default), the minimum over `--first-repeats` processes per model. The same process then
times a second epoch, so the first epoch splits into a one-time cost (tracing and
compiling: the first epoch minus the second) and a steady time per batch; after the table
these give, per case, the shortest first epoch (in batches) from which the ratio stays
within its bound (`break_even_batches`): the bound of a first epoch depends on how long
the epoch is, a one-time compile weighing less in a longer one.

Targets: the accepted bounds of issue 39, `TARGETS` below (the one place they are written;
`benchmarks/DECISIONS.md#recurrent-speed-bounds` explains them). They are regression guards, today's worst measured
cases plus a margin for noise, not ambitions, and hold at B >= 32 (`MIN_BATCH`): each row
prints `pass` or `FAIL` against its bound (by the best round's median), `—` where there is
none.

TensorFlow's default oneDNN setting is kept unless `TF_ENABLE_ONEDNN_OPTS` is set (the
Makefile sets it to 0 for the tests; run the scripts directly, as users do). `--json`
records the run, `--report` prints the tables of recorded runs (`benchmarks/_results.py`).
"""

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _results import Recorder, add_arguments, reported
from _timing import best_round_median, interleaved, minimum

from keras_normkit.layers import FastWeightsRNN, LayerNormLSTM

LAYERS = {"layer_norm_lstm": LayerNormLSTM, "fast_weights": FastWeightsRNN}
CONFIGS = {"layer_norm_lstm": [(50, 128)], "fast_weights": [(50, 128), (200, 64), (200, 256)]}
# The accepted speed bounds (issue 39): the ratio ours / `keras.layers.LSTM` of the same
# units, per (layer, call, jit_compile); `None` for jit_compile: both modes. A fast-weights
# step reads a different (units, units) matrix per example and LayerNormLSTM pays three
# layer norms per step (no fused kernels), so these are regression guards on two CPU cores:
# today's worst measured cases plus a margin for noise.
TARGETS = {
    ("layer_norm_lstm", "train", None): 1.5,
    ("layer_norm_lstm", "predict", None): 1.6,
    ("layer_norm_lstm", "first", None): 3.0,
    ("fast_weights", "train", None): 2.2,
    ("fast_weights", "predict", False): 2.8,
    ("fast_weights", "predict", True): 1.5,
    ("fast_weights", "first", None): 3.0,
}
# The bounds hold from this batch size on (the batches they were measured at).
MIN_BATCH = 32
CALLS = ("train", "predict", "first")
# The first `fit` epoch runs this many batches: its bound (<= 3x an LSTM) is judged on an
# epoch of a real data set's length, >= 500 batches (benchmarks/DECISIONS.md, issue 49); the
# one-time part (compile) has its own figure and bound.
FIRST_EPOCH_BATCHES = 500
FEATURES = 32
SCRIPT = "benchmarks/bench_recurrent_cases.py"
# The columns of a row (`row_values`), and of the first epochs' split (`split_values`).
COLUMNS = [
    ("layer", ""), ("T", ""), ("units", ""), ("B", ""), ("context", ""), ("jit", ""),
    ("call", ""), ("ours ms", ".1f"), ("LSTM ms", ".1f"), ("ratio (median)", ".2f"),
    ("ratio (min)", ".2f"), ("target", ""), ("met", ""),
]  # fmt: skip
SPLIT_COLUMNS = [
    ("layer", ""), ("T", ""), ("units", ""), ("B", ""), ("context", ""), ("jit", ""),
    ("one-time s (ours / LSTM)", ""), ("per batch ms (ours / LSTM)", ""), ("bound", ""),
    ("first epoch within it from", ""),
]  # fmt: skip


def build(layer_cls, context, steps, units, jit):
    keras.utils.set_random_seed(0)
    if context == "layer":
        model = keras.Sequential([keras.Input((steps, FEATURES)), layer_cls(units)])
        loss = "mse"
    else:
        model = keras.Sequential(
            [
                keras.Input((steps, FEATURES)),
                keras.layers.Dense(32, activation="relu"),
                layer_cls(units),
                keras.layers.Dense(10),
            ]
        )
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(1e-3), loss, jit_compile=jit)
    return model


def data(context, batch, steps, units, n=None):
    """`(x, y)` of `n` sequences (default: one batch) for a model of `context`."""
    rng = np.random.default_rng(0)
    n = batch if n is None else n
    x = rng.normal(size=(n, steps, FEATURES)).astype("float32")
    if context == "layer":
        return x, rng.normal(size=(n, units)).astype("float32")
    return x, rng.integers(0, 10, size=n)


def calls(layer_cls, context, batch, steps, units, jit):
    """`{"train": fn, "predict": fn}` of one model, traced and warmed up."""
    x, y = data(context, batch, steps, units)
    model = build(layer_cls, context, steps, units, jit)
    fns = {
        "train": lambda: model.train_on_batch(x, y),
        "predict": lambda: model.predict_on_batch(x),
    }
    for fn in fns.values():
        fn()
        fn()
    return fns


def measure(fns, pairing, rounds, repeats, clock=time.perf_counter):
    """`{name: (best round's median, minimum single call)}` in seconds, interleaved."""
    if pairing == "block":
        samples = interleaved(fns, rounds, repeats, warmup=0, clock=clock)  # warmed up
    else:  # the models alternate call by call: `repeats` one-call rounds make a round
        samples = interleaved(fns, rounds * repeats, warmup=0, clock=clock)
        samples = {name: t.reshape(rounds, repeats) for name, t in samples.items()}
    return {name: (best_round_median(t), minimum(t)) for name, t in samples.items()}


def target(layer, call, jit, batch):
    """The accepted bound on ours / LSTM for this case (`TARGETS`), `None` if none."""
    if call not in CALLS:
        raise ValueError(f"call must be one of {CALLS}; got {call!r}")
    if batch < MIN_BATCH:
        return None
    bound = TARGETS.get((layer, call, bool(jit)))
    return TARGETS.get((layer, call, None)) if bound is None else bound


def verdict(ratio, bound):
    """`"pass"` if `ratio <= bound`, `"FAIL"` above it, `"—"` without a bound."""
    if bound is None:
        return "—"
    return "pass" if ratio <= bound else "FAIL"


def row_values(layer, steps, units, batch, context, jit, call, ours, lstm):
    """One row of `COLUMNS` from `(best round's median, minimum)` seconds of each side."""
    by_median, by_min = ours[0] / lstm[0], ours[1] / lstm[1]
    bound = target(layer, call, jit, batch)
    return [
        layer, steps, units, batch, context, int(jit), call,
        ours[0] * 1e3, lstm[0] * 1e3, by_median, by_min,
        "—" if bound is None else f"≤ {bound}", verdict(by_median, bound),
    ]  # fmt: skip


def row(layer, steps, units, batch, context, jit, call, ours, lstm):
    """One table row, as printed, from `(best round's median, minimum)` seconds of each side."""
    values = row_values(layer, steps, units, batch, context, jit, call, ours, lstm)
    cells = [
        format(v, spec) if spec else str(v) for v, (_, spec) in zip(values, COLUMNS, strict=True)
    ]
    return "| " + " | ".join(cells) + " |"


def first_epoch_child(layer, context, batch, steps, units, jit, batches):
    """Run in a fresh process: prints `{"first_s": s, "second_s": s}`, the first `fit`
    epoch of `batches` batches and the second one."""
    x, y = data(context, batch, steps, units, n=batches * batch)
    model = build(LAYERS.get(layer, keras.layers.LSTM), context, steps, units, jit)
    fit = {"fit": lambda: model.fit(x, y, batch_size=batch, epochs=1, verbose=0)}
    first, second = interleaved(fit, 2, warmup=0)["fit"][:, 0]
    print(json.dumps({"first_s": float(first), "second_s": float(second)}))


def first_epoch(layer, context, batch, steps, units, jit, repeats, batches=FIRST_EPOCH_BATCHES):
    """`({"ours": (s, s), "lstm": (s, s)}, {"ours": s, "lstm": s})`: the minimum first
    epoch over fresh processes, the two models alternating (the pair's two statistics are
    the same number), and the minimum second epoch."""
    best, second = {}, {}
    for _ in range(repeats):
        for side, name in (("ours", layer), ("lstm", "lstm")):
            config = f"{name},{context},{batch},{steps},{units},{int(jit)},{batches}"
            out = subprocess.run(
                [sys.executable, __file__, "--child-first", config],
                capture_output=True,
                text=True,
                check=True,
            )
            times = json.loads(out.stdout.strip().splitlines()[-1])
            best[side] = min(best.get(side, times["first_s"]), times["first_s"])
            second[side] = min(second.get(side, times["second_s"]), times["second_s"])
    return {side: (t, t) for side, t in best.items()}, second


def epoch_parts(first, second, batches):
    """`(once, step)` seconds of a first epoch: the one-time part (tracing and compiling,
    `first - second`, at least 0) and the steady time per batch (`second / batches`), from
    a first and a second epoch of `batches` batches each."""
    return max(first - second, 0.0), second / batches


def break_even_batches(ours, lstm, batches, bound):
    """The shortest first epoch, in batches, from which ours / LSTM stays `<= bound`.

    `ours` and `lstm` are `(first epoch s, second epoch s)` of `batches` batches each: a
    first epoch of `n` batches takes `once + n * step` (`epoch_parts`). As `n` grows the
    ratio moves monotonically from the ratio of the one-time parts towards the ratio of
    the steps. Returns 1 where every length is within the bound, `None` where long epochs
    are not (the steady ratio is above it). An extrapolation from epochs of one length:
    time that length itself with `--first-batches` (and several `--first-repeats`: compile
    times vary between processes) to check it.
    """
    (once_f, step_f), (once_l, step_l) = (epoch_parts(*t, batches) for t in (ours, lstm))
    excess = once_f - bound * once_l  # what the steady margin has to pay back
    margin = bound * step_l - step_f  # per batch
    if abs(margin) <= 1e-9 * max(step_f, bound * step_l):  # equal steady ratio, round-off
        margin = 0.0
    if margin < 0 or (margin == 0 and excess > 0):
        return None
    if excess <= 0:
        return 1
    return max(1, math.ceil(excess / margin))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", default="layer_norm_lstm,fast_weights")
    parser.add_argument("--batches", default="32,64")
    parser.add_argument("--contexts", default="layer,model")
    parser.add_argument("--jit", default="0,1", help="jit_compile values: '0', '1' or '0,1'")
    parser.add_argument("--configs", default=None, help="(T, units) pairs, e.g. '50x128'")
    parser.add_argument("--calls", default="train,predict", help="of train, predict, first")
    parser.add_argument("--pairing", choices=["block", "single"], default="block")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--first-repeats", type=int, default=1, help="first: processes each")
    parser.add_argument(
        "--first-batches",
        type=int,
        default=FIRST_EPOCH_BATCHES,
        help=f"first: batches per epoch [{FIRST_EPOCH_BATCHES}]",
    )
    parser.add_argument("--child-first", default=None, help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.child_first:
        name, context, *numbers = args.child_first.split(",")
        batch, steps, units, jit, batches = (int(v) for v in numbers)
        first_epoch_child(name, context, batch, steps, units, bool(jit), batches)
        return
    if reported(args, SCRIPT):
        return
    if args.first_batches < 1:
        parser.error(f"--first-batches must be at least 1; got {args.first_batches}")
    wanted = args.calls.split(",")
    for call in wanted:
        if call not in CALLS:
            parser.error(f"--calls: {call!r} is not one of {CALLS}")
    recorder = Recorder(SCRIPT, sys.argv[1:] if argv is None else argv, args.json)
    recorder.table(
        "calls",
        f"Ours / `keras.layers.LSTM` (TF_ENABLE_ONEDNN_OPTS="
        f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(default)')}, pairing {args.pairing}, "
        f"{args.rounds} rounds of {args.repeats}; first epochs: {args.first_batches} batches, "
        f"the minimum of {args.first_repeats} processes)",
        COLUMNS,
    )
    splits = []  # the first epochs' one-time and steady parts
    for name in args.layers.split(","):
        configs = CONFIGS[name]
        if args.configs:
            configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
        cases = itertools.product(
            configs,
            [int(b) for b in args.batches.split(",")],
            args.contexts.split(","),
            [bool(int(j)) for j in args.jit.split(",")],
        )
        for (steps, units), batch, context, jit in cases:
            case = (name, steps, units, batch, context, jit)
            steady = [call for call in wanted if call != "first"]
            if steady:
                keras.backend.clear_session()
                ours = calls(LAYERS[name], context, batch, steps, units, jit)
                lstm = calls(keras.layers.LSTM, context, batch, steps, units, jit)
            for call in steady:
                fns = {"ours": ours[call], "lstm": lstm[call]}
                t = measure(fns, args.pairing, args.rounds, args.repeats)
                recorder.row("calls", *row_values(*case, call, t["ours"], t["lstm"]))
            if "first" in wanted:
                t, second = first_epoch(
                    name, context, batch, steps, units, jit, args.first_repeats, args.first_batches
                )
                recorder.row("calls", *row_values(*case, "first", t["ours"], t["lstm"]))
                splits.append((case, t, second))
    if splits:
        recorder.table(
            "first_epoch_split",
            f"First epochs of {args.first_batches} batches, split into a one-time part (first "
            "epoch minus the second) and a steady part per batch; the last column: the "
            "shortest first epoch within the bound (`break_even_batches`)",
            SPLIT_COLUMNS,
        )
        for values in split_values(splits, args.first_batches):
            recorder.row("first_epoch_split", *values)


def split_values(splits, batches):
    """The rows of `SPLIT_COLUMNS`: one-time and per-batch parts, and the break-even."""
    rows = []
    for case, first, second in splits:
        name, steps, units, batch, context, jit = case
        ours = (first["ours"][0], second["ours"])
        lstm = (first["lstm"][0], second["lstm"])
        bound = target(name, "first", jit, batch)
        (once_f, step_f), (once_l, step_l) = (epoch_parts(*t, batches) for t in (ours, lstm))
        if bound is None:
            even = "—"
        else:
            n = break_even_batches(ours, lstm, batches, bound)
            even = "never (steady ratio above it)" if n is None else f"{n} batches"
        rows.append(
            [
                name,
                steps,
                units,
                batch,
                context,
                int(jit),
                f"{once_f:.1f} / {once_l:.1f}",
                f"{step_f * 1e3:.1f} / {step_l * 1e3:.1f}",
                "—" if bound is None else f"≤ {bound}",
                even,
            ]  # fmt: skip
        )
    return rows


def first_epoch_split(splits, batches):
    """The table after the first-epoch rows, as text: `split_values` under its header."""
    lines = [
        f"\nFirst epochs of {batches} batches, split into a one-time part (first epoch minus "
        "the second) and a steady part per batch; the last column: the shortest first "
        "epoch within the bound (`break_even_batches`).\n",
        "| " + " | ".join(name for name, _ in SPLIT_COLUMNS) + " |",
        "|---|---|---|---|---|---|---:|---:|---|---:|",
    ]
    for values in split_values(splits, batches):
        lines.append("| " + " | ".join(str(v) for v in values) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
