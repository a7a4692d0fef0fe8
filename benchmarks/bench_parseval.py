"""Train-step time of a 64-512-512-512-10 MLP with Parseval constraints / penalties.

Compares, on the same model, data and optimizer (Adam, compiled train step):

* no constraint (the baseline),
* `ParsevalConstraint(beta=1e-3)` on every Dense kernel (full retraction each step),
* `ParsevalConstraint(beta=1e-3, row_fraction=0.3)` (30 % of the output units per step),
* `ParsevalRegularizer(1e-3)` vs Keras's `OrthogonalRegularizer(1e-3)` on every kernel.

Each configuration is timed over `--steps` steps after a warm-up epoch, `--repeats` times
in interleaved order; the median per-step wall time and process CPU time (all threads) are
reported with their ratio to the baseline. On a busy shared machine the CPU time is the
steadier figure.
TensorFlow's default oneDNN setting is kept (on for x86 CPUs), as users get it.

    .venv/bin/python benchmarks/bench_parseval.py [--batch-size 128] [--steps 100]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.regularizers import ParsevalRegularizer

CONFIGS = {
    "none": {},
    "ParsevalConstraint(beta=1e-3)": {"kernel_constraint": lambda: ParsevalConstraint(1e-3)},
    "ParsevalConstraint(beta=1e-3, row_fraction=0.3)": {
        "kernel_constraint": lambda: ParsevalConstraint(1e-3, row_fraction=0.3, seed=0)
    },
    "ParsevalRegularizer(1e-3)": {"kernel_regularizer": lambda: ParsevalRegularizer(1e-3)},
    "keras OrthogonalRegularizer(1e-3)": {
        "kernel_regularizer": lambda: keras.regularizers.OrthogonalRegularizer(1e-3)
    },
}


def build(config, jit_compile):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((64,))]
    for units, activation in [(512, "relu")] * 3 + [(10, None)]:
        kwargs = {key: make() for key, make in config.items()}
        layers.append(
            keras.layers.Dense(
                units, activation=activation, kernel_initializer="orthogonal", **kwargs
            )
        )
    model = keras.Sequential(layers)
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


class _EpochTimer(keras.callbacks.Callback):
    """Wall time and process CPU time (all threads) of one epoch."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start = (time.perf_counter(), time.process_time())

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = (
            time.perf_counter() - self.start[0],
            time.process_time() - self.start[1],
        )


def time_per_step(model, x, y, batch_size, steps):
    timer = _EpochTimer()
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)  # warm-up
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    return timer.seconds[0] / steps, timer.seconds[1] / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-jit", action="store_true", help="compile without XLA")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    n = args.batch_size * args.steps
    x = rng.normal(size=(n, 64)).astype("float32")
    y = rng.integers(0, 10, size=n)
    models = {name: build(config, not args.no_jit) for name, config in CONFIGS.items()}
    times = {name: [] for name in CONFIGS}
    for _ in range(args.repeats):
        for name, model in models.items():
            times[name].append(time_per_step(model, x, y, args.batch_size, args.steps))
    wall = {name: float(np.median([t[0] for t in ts])) for name, ts in times.items()}
    cpu = {name: float(np.median([t[1] for t in ts])) for name, ts in times.items()}

    print(
        f"batch {args.batch_size}, {args.steps} steps x {args.repeats} repeats, "
        f"jit_compile={not args.no_jit}, backend {keras.backend.backend()}"
    )
    print("| configuration | wall ms / step | ratio | CPU ms / step | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name in CONFIGS:
        print(
            f"| {name} | {1e3 * wall[name]:.2f} | {wall[name] / wall['none']:.2f}x "
            f"| {1e3 * cpu[name]:.2f} | {cpu[name] / cpu['none']:.2f}x |"
        )
    ours, theirs = "ParsevalRegularizer(1e-3)", "keras OrthogonalRegularizer(1e-3)"
    print(
        f"ParsevalRegularizer / OrthogonalRegularizer: wall {wall[ours] / wall[theirs]:.2f}x, "
        f"CPU {cpu[ours] / cpu[theirs]:.2f}x"
    )


if __name__ == "__main__":
    main()
