"""Train-step time of a network with Parseval constraints / penalties, against none.

Two models (`--model`), the same data and optimizer (Adam, compiled train step) for every
configuration of one model:

* `mlp` (default): a 64-512-512-512-10 ReLU MLP, `Dense` kernels, configurations
    * no constraint (the baseline),
    * `ParsevalConstraint(beta=1e-3)` on every kernel (full retraction each step),
    * `ParsevalConstraint(beta=1e-3, row_fraction=0.3)` (30 % of the output units per step),
    * `ParsevalRegularizer(1e-3)` vs Keras's `OrthogonalRegularizer(1e-3)` on every kernel.
* `conv`: a small convolutional network like the paper's (without its residual
  connections and batch normalization): 32x32x3 input, three stages of two 3x3
  `Conv2D(padding="same")` + ReLU with 64, 128 and 256 filters, a 2x2 `MaxPooling2D`
  between stages, global average pooling and `Dense(10)`; configurations: no constraint,
  `ParsevalConstraint(beta=1e-3)` (full retraction each step) and
  `ParsevalRegularizer(1e-3)` on every conv and dense kernel.

Each configuration is timed over `--steps` steps after a warm-up epoch of
`--warmup-steps` steps (compilation), `--repeats` times in interleaved order; the median
per-step wall time and process CPU time (all threads) are reported with their ratio to
the baseline. On a busy shared machine the CPU time is the steadier figure. The same run
prints the matmul-FLOP bound of the full retraction's ratio: the two products per kernel
(`G = W^T W` or `W W^T`, the smaller, and `W G` or `G W`: `4 max(r, c) min(r, c)^2` FLOPs
for an `r x c` kernel matrix) against the train step's own matmul / convolution FLOPs
(forward, plus 2x forward for the backward pass; the first layer's backward needs no
input gradient, so 1x there), i.e. predicted ratio = 1 + retraction FLOPs / step FLOPs,
the ratio if every FLOP ran at the same rate and nothing else took time.
TensorFlow's default oneDNN setting is kept (on for x86 CPUs), as users get it.

    .venv/bin/python benchmarks/bench_parseval.py [--model mlp] [--batch-size 128] \
        [--steps 100] [--repeats 5] [--no-jit]
    .venv/bin/python benchmarks/bench_parseval.py --model conv --batch-size 128 \
        --steps 8 --warmup-steps 3 --repeats 3 [--no-jit]
    .venv/bin/python benchmarks/bench_parseval.py --report PATH [--write-block]   # its table

`--json PATH` records the run, `--report` prints the table of recorded runs
(`benchmarks/_results.py`).
"""

import argparse
import math
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _results import Recorder, add_arguments, reported
from _timing import interleaved

from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.regularizers import ParsevalRegularizer

FULL = "ParsevalConstraint(beta=1e-3)"
MLP_CONFIGS = {
    "none": {},
    FULL: {"kernel_constraint": lambda: ParsevalConstraint(1e-3)},
    "ParsevalConstraint(beta=1e-3, row_fraction=0.3)": {
        "kernel_constraint": lambda: ParsevalConstraint(1e-3, row_fraction=0.3, seed=0)
    },
    "ParsevalRegularizer(1e-3)": {"kernel_regularizer": lambda: ParsevalRegularizer(1e-3)},
    "keras OrthogonalRegularizer(1e-3)": {
        "kernel_regularizer": lambda: keras.regularizers.OrthogonalRegularizer(1e-3)
    },
}
CONV_CONFIGS = {
    "none": {},
    FULL: {"kernel_constraint": lambda: ParsevalConstraint(1e-3)},
    "ParsevalRegularizer(1e-3)": {"kernel_regularizer": lambda: ParsevalRegularizer(1e-3)},
}
CONFIGS = {"mlp": MLP_CONFIGS, "conv": CONV_CONFIGS}
INPUT_SHAPES = {"mlp": (64,), "conv": (32, 32, 3)}


def _kwargs(config):
    return {key: make() for key, make in config.items()}


def build_layers(model, config):
    if model == "mlp":
        return [
            keras.layers.Dense(
                units, activation=activation, kernel_initializer="orthogonal", **_kwargs(config)
            )
            for units, activation in [(512, "relu")] * 3 + [(10, None)]
        ]
    layers = []
    for stage, filters in enumerate((64, 128, 256)):
        if stage:
            layers.append(keras.layers.MaxPooling2D(2))
        for _ in range(2):
            layers.append(
                keras.layers.Conv2D(
                    filters,
                    3,
                    padding="same",
                    activation="relu",
                    kernel_initializer="orthogonal",
                    **_kwargs(config),
                )
            )
    layers.append(keras.layers.GlobalAveragePooling2D())
    layers.append(keras.layers.Dense(10, kernel_initializer="orthogonal", **_kwargs(config)))
    return layers


def build(model_name, config, jit_compile):
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input(INPUT_SHAPES[model_name])] + build_layers(model_name, config)
    )
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def flop_bound(model, batch_size, num_iterations=1):
    """`(step FLOPs, retraction FLOPs)`: matmul / convolution FLOPs of one train step.

    Forward: `2 * batch * in * out` for a `Dense`, `2 * batch * H_out * W_out * kh * kw *
    cin * cout` for a `Conv2D`; the backward pass twice that (input and kernel
    gradients), once for the first layer (no input gradient). Retraction of an `r x c`
    kernel matrix: `4 max(r, c) min(r, c)^2` per iteration.
    """
    step = retraction = 0
    first = True
    for layer in model.layers:
        if not hasattr(layer, "kernel"):
            continue
        shape = tuple(layer.kernel.shape)
        per_output = math.prod(layer.output.shape[1:-1])  # output pixels (1 for Dense)
        forward = 2 * batch_size * per_output * math.prod(shape)
        step += forward * (2 if first else 3)
        first = False
        rows, cols = math.prod(shape[:-1]), shape[-1]
        retraction += 4 * max(rows, cols) * min(rows, cols) ** 2 * num_iterations
    return step, retraction


class _EpochTimer(keras.callbacks.Callback):
    """Wall time and process CPU time (all threads) of one epoch."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start = (time.perf_counter(), time.process_time())

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = (
            time.perf_counter() - self.start[0],
            time.process_time() - self.start[1],
        )


def time_per_step(model, x, y, batch_size, steps, warmup_steps):
    timer = _EpochTimer()
    warm = batch_size * warmup_steps
    model.fit(x[:warm], y[:warm], batch_size=batch_size, epochs=1, verbose=0, shuffle=False)
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    return timer.seconds[0] / steps, timer.seconds[1] / steps


SCRIPT = "benchmarks/bench_parseval.py"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("mlp", "conv"), default="mlp")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument(
        "--warmup-steps", type=int, default=None, help="steps of the warm-up epoch (--steps)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-jit", action="store_true", help="compile without XLA")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if reported(args, SCRIPT):
        return
    recorder = Recorder(SCRIPT, sys.argv[1:] if argv is None else argv, args.json)
    warmup_steps = args.steps if args.warmup_steps is None else args.warmup_steps
    configs = CONFIGS[args.model]

    rng = np.random.default_rng(0)
    n = args.batch_size * args.steps
    x = rng.normal(size=(n, *INPUT_SHAPES[args.model])).astype("float32")
    y = rng.integers(0, 10, size=n)
    models = {name: build(args.model, config, not args.no_jit) for name, config in configs.items()}
    # Interleaved by `_timing.interleaved`; the statistics are `time_per_step`'s (the timed
    # epoch's wall and CPU time per step), not the whole call's time it also measures.
    times = {}
    interleaved(
        {
            name: (
                lambda m=model: time_per_step(m, x, y, args.batch_size, args.steps, warmup_steps)
            )
            for name, model in models.items()
        },
        args.repeats,
        warmup=0,
        results=times,
    )
    wall = {name: float(np.median([t[0] for t in ts])) for name, ts in times.items()}
    cpu = {name: float(np.median([t[1] for t in ts])) for name, ts in times.items()}

    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    recorder.table(
        "steps",
        f"Model {args.model}, batch {args.batch_size}, {args.steps} steps (warm-up "
        f"{warmup_steps}) x {args.repeats} repeats, jit_compile={not args.no_jit}, load "
        f"average {load} at the end",
        [
            ("configuration", ""),
            ("wall ms / step", ".2f"),
            ("ratio", ".2f"),
            ("CPU ms / step", ".2f"),
            ("ratio", ".2f"),
        ],
    )
    for name in configs:
        recorder.row(
            "steps",
            name,
            1e3 * wall[name],
            wall[name] / wall["none"],
            1e3 * cpu[name],
            cpu[name] / cpu["none"],
        )
    ours, theirs = "ParsevalRegularizer(1e-3)", "keras OrthogonalRegularizer(1e-3)"
    if theirs in configs:
        recorder.note(
            f"ParsevalRegularizer / OrthogonalRegularizer: wall {wall[ours] / wall[theirs]:.2f}x, "
            f"CPU {cpu[ours] / cpu[theirs]:.2f}x"
        )
    step, retraction = flop_bound(models["none"], args.batch_size)
    recorder.note(
        f"FLOP bound of {FULL}: retraction {retraction / 1e6:.1f} MFLOP / step "
        f"{step / 1e6:.1f} MFLOP -> predicted ratio {1 + retraction / step:.2f}x; "
        f"measured wall {wall[FULL] / wall['none']:.2f}x, CPU {cpu[FULL] / cpu['none']:.2f}x"
    )


if __name__ == "__main__":
    main()
