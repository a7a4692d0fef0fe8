"""QRN benchmark: parallel scan vs the step loop and vs `keras.layers.GRU` (one run).

Times one forward+backward pass (the loss is the sum of the outputs; gradients of all
weights and inputs) in a compiled `tf.function` whose batch size is unknown (as in
`model.fit`), at B = 32, d = 64, units = 64, and prints
ratios (QRN / other; below 1 means QRN is faster). At T = 200 also the bidirectional
layers: `QRN(bidirectional=True)` with a reset gate per direction (the default) and with one
shared (`share_reset_gate=True`), beside `keras.layers.Bidirectional(GRU)` (outputs summed,
as QRN's). Then the peak memory held by TensorFlow's
CPU allocator (inputs, activations, gradients; one fresh process per T) during parallel
forward+backward passes at T = 1000, 2000, 5000: linear in T means a constant multiple
of one (B, T, units) float32 tensor.

    .venv/bin/python benchmarks/bench_qrn.py [--repeats 10] [--rounds 3] [--json PATH]
    .venv/bin/python benchmarks/bench_qrn.py --report PATH [--write-block]   # its tables

`--json` records the run, `--report` prints the tables of recorded runs
(`benchmarks/_results.py`).

TensorFlow's default oneDNN setting is kept (on for x86 CPUs), as users get it; with
`TF_ENABLE_ONEDNN_OPTS=0` TensorFlow falls back to Eigen kernels, whose small batched
matrix products make the parallel form about 2x slower at T = 200.
"""

import argparse
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf
from _results import Recorder, add_arguments, reported
from _timing import best_round_median, interleaved

from keras_normkit.layers import QRN

BATCH, DIM, UNITS = 32, 64, 64
SCRIPT = "benchmarks/bench_qrn.py"


def make_step(kind, steps):
    """A compiled forward+backward function and its inputs for a layer `kind`."""
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(BATCH, steps, DIM)).astype("float32"))
    q = tf.constant(rng.normal(size=(BATCH, DIM)).astype("float32"))
    if kind == "gru":
        layer = keras.layers.GRU(UNITS, return_sequences=True)
        inputs = [x]
    elif kind == "bigru":
        gru = keras.layers.GRU(UNITS, return_sequences=True)
        layer = keras.layers.Bidirectional(gru, merge_mode="sum")
        inputs = [x]
    elif kind.startswith("bidirectional"):
        layer = QRN(UNITS, bidirectional=True, share_reset_gate=kind.endswith("shared"))
        inputs = [x, q]
    else:
        layer = QRN(UNITS, implementation=kind)
        inputs = [x, q]

    def forward(*tensors):
        return layer(list(tensors) if len(tensors) > 1 else tensors[0])

    forward(*inputs)  # build

    # The batch size unknown to the graph, as in `model.fit` (a fixed-size signature once hid
    # a lost static length that made QRN's `fit` ~100x slower than this benchmark said).
    signature = [tf.TensorSpec((None, *t.shape[1:]), t.dtype) for t in inputs]

    @tf.function(input_signature=signature)
    def step(*tensors):
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            loss = tf.reduce_sum(forward(*tensors))
        return tape.gradient(loss, [*layer.trainable_weights, *tensors])

    return step, inputs


def seconds_per_step(kinds, steps, repeats, rounds):
    """Best over `rounds` interleaved rounds of the median of `repeats` calls, per kind.

    Interleaving puts the machine's noise on all the kinds compared alike.
    """
    compiled = {kind: make_step(kind, steps) for kind in kinds}
    times = interleaved(
        {kind: (lambda s=step, i=inputs: s(*i)) for kind, (step, inputs) in compiled.items()},
        rounds,
        repeats,
        warmup=2,  # trace and warm up
    )
    return {kind: best_round_median(t) for kind, t in times.items()}


def peak_memory_bytes(steps):
    """Peak bytes held by TensorFlow's CPU allocator during parallel forward+backward passes.

    Includes the inputs, activations and gradients. TensorFlow keeps CPU allocator
    statistics only with oneDNN enabled and cannot reset the peak, so this runs in a fresh
    process per T, started with `TF_ENABLE_ONEDNN_OPTS=1`.
    """
    step, inputs = make_step("parallel", steps)
    step(*inputs)
    step(*inputs)
    return tf.config.experimental.get_memory_info("CPU:0")["peak"]


def peak_memory_in_a_fresh_process(steps):
    """`peak_memory_bytes(steps)`, run in a fresh process (the peak cannot be reset)."""
    child = [sys.executable, __file__, "--memory-of", str(steps)]
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
    out = subprocess.run(child, capture_output=True, text=True, check=True, env=env).stdout
    return int(out.split()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-of", type=int, default=None, help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.memory_of is not None:
        print(peak_memory_bytes(args.memory_of))
        return
    if reported(args, SCRIPT):
        return
    argv = sys.argv[1:] if argv is None else argv
    recorder = Recorder(SCRIPT, argv, args.json)
    how = f"best of {args.rounds} interleaved rounds of the median of {args.repeats} runs"
    recorder.table(
        "times",
        f"Forward+backward, B = {BATCH}, d = {DIM}, units = {UNITS}, {how}",
        [("T", ""), ("layer", ""), ("ms", ".1f")],
    )
    times = {}
    for steps in (200, 1000):
        kinds = ("parallel", "sequential", "gru")
        for kind, seconds in seconds_per_step(kinds, steps, args.repeats, args.rounds).items():
            times[kind, steps] = seconds
            recorder.row("times", steps, kind, 1e3 * seconds)
    kinds = ("bidirectional", "bidirectional-shared", "bigru")
    for kind, seconds in seconds_per_step(kinds, 200, args.repeats, args.rounds).items():
        times[kind, 200] = seconds
        recorder.row("times", 200, kind, 1e3 * seconds)
    recorder.table("ratios", "Ratios", [("ratio", ""), ("T", ""), ("value", ".3f"), ("target", "")])
    for steps, target in ((200, "≤ 0.4"), (1000, "≤ 0.3")):
        ratio = times["parallel", steps] / times["gru", steps]
        recorder.row("ratios", "parallel / GRU", steps, ratio, target)
    speedup = times["sequential", 200] / times["parallel", 200]
    recorder.row("ratios", "sequential / parallel", 200, speedup, "≥ 5")
    ratio = times["bidirectional", 200] / times["bigru", 200]
    recorder.row("ratios", "bidirectional / bidirectional GRU", 200, ratio, "≤ 0.4")
    ratio = times["bidirectional", 200] / times["bidirectional-shared", 200]
    recorder.row("ratios", "reset gate per direction / shared", 200, ratio, None)
    recorder.table(
        "memory",
        "Peak memory of a parallel forward+backward pass (TensorFlow's CPU allocator, a fresh "
        "process each)",
        [("T", ""), ("MiB", ".1f"), ("÷ one (B, T, units) float32 tensor", ".1f")],
    )
    for steps in (1000, 2000, 5000):
        peak = peak_memory_in_a_fresh_process(steps)
        activations = BATCH * steps * UNITS * 4
        recorder.row("memory", steps, peak / 2**20, peak / activations)


if __name__ == "__main__":
    main()
