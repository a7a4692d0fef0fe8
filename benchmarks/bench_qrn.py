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

    .venv/bin/python benchmarks/bench_qrn.py [--repeats 10] [--rounds 3]

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
from _timing import best_round_median, interleaved

from keras_normkit.layers import QRN

BATCH, DIM, UNITS = 32, 64, 64


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


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-of", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of is not None:
        print(peak_memory_bytes(args.memory_of))
        return

    print(
        f"B={BATCH}, d={DIM}, units={UNITS}, forward+backward, best of {args.rounds} "
        f"interleaved rounds of the median of {args.repeats} runs"
    )
    times = {}
    for steps in (200, 1000):
        kinds = ("parallel", "sequential", "gru")
        for kind, seconds in seconds_per_step(kinds, steps, args.repeats, args.rounds).items():
            times[kind, steps] = seconds
            print(f"  T={steps:5d} {kind:10s} {1e3 * seconds:8.1f} ms")
    print("ratios (target):")
    for steps, target in ((200, 0.4), (1000, 0.3)):
        ratio = times["parallel", steps] / times["gru", steps]
        print(f"  parallel / GRU         T={steps:5d}: {ratio:.3f}x  (<= {target}x)")
    speedup = times["sequential", 200] / times["parallel", 200]
    print(f"  sequential / parallel  T=  200: {speedup:.1f}x faster  (>= 5x)")
    kinds = ("bidirectional", "bidirectional-shared", "bigru")
    both = seconds_per_step(kinds, 200, args.repeats, args.rounds)
    for kind, seconds in both.items():
        print(f"  T=  200 {kind:20s} {1e3 * seconds:8.1f} ms")
    ratio = both["bidirectional"] / both["bigru"]
    print(f"  bidirectional / bidirectional GRU T=200: {ratio:.3f}x  (<= 0.4x)")
    ratio = both["bidirectional"] / both["bidirectional-shared"]
    print(f"  reset gate per direction / shared T=200: {ratio:.2f}x")

    print(
        "peak memory of a parallel forward+backward pass (TensorFlow CPU allocator peak, fresh process each):"
    )
    for steps in (1000, 2000, 5000):
        child = [sys.executable, __file__, "--memory-of", str(steps)]
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
        out = subprocess.run(child, capture_output=True, text=True, check=True, env=env).stdout
        peak = int(out.split()[-1])
        activations = BATCH * steps * UNITS * 4
        print(
            f"  T={steps:5d}: {peak / 2**20:7.1f} MiB "
            f"= {peak / activations:.1f} x one (B, T, units) float32 tensor"
        )


if __name__ == "__main__":
    main()
