"""Forward+backward time of keras_normkit's SELU and AlphaDropout vs Keras's built-ins.

    python benchmarks/bench_selu.py [--repeats 20] [--rounds 5] [--json PATH]
    python benchmarks/bench_selu.py --report PATH [--write-block]   # its table (README)

On a (4096, 1024) float32 tensor, one run, printing the ratio ours / Keras (target <= 1.1).
Both sides run as compiled `tf.function`s, with XLA off and on (`model.fit` on the
TensorFlow backend compiles with XLA by default when every layer supports it). `--json`
records the run, `--report` prints the table of recorded runs (`benchmarks/_results.py`).
"""

import argparse
import itertools
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf
from _results import Recorder, add_arguments, reported
from _timing import best_round_median, interleaved

from keras_normkit.layers import SELU, AlphaDropout


def forward_backward(fn, jit_compile=False):
    @tf.function(jit_compile=jit_compile)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, x)

    return step


def in_training(layer):
    return lambda v: layer(v, training=True)


SCRIPT = "benchmarks/bench_selu.py"


def main(repeats=20, rounds=5, recorder=None):
    """Times every case; the rows go to `recorder` (a `_results.Recorder`, printed)."""
    recorder = Recorder(SCRIPT, []) if recorder is None else recorder
    x = tf.constant(np.random.default_rng(0).standard_normal((4096, 1024)).astype("float32"))
    cases = [
        ("SELU (0, 1)", SELU(), keras.activations.selu),
        ("SELU (0.1, 1.2)", SELU(fixed_point=(0.1, 1.2)), keras.activations.selu),
        (
            "AlphaDropout(0.1)",
            in_training(AlphaDropout(0.1, seed=0)),
            in_training(keras.layers.AlphaDropout(0.1, seed=0)),
        ),
        (
            "AlphaDropout(0.1, (0.1, 1.2))",
            in_training(AlphaDropout(0.1, fixed_point=(0.1, 1.2), seed=0)),
            in_training(keras.layers.AlphaDropout(0.1, seed=0)),
        ),
    ]
    recorder.table(
        "cases",
        f"Forward+backward on (4096, 1024) float32, best of {rounds} rounds of the median of "
        f"{repeats} calls",
        [("case", ""), ("XLA", ""), ("ours ms", ".2f"), ("Keras ms", ".2f"), ("ratio", ".2f")],
    )
    rows = []
    for (name, ours, theirs), jit in itertools.product(cases, (False, True)):
        sides = {"ours": forward_backward(ours, jit), "theirs": forward_backward(theirs, jit)}
        # Interleaved rounds share the machine's noise fairly; keep each side's best round.
        # Each round's block starts with a warm-up call (trace + warm up) whose time, column 0,
        # is dropped.
        times = interleaved(
            {side: (lambda s=step: s(x).numpy()) for side, step in sides.items()},
            rounds,
            repeats + 1,
            warmup=0,
        )
        t_ours, t_theirs = (best_round_median(times[side][:, 1:]) for side in ("ours", "theirs"))
        rows.append((name, jit, t_ours, t_theirs))
        on = "on" if jit else "off"
        recorder.row("cases", name, on, 1e3 * t_ours, 1e3 * t_theirs, t_ours / t_theirs)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    add_arguments(parser)
    args = parser.parse_args()
    if not reported(args, SCRIPT):
        main(args.repeats, args.rounds, Recorder(SCRIPT, sys.argv[1:], args.json))
