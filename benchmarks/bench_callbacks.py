"""Epoch time of an MLP on digits: schedule + callbacks vs a constant rate and no callbacks.

    .venv/bin/python benchmarks/bench_callbacks.py [--rounds 4] [--epochs 6] [--repeat 1] \
        [--json PATH]
    .venv/bin/python benchmarks/bench_callbacks.py --report PATH [--write-block]  # its table

`--repeat N` trains on the digits N times per epoch (N * 225 steps), for runs of realistic
length: `--repeat 20 --epochs 12` is about a 1-minute run per configuration.

Configurations (the same model, data and batch size; 225 steps per epoch):

- `baseline`: SGD with a constant learning rate, no callbacks;
- `ours`: SGD with `CyclicalLearningRate` + `LearningRateMonitor` + `EarlyStopping` (GL
  criterion on the training loss with an alpha it never reaches, restoring best weights);
- `baseline + ActivationStatistics`: the baseline plus `ActivationStatistics` on a 256-example
  probe over every layer (its overhead per epoch is reported);
- `baseline + GradientStatistics`: the baseline plus `GradientStatistics` recording every
  epoch on a 256-example probe over every layer (target: <= 3 % of the epoch time).

Each configuration is trained `--rounds` times for `--epochs` epochs, interleaved (the order
rotates every round); the first epoch of every run (tracing) is dropped; the minimum
and the median epoch times are reported (on a busy machine the minimum is the steadier figure),
with the time spent inside the callbacks' own hooks. Epoch times include every callback's
`on_epoch_end` work. `--json` records the run, `--report` prints the table of recorded runs
(`benchmarks/_results.py`).
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _results import Recorder, add_arguments, reported
from _timing import interleaved
from sklearn.datasets import load_digits

from keras_normkit import callbacks, schedules

BATCH_SIZE = 8
SCRIPT = "benchmarks/bench_callbacks.py"


class EpochTimer(keras.callbacks.Callback):
    """Wall time of each epoch, including the other callbacks' epoch-end work (it is placed
    last). Present in every configuration, so its own cost cancels."""

    def on_train_begin(self, logs=None):
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self._start)


def time_hooks(callback, spent):
    """Accumulate the wall time the callback's hooks take into `spent[0]`."""
    for hook in ("on_epoch_end", "on_train_batch_end", "on_epoch_begin"):
        method = getattr(callback, hook)

        def timed(*args, _method=method, **kwargs):
            start = time.perf_counter()
            _method(*args, **kwargs)
            spent[0] += time.perf_counter() - start

        setattr(callback, hook, timed)


def make_model(learning_rate):
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        keras.optimizers.SGD(learning_rate, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def configurations(x, y):
    def baseline():
        return make_model(0.01), []

    def ours():
        clr = schedules.CyclicalLearningRate(1e-3, 1e-2, step_size=450)
        stop = callbacks.EarlyStopping(monitor="loss", criterion="generalization_loss", alpha=1e6)
        return make_model(clr), [callbacks.LearningRateMonitor(), stop]

    def with_statistics():
        return make_model(0.01), [callbacks.ActivationStatistics(x[:256])]

    def with_gradients():
        return make_model(0.01), [callbacks.GradientStatistics((x[:256], y[:256]))]

    return {
        "baseline": baseline,
        "ours": ours,
        "baseline + ActivationStatistics": with_statistics,
        "baseline + GradientStatistics": with_gradients,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=1, help="passes over digits per epoch")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if reported(args, SCRIPT):
        return
    recorder = Recorder(SCRIPT, sys.argv[1:] if argv is None else argv, args.json)

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    x, y = np.tile(x, (args.repeat, 1)), np.tile(y, args.repeat)
    steps = int(np.ceil(len(x) / BATCH_SIZE))
    configs = configurations(x, y)

    def train(configuration):
        """Train one run; `(epoch times without the tracing epoch, hook seconds per epoch)`."""
        model, extra = configuration()
        spent = [0.0]
        for callback in extra:
            time_hooks(callback, spent)
        timer = EpochTimer()
        model.fit(
            x,
            y,
            batch_size=BATCH_SIZE,
            epochs=args.epochs,
            callbacks=[*extra, timer],
            verbose=0,
        )
        return timer.times[1:], spent[0] / args.epochs  # drop the tracing epoch

    # The runs are interleaved by `_timing.interleaved` (the order rotates every round); the
    # epoch times are those of `EpochTimer`, not the whole run's time it also measures.
    runs = {}
    interleaved(
        {name: (lambda c=configuration: train(c)) for name, configuration in configs.items()},
        args.rounds,
        warmup=0,
        order="rotate",
        results=runs,
    )
    times = {name: [t for epochs, _ in r for t in epochs] for name, r in runs.items()}
    hooks = {name: [spent for _, spent in r] for name, r in runs.items()}

    recorder.table(
        "epochs",
        f"MLP 64-256-256-10 on digits, {steps} steps per epoch, "
        f"{len(times['baseline'])} timed epochs per configuration",
        [
            ("configuration", ""),
            ("min epoch (s)", ".3f"),
            ("ratio", ".3f"),
            ("median epoch (s)", ".3f"),
            ("ratio", ".3f"),
            ("in the callbacks' hooks (ms / epoch)", ".1f"),
        ],
    )
    base_min, base_median = min(times["baseline"]), statistics.median(times["baseline"])
    for name, values in times.items():
        low, median = min(values), statistics.median(values)
        hook = None if name == "baseline" else 1000 * statistics.median(hooks[name])
        recorder.row("epochs", name, low, low / base_min, median, median / base_median, hook)
    for name in ("ours", "baseline + GradientStatistics"):
        ratio = min(times[name]) / base_min
        verdict = "met" if ratio <= 1.03 else "NOT met"
        recorder.note(
            f"{name} / baseline (min epoch time) = {ratio:.3f}, target <= 1.03: {verdict}"
        )


if __name__ == "__main__":
    main()
